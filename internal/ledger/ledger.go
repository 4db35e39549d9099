// Package ledger defines the send ledger: one row per logical message,
// keyed by its idempotency key (package sendkey), that makes a send
// effectively exactly-once.
//
// A worker claims the key with one conditional write before it calls the
// provider, and records the outcome with a second conditional write that
// holds only while it still owns the claim. A duplicate delivery costs one
// failed conditional write and no read: the failed write returns the row it
// collided with.
//
// In the path of one SQS record (docs/architecture.md) the ledger holds two
// steps, the claim and the mark. dispatch.Dispatcher.Claim calls
// Ledger.Claim with the Entry the sender built from the request and its
// key (sendkey.Derive, the step before the claim); dispatch.Dispatcher.Send
// then calls provider.Adapter.Send (the step after it) and records the
// provider's answer as an Outcome with Ledger.Mark under that claim;
// sender.Sender.HandleSQS acknowledges the record or lists it for retry in
// the batch response (the step after the mark).
//
// # States
//
//	Claim (no live row)
//	       │
//	       ▼
//	┌─► PENDING ── Release ──► PENDING (lease over, Released; due for the
//	│      │                        │  reconciler at RetryAt)
//	│      │                        └─► TakeOver ─► PENDING (next attempt)
//	│      ├── Mark ──► SENT        (final)
//	│      ├── Mark ──► FAILED      (final)
//	│      ├── Mark ──► ABANDONED   (final; by reconciler policy)
//	│      └── Mark ──► UNCERTAIN   (the provider may have it)
//	│                        │
//	└──── TakeOver ◄─────────┴── or a stale PENDING (lease passed:
//	      (fenced on the          its worker died mid-send)
//	       old ClaimID)
//
// Final rows keep the outcome, the provider's message id, the reason,
// timestamps and the attempt count, but neither the message's content or
// render inputs nor the raw address.
//
// # What a row holds
//
// A row holds the render inputs, never a rendered copy: for a stored
// template its version, locale and data (Entry.TemplateVersion,
// TemplateLocale, Data; versions are immutable, so a resend renders them
// again to the same bytes), for a pre-rendered request the content
// itself. The first attempt sends what the sender rendered from the
// request. So a typical row, and a stored-template email with a 20 KB HTML
// part, stays under 1 KB: one write unit per write.
//
// # Attention index
//
// The reconciler reads a sparse, sharded attention index (Attention). It
// holds only the rows that need the reconciler (Record.Indexed):
//
//   - UNCERTAIN rows (Mark);
//   - released claims (Release), due at their RetryAt;
//   - rows taken over (TakeOver: after a stale lease, a release or an
//     uncertain mark), due when the new lease passes;
//   - abandoned rows, for the operator's list, under partition values of
//     their own (not in the reconciler's shards).
//
// A first claim is not indexed, and a final SENT or FAILED mark removes
// the row from the index. A first send therefore costs two writes (the
// claim's put and the mark's update, each one unit for a row under 1 KB)
// and no index write.
//
// # Why no message is stranded
//
// A message is stranded if its row is PENDING, nobody holds its claim,
// the reconciler cannot see it and no delivery of its SQS message is left.
// Case by case (tests in package ledgertest unless named):
//
//   - The worker dies (crash, timeout, lost network) after a first claim,
//     before its mark. The row is PENDING, unindexed. Its SQS message was
//     not deleted, so it becomes visible again after the visibility
//     timeout and is received again. The template guarantees that a
//     receive comes after the lease has passed before the receives run
//     out (infra invariant RedeliveryOutlivesClaim: maxReceiveCount ×
//     visibility ≥ 2 × claim timeout, with maxReceiveCount ≥ 2). That
//     redelivery finds the stale row and takes it over, which indexes it
//     (Attention/Indexing/TakeOverAfterStaleLease; in package sender,
//     TestStaleClaimTakenOverByRedelivery; in package reconcile,
//     TestStaleAndReleasedPending checks the reconciler leaves a stale
//     first claim to the redelivery).
//   - The worker dies after a takeover. The takeover indexed the row, due
//     when its lease passes: the reconciler takes it over
//     (Attention/Indexing/TakeOverAfterStaleLease, then
//     reconcile TestStaleAndReleasedPending).
//   - The provider call fails without sending (transient, configuration):
//     the claim is released, which indexes it, due at its backoff; the SQS
//     record is retried too (Attention/Indexing/Release).
//   - The provider call ends ambiguously: Mark UNCERTAIN indexes the row,
//     due at once (Attention/Indexing/Uncertain,
//     Attention/Indexing/FirstClaimMarkedUncertain).
//   - The ledger's answer to a Claim or TakeOver is lost: the worker
//     releases the claim it tried to take (indexing it if it applied) and
//     the SQS record is retried. If the release is lost too, the row is a
//     first claim whose worker is gone: the first case.
//   - The mark after a send is lost or fails: the SQS record is retried and
//     its redelivery finds a stale row: the first case (it takes the row
//     over and asks the provider, or marks it uncertain, before sending).
//   - The receives run out while the row is still an unindexed first
//     claim (every redelivery came while the lease was live, or found the
//     ledger unavailable): the message moves to the dead-letter queue,
//     whose depth raises an alarm (docs/operations.md), and `sendonce dlq
//     redrive` puts it back on the queue; its next delivery is the first
//     case. The dead-letter queue keeps the message at least as long as the
//     queue (invariant DLQOutlivesQueue) and the row outlives both
//     (LedgerOutlivesMessages).
//   - A deploy changes the indexing: rows claimed by an earlier release
//     were indexed at the claim and stay so until their mark; the
//     reconciler handles them as before.
//
// A final mark removes the row from the index whatever led there
// (Attention/Indexing/*: "then SENT", "then FAILED"; LeavesOnFinalMark).
//
// # Fencing
//
// Every claim carries a fresh ClaimID (the fencing token). A takeover is
// conditional on the previous ClaimID, and every transition out of PENDING
// (Mark, Release) is conditional on state PENDING and the caller's ClaimID.
// A worker whose claim was taken over gets ErrFencingLost from Mark: if it
// had already sent, that is a possible duplicate, and the caller counts it
// (metric FencingLost); it never overwrites the newer claim's row.
//
// # Lost answers
//
// A write whose answer is lost (a timeout, a cancelled invocation, an
// error after the SDK's retries) may or may not have applied. Claim and
// TakeOver then return the claim they tried to take beside the error; the
// worker must Release it before it gives up, because an applied claim that
// nobody releases looks, once its lease passes, like a worker that died
// mid-send. Release is fenced on that claim, so it changes nothing when the
// write never applied, and it is idempotent, so it may be retried.
//
// # Expiry
//
// Every row carries an expiry (ExpiresAt, the table's TTL attribute). A row
// whose expiry has passed is treated as absent by every condition, because
// DynamoDB deletes expired items late (up to days).
//
// # Delivery status
//
// Provider callbacks (package webhook) record a delivery status with a rank;
// a status is only written over one of lower rank, so late and duplicate
// callbacks never move it backwards. Delivery attributes are independent of
// the send state: a callback that arrives before the sender recorded SENT is
// kept, and Mark never touches it.
package ledger

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"time"
	"unicode/utf8"
)

