package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Admin is what the operator CLI needs beyond the send path: settling a row
// by hand, finding every row of one business event, and listing the rows
// that need a human. Both implementations (dynamoledger, memledger) pass
// the conformance cases in package ledgertest (RunAdmin).
//
// Nothing here is on the send path: the event lookup reads an index that
// Claim writes once and nothing else changes, and abandoned rows keep an
// index entry of their own (AbandonedShard) that only the abandon path
// writes.
type Admin interface {
	// Resolve settles a row by hand: one write conditional on the row
	// still being in r.FromState under r.FromClaimID (what the caller
	// read), so a row that moved since is never overwritten. A final row
	// is refused with ErrFinal, and a PENDING row whose lease has not
	// passed (a worker may be calling the provider now) with ErrInFlight,
	// unless r.Force is set. The row becomes final in r.State with the
	// audit fields set (ResolvedBy, ResolvedAt, ResolvedReason,
	// ResolvedFrom); like Mark's final outcomes it drops the address and
	// the rendered message and leaves the attention index, so the
	// reconciler never touches it again. It returns the row as written,
	// an error matching ErrNotFound when no live row holds the key, or a
	// *ConflictError holding the current row when it moved since it was
	// read.
	Resolve(ctx context.Context, r Resolution) (Record, error)

	// ByEvent returns every live row of tenant's business event eventID
	// (all recipients, channels and templates), ordered by key. Rows
	// claimed before the event lookup existed (no EventID) are not found.
	ByEvent(ctx context.Context, tenant, eventID string) ([]Record, error)

	// Abandoned returns one page of ABANDONED rows of one shard, oldest
	// first (by when they were abandoned), without scanning the table.
	Abandoned(ctx context.Context, q AbandonedQuery) (AttentionPage, error)

	// Failed returns one page of FAILED rows from a scan of the whole
	// table, in no particular order. A scan reads every item (cost grows
	// with the table, not with the result): callers must say so.
	Failed(ctx context.Context, q ScanQuery) (AttentionPage, error)
}

// Resolution is a hand-made settlement of a row (Admin.Resolve).
type Resolution struct {
	Key string
	// FromState and FromClaimID are the row's state and claim id as the
	// caller read them: the write is fenced on both.
	FromState   State
	FromClaimID string
	// State is the final state to settle in: SENT, FAILED or ABANDONED.
	State State
	// Reason says why (required).
	Reason string
	// By is who settled it (the caller's identity, e.g. an IAM ARN;
	// required).
	By string
	// ProviderMessageID, if set, is recorded (e.g. the id the operator
	// found at the provider).
	ProviderMessageID string
	// Force allows settling a final row or an in-flight PENDING row.
	Force bool
}

// Check returns an error naming what is wrong with r, or nil.
func (r Resolution) Check() error {
	switch {
	case r.Key == "":
		return errors.New("empty key")
	case !r.State.Final():
		return fmt.Errorf("resolve to %q: want SENT, FAILED or ABANDONED", r.State)
	case r.FromState == "":
		return errors.New("no current state: read the row first")
	case r.Reason == "":
		return errors.New("empty reason")
	case r.By == "":
		return errors.New("empty caller identity")
	}
	return nil
}

// Refused returns ErrFinal or ErrInFlight (wrapped with detail) when cur
// may not be resolved without Force, else nil.
func (r Resolution) Refused(cur Record, now time.Time) error {
	if r.Force {
		return nil
	}
	if cur.State.Final() {
		return fmt.Errorf("%w: row is %s", ErrFinal, cur.State)
	}
	if cur.State == StatePending && now.Before(cur.LeaseUntil) {
		return fmt.Errorf("%w: its lease runs until %s", ErrInFlight, cur.LeaseUntil.UTC().Format(time.RFC3339))
	}
	return nil
}

// AbandonedQuery selects ABANDONED rows from one shard.
type AbandonedQuery struct {
	// Shard is in [0, AttentionShards).
	Shard int
	// Before limits the page to rows abandoned before this time (zero: no
	// limit).
	Before time.Time
	// Limit caps the rows returned (0: the store's default page).
	Limit int
	// Cursor continues a previous page; empty for the first.
	Cursor string
}

// ScanQuery pages through a scan.
type ScanQuery struct {
	// Limit caps the items read per page (0: the store's default page).
	Limit int
	// Cursor continues a previous page; empty for the first.
	Cursor string
}

// Errors of Admin.Resolve, to be matched with errors.Is.
var (
	// ErrFinal: the row is already final and Force was not given.
	ErrFinal = errors.New("ledger: row is final")
	// ErrInFlight: the row is PENDING under a live lease and Force was
	// not given.
	ErrInFlight = errors.New("ledger: row is in flight")
)

// DueAt is when a row started to need attention, the order every listing
// uses: a PENDING row when its lease passes, an UNCERTAIN, ABANDONED or
// FAILED row when it entered that state.
func (r Record) DueAt() time.Time {
	if r.State == StatePending {
		return r.LeaseUntil
	}
	return r.UpdatedAt
}