// State is where a row is in the state machine of the package doc.
type State string

// The states.
const (
	// StatePending: claimed; the owner may be calling the provider now.
	StatePending State = "PENDING"
	// StateSent: the provider accepted the message. Final.
	StateSent State = "SENT"
	// StateFailed: the provider, or validation, rejected the message for
	// good. Final.
	StateFailed State = "FAILED"
	// StateUncertain: the provider call ended ambiguously (a timeout after
	// the request was written); the message may have gone out. The
	// reconciler resolves it.
	StateUncertain State = "UNCERTAIN"
	// StateAbandoned: the reconciler gave up (class policy, the limit of
	// attempts that may have reached the provider, or the maximum age)
	// without knowing whether the message went out. Final.
	StateAbandoned State = "ABANDONED"
)

// Final reports whether s is a final state: no transition leaves it.
func (s State) Final() bool {
	return s == StateSent || s == StateFailed || s == StateAbandoned
}

// NeedsAttention reports whether rows in state s may need attention: a
// PENDING or UNCERTAIN row. Whether a row is in the attention index is
// Record.Indexed.
func (s State) NeedsAttention() bool {
	return s == StatePending || s == StateUncertain
}

// Entry is what a claim writes: what identifies the message and everything
// a later resend needs without the original request.
type Entry struct {
	Key         string
	Tenant      string
	Channel     string
	Class       string
	Provider    string
	Template    string
	RecipientID string
	// Address is the raw phone number, email address or push target. It is
	// kept only while the row is not final.
	Address string
	// Subject, Body and HTML (an email's optional HTML part) are a
	// pre-rendered request's content, kept only while the row is not
	// final. A row holds the render inputs, never a rendered copy: for a
	// stored template they are empty and the row holds TemplateVersion,
	// TemplateLocale and Data instead (rows written before that kept the
	// rendered copy, which is then sent as stored).
	Subject string
	Body    string
	HTML    string
	// TemplateVersion is the stored template version that rendered the
	// message (package templates), TemplateLocale that version's locale
	// ("" its default). Zero for pre-rendered content. Versions are
	// immutable, so a resend renders them again to the same bytes
	// (Rendered). Kept for the row's whole life, so a sent message can be
	// traced to the text it used.
	TemplateVersion int
	TemplateLocale  string
	// EventID is the producer's id of the business event; Claim writes it
	// once, for the event lookup (Admin.ByEvent).
	EventID string
	// Data is the request's template data as JSON, the stored template's
	// render input. Kept only while the row is not final.
	Data string
	// ValidUntil is the message's validity: the earlier of the request's
	// expires_at and its class's default validity (zero: none). Past it
	// the message is never sent by anyone; the row ends final with a
	// reason starting "expired" (package decide). Claim writes it once,
	// in the same write, and the row keeps it for its whole life. It is
	// not part of the key.
	ValidUntil time.Time
	// Trace is the X-Ray trace header of the delivery that first claimed
	// the row (package tracing), when it was traced: a reconcile
	// worker's spans join the message's trace through it. Claim writes
	// it once.
	Trace string
}

// Expired reports whether e's validity has passed at now: a message with
// no validity never expires. A message is valid up to and including its
// ValidUntil.
func (e Entry) Expired(now time.Time) bool {
	return !e.ValidUntil.IsZero() && now.After(e.ValidUntil)
}

// Rendered reports whether e carries its message's text (a pre-rendered
// request's content, or a row written before rows held render inputs)
// rather than the inputs to render it again from TemplateVersion.
func (e Entry) Rendered() bool {
	return e.TemplateVersion == 0 || e.Subject != "" || e.Body != "" || e.HTML != ""
}

// Record is one ledger row as stored.
type Record struct {
	Entry
	State State
	// ClaimID is the fencing token of the latest claim.
	ClaimID string
	// Attempts counts claims: 1 after the first claim, +1 per takeover.
	Attempts int
	// Releases counts the claims that were released: Attempts − Releases
	// is the number of attempts that may have reached the provider.
	Releases int
	// Released is true when the latest claim was released before its
	// provider call could have sent anything, so a takeover may send
	// without first asking the provider.
	Released   bool
	LeaseUntil time.Time
	// RetryAt is when a released row is next due for the reconciler (its
	// backoff); zero unless Released. A sender's redelivery may take a
	// released row over at once.
	RetryAt time.Time
	// AttemptedAt is when the latest claim was taken: a provider's "no
	// record" answer is trusted only once the settle time has passed since.
	AttemptedAt time.Time
	// LookupFrom is when the earliest attempt that may have reached the
	// provider unrecorded started: the first claim, or the first takeover
	// after a release (released attempts sent nothing). A takeover of a row
	// that was not released keeps it, so a lookup always covers the attempt
	// being resolved, even after takeovers that sent nothing. Zero on rows
	// written before it existed: use AttemptedAt.
	LookupFrom        time.Time
	CreatedAt         time.Time
	UpdatedAt         time.Time
	ExpiresAt         time.Time
	ProviderMessageID string
	// Reason explains FAILED, UNCERTAIN, ABANDONED and the latest release.
	Reason         string
	DeliveryStatus string
	DeliveryRank   int
	DeliveryAt     time.Time
	// History lists the row's earlier attempts, oldest first, as
	// AttemptSummary wrote them when a takeover replaced each: its number,
	// its provider and how it ended ("released: ...", "uncertain: ...",
	// "lease passed"). The latest attempt is the row itself. At most
	// MaxHistory are kept (the latest).
	History []string
	// The audit of a hand-made settlement (Admin.Resolve): who, when, why,
	// and the state the row was in. Empty unless the row was resolved.
	ResolvedBy     string
	ResolvedAt     time.Time
	ResolvedReason string
	ResolvedFrom   State
}

// MaxHistory bounds Record.History, and maxSummary each of its entries,
// so that a row taken over many times stays small (a row under 1 KB costs
// one write unit per write).
const (
	MaxHistory = 5
	maxSummary = 80
)

// AttemptSummary describes how r's latest attempt ended, as a takeover
// records it in History: "2 twilio released: transient: 20429: too many
// requests", "1 http uncertain: timeout", "1 sns lease passed".
func AttemptSummary(r Record) string {
	p := r.Provider
	if p == "" {
		p = "none"
	}
	s := fmt.Sprintf("%d %s ", r.Attempts, p)
	switch {
	case r.Released:
		s += "released: " + r.Reason
	case r.State == StateUncertain:
		s += "uncertain: " + r.Reason
	default:
		s += "lease passed"
	}
	if len(s) > maxSummary {
		s = s[:maxSummary-3] + "..."
		for !utf8.ValidString(s) {
			s = s[:len(s)-4] + "..."
		}
	}
	return s
}

// NextHistory is r.History with AttemptSummary(r) appended, at most
// MaxHistory entries (the latest): what a takeover of r writes.
func NextHistory(r Record) []string {
	h := append(slices.Clone(r.History), AttemptSummary(r))
	if len(h) > MaxHistory {
		h = h[len(h)-MaxHistory:]
	}
	return h
}

// LookupStart is where a lookup's time window for r starts: LookupFrom,
// or AttemptedAt on a row written before LookupFrom existed.
func (r Record) LookupStart() time.Time {
	if r.LookupFrom.IsZero() {
		return r.AttemptedAt
	}
	return r.LookupFrom
}

// Indexed reports whether r is in the attention index (see the package
// doc, Attention index): an UNCERTAIN row, or a PENDING row that was
// released or taken over. A first claim is not indexed, and final rows
// leave the index.
func (r Record) Indexed() bool {
	switch r.State {
	case StateUncertain:
		return true
	case StatePending:
		return r.Released || r.Attempts > 1
	}
	return false
}

// Stale reports whether r is PENDING and its lease has passed at now.
func (r Record) Stale(now time.Time) bool {
	return r.State == StatePending && !now.Before(r.LeaseUntil)
}

// Claim is a held claim on a key: the fencing token every later transition
// presents. Claim and TakeOver also return the claim they tried to take
// with an error that may hide an applied write (see Ledger): its ClaimID is
// then set, and releasing it is harmless whether or not the write applied.
type Claim struct {
	Key        string
	ClaimID    string
	Attempt    int
	LeaseUntil time.Time
	// AttemptedAt is when this claim was taken.
	AttemptedAt time.Time
}

// Outcome is what Mark records.
type Outcome struct {
	// State is StateSent, StateFailed, StateUncertain or StateAbandoned.
	State State
	// ProviderMessageID is the provider's id of the message, if known.
	ProviderMessageID string
	// Reason explains a FAILED, UNCERTAIN or ABANDONED outcome.
	Reason string
}

// Delivery is a delivery status reported by a provider callback.
type Delivery struct {
	// Status is the provider-neutral status ("sent", "delivered",
	// "undelivered", "failed", "bounced", ...).
	Status string
	// Rank orders statuses of one channel: a status is applied only over a
	// lower rank. Ranks start at 1.
	Rank int
	// At is when the provider saw the status.
	At time.Time
	// ProviderMessageID, if set, is recorded when the row has none yet.
	ProviderMessageID string
}

// AttentionShards is how many shards the attention index spreads over, so
// that a burst of uncertain rows never lands on one hot partition: each
// shard is one index partition, about 1,000 writes a second, so 64 take
// about 64,000 index writes a second, more than a drain at the table's
// default 40,000 write units a second makes (docs/scale.md).
//
// It was 16. Raising it is backward compatible because a shard is the
// key's hash modulo the count (Shard) and a reader reads every shard
// 0..AttentionShards−1: a row a release with 16 indexed in shard h mod 16
// is still read there (a shard below 16), and its next write moves it to
// h mod 64. Lowering it would not be: rows in the shards above the new
// count would no longer be read.
//
// What it costs: a Find (and `sendonce list`) makes one Query per shard
// at least, 64 instead of 16: 48 more eventually consistent Queries of
// half a read unit when a shard's page is small, about 24 read units a
// run, a run a minute.
const AttentionShards = 64

// Shard returns the attention-index shard of key: FNV-1a of the key modulo
// AttentionShards. Every implementation shards with it.
func Shard(key string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return int(h.Sum32() % AttentionShards)
}

// AttentionQuery selects rows from one shard of the attention index.
type AttentionQuery struct {
	// Shard is in [0, AttentionShards).
	Shard int
	// DueBefore limits the page to rows due before this time: UNCERTAIN
	// rows are due from their last update, released rows at their
	// RetryAt, other PENDING rows when their lease passes (Due).
	DueBefore time.Time
	// DueFrom, when set, limits the page to rows due at or after it: the
	// rows that became due lately, behind a backlog of older ones.
	DueFrom time.Time
	// Limit caps the rows returned (0: the store's default page).
	Limit int
	// Cursor continues a previous page; empty for the first.
	Cursor string
}

// AttentionPage is one page of the attention index, oldest due first.
type AttentionPage struct {
	// Records may hold fewer rows than the query's limit, even none, while
	// Cursor is not empty (rows past their expiry are skipped after the
	// limit): only an empty Cursor ends the shard.
	Records []Record
	// Cursor continues after this page; empty when the shard is done.
	Cursor string
}

// Due is when r is due for attention: an UNCERTAIN row from when it was
// marked, a released row at its RetryAt (its lease end if none), another
// PENDING row when its lease passes.
func Due(r Record) time.Time {
	switch {
	case r.State == StateUncertain:
		return r.UpdatedAt
	case r.Released && r.RetryAt.After(r.LeaseUntil):
		return r.RetryAt
	}
	return r.LeaseUntil
}

// CheckClaim returns an input error unless key is set and lease is above
// zero: what every implementation's Claim and TakeOver check before they
// write.
func CheckClaim(key string, lease time.Duration) error {
	if key == "" {
		return errors.New("empty key")
	}
	if lease <= 0 {
		return fmt.Errorf("lease %v: must be positive", lease)
	}
	return nil
}

// Ledger is the send ledger. Implementations: package dynamoledger
// (production, DynamoDB) and package memledger (unit tests); both pass the
// conformance suite in package ledgertest.
type Ledger interface {
	// Claim claims e.Key for lease with one conditional write that
	// succeeds when no row exists or the existing row has expired. When a
	// live row exists it returns a *ConflictError holding that row (and
	// matching ErrExists), at the cost of that one failed write.
	//
	// Lost answers: with any other error but an input error (a timeout, a
	// cancelled context, a DynamoDB error after the SDK's retries) the
	// write may have applied. Claim then returns, with the error, the
	// Claim it tried to take (Key, ClaimID, Attempt, LeaseUntil,
	// AttemptedAt): the caller must Release it, which is fenced on that
	// ClaimID and so harmless if the write never applied. With an input
	// error or a conflict the Claim is zero.
	Claim(ctx context.Context, e Entry, lease time.Duration) (Claim, error)

	// TakeOver replaces the claim of cur, which must be a stale PENDING row
	// or an UNCERTAIN row, with a new claim for lease. It is conditional on
	// cur.ClaimID still being the row's claim and the row still being
	// stale or uncertain; otherwise it returns a *ConflictError holding the
	// current row (matching ErrExists), or ErrNotFound if the row is gone.
	// Like Claim, with any other error but an input error it returns the
	// Claim it tried to take (Attempt cur.Attempts+1), for the caller to
	// Release. The row's LookupFrom becomes the takeover's time when cur
	// was read released (nothing was sent before), and is kept otherwise.
	// The row's History becomes NextHistory(cur): the attempt it replaces
	// is summarised there, so cur must be the row as read. The row's
	// Provider becomes provider when that is set: the
	// provider of the new attempt, which the caller chooses (the row's own
	// while an earlier attempt may have sent, dispatch.AttemptAdapter).
	TakeOver(ctx context.Context, cur Record, provider string, lease time.Duration) (Claim, error)

	// Mark records the outcome of claim c. It is conditional on the row
	// being PENDING under c.ClaimID; otherwise it returns an error matching
	// ErrFencingLost and changes nothing. A final outcome drops the
	// content or render inputs and the raw address from the row and
	// leaves the attention index; UNCERTAIN keeps both and indexes the row.
	Mark(ctx context.Context, c Claim, o Outcome) error

	// Release gives claim c up because nothing was sent (a transient
	// provider error, a configuration error, a lost ledger answer before
	// the provider call): the lease ends at once and the row is marked
	// Released, so the next delivery may take it over and send without
	// asking the provider. The row is due for the reconciler at retryAt
	// (now when retryAt is zero or past): its backoff. Releases counts the
	// claim once: releasing a released claim again is a no-op that
	// succeeds (so a retry of a Release whose answer was lost is
	// harmless). It returns an error matching ErrFencingLost if c no longer
	// holds the row.
	Release(ctx context.Context, c Claim, reason string, retryAt time.Time) error

	// Get returns the row of key with a strongly consistent read, or
	// ErrNotFound (also for an expired row).
	Get(ctx context.Context, key string) (Record, error)

	// Attention returns one page of the rows in one shard of the attention
	// index (Record.Indexed: uncertain, released and taken-over rows; not
	// first claims), oldest due first.
	Attention(ctx context.Context, q AttentionQuery) (AttentionPage, error)

	// ApplyDelivery records a delivery status on key's row if d.Rank is
	// higher than the row's current delivery rank. applied is false when
	// the row already has an equal or higher rank (a duplicate or a late,
	// out-of-order callback). It returns ErrNotFound if no live row exists.
	ApplyDelivery(ctx context.Context, key string, d Delivery) (applied bool, err error)
}

// Errors returned by every Ledger implementation, to be matched with
// errors.Is.
var (
	// ErrExists: a live row already holds the key; see *ConflictError.
	ErrExists = errors.New("ledger: key already claimed")
	// ErrNotFound: no live row holds the key.
	ErrNotFound = errors.New("ledger: no such key")
	// ErrFencingLost: the caller's claim no longer holds the row.
	ErrFencingLost = errors.New("ledger: claim lost (fenced out)")
)

// ConflictError is returned when a conditional write finds a live row in
// the way. Current is that row as it was at the failed write, returned by
// the write itself (no extra read).
type ConflictError struct {
	Op      string
	Current Record
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("ledger: %s %s: key held in state %s (attempt %d)", e.Op, e.Current.Key, e.Current.State, e.Current.Attempts)
}

// Is makes errors.Is(err, ErrExists) true.
func (e *ConflictError) Is(target error) bool { return target == ErrExists }

// AsConflict returns the row carried by a *ConflictError in err's chain.
func AsConflict(err error) (Record, bool) {
	var ce *ConflictError
	if errors.As(err, &ce) {
		return ce.Current, true
	}
	return Record{}, false
}

// OwnerIndex is implemented by ledgers that record which key each
// provider message id belongs to (dynamoledger, memledger). It makes a
// proof by exclusion possible: when every message a content search found
// at the provider (provider.LookupResult.Candidates) is recorded for
// another key, none of them is this key's, and the lookup's answer is
// "not found" (package dispatch). A missing record only leaves the answer
// unproven: an index that lags is safe, one that is wrong would not be,
// so an id is recorded only for the key whose send the provider answered
// with it.
type OwnerIndex interface {
	// RecordOwner records that provider's message id belongs to key.
	RecordOwner(ctx context.Context, provider, id, key string) error
	// Owners returns the owner key of each of provider's ids the index
	// holds (ids it does not hold are absent), in one request for up to
	// 100 ids.
	Owners(ctx context.Context, provider string, ids []string) (map[string]string, error)
}
