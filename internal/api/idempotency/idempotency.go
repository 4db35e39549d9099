// Package idempotency keeps the HTTP API's idempotency records (package
// api): which request first used an Idempotency-Key, whether it is still
// in flight, and the response to replay.
//
// # Records
//
// A record is created in flight, holding the request's fingerprint, a
// fencing token and a lease, by Store.Begin; Complete stores the response
// (completed); Abandon deletes an in-flight record so a retry starts
// afresh. Every write is conditional on the token of the request that
// holds the record. A record lives for the retention (its TTL); a record
// past it counts as absent.
//
//	(absent) ──Begin──► in flight ──Complete──► completed ──(retention)──► (absent)
//	                      │  ▲
//	                      │  └── Begin after the lease passed: taken over, fenced on the dead token
//	                      └──Abandon──► (absent)
//
// The Store decides; Records only write conditionally (package
// dynamoidempotency in the one table, package memidempotency in unit
// tests, both held to package idempotencytest's suite).
package idempotency

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Defaults of the API's idempotency records.
const (
	// DefaultRetention is how long a record is kept.
	DefaultRetention = 24 * time.Hour
	// DefaultLease is how long an in-flight record is owned before a
	// retry may take it over.
	DefaultLease = 30 * time.Second
)

var (
	// ErrFencingLost is returned by Store.Complete when the record is no
	// longer held by the caller's token (it was taken over or expired).
	ErrFencingLost = errors.New("idempotency: record lost (fenced out)")
	// ErrConflict is returned by a Records write whose condition failed,
	// beside the record in the way (zero when there is none).
	ErrConflict = errors.New("idempotency: condition failed")
)

// Fingerprint identifies a request's content: Sum is the SHA-256 of its
// canonical JSON; Fields holds a short hash per top-level field so a
// mismatch can be named without storing the request (or its addresses).
type Fingerprint struct {
	Sum    string
	Fields map[string]string
}

// Differ returns the names of fields whose hashes differ between f and o,
// sorted.
func (f Fingerprint) Differ(o Fingerprint) []string {
	var d []string
	for k, v := range f.Fields {
		if o.Fields[k] != v {
			d = append(d, k)
		}
	}
	for k := range o.Fields {
		if _, ok := f.Fields[k]; !ok {
			d = append(d, k)
		}
	}
	slices.Sort(d)
	return slices.Compact(d)
}

// Verdict is what Begin found for a key.
type Verdict int

// The verdicts of Begin.
const (
	// Started: the caller holds a new (or taken-over) in-flight record and
	// must Complete or Abandon it.
	Started Verdict = iota + 1
	// Replay: a completed record with the same fingerprint; answer with
	// its stored response.
	Replay
	// Mismatch: the key was used with a different request.
	Mismatch
	// InFlight: another request with this key holds a live lease.
	InFlight
)

// Begun is the result of Begin.
type Begun struct {
	Verdict Verdict
	// Token is the fencing token of a Started record.
	Token string
	// TookOver is true when Started replaced a dead in-flight record.
	TookOver bool
	// Status, Body and LedgerKey are the stored response of a Replay.
	Status    int
	Body      string
	LedgerKey string
	// Differ names the fields that differ, for a Mismatch.
	Differ []string
	// RetryAfter is how long the live lease has left, for InFlight.
	RetryAfter time.Duration
}

// Record is one idempotency record.
type Record struct {
	// ID is "<tenant>#<hex SHA-256 of the Idempotency-Key>".
	ID          string
	Fingerprint Fingerprint
	// Token is the fencing token of the request holding the record.
	Token     string
	LedgerKey string
	// LeaseUntil (whole milliseconds) ends an in-flight record's lease.
	LeaseUntil time.Time
	CreatedAt  time.Time
	// ExpiresAt (whole seconds) ends the record's life: from then on it
	// counts as absent.
	ExpiresAt time.Time
	// Completed is set, with the stored response Status and Body, by
	// Complete.
	Completed bool
	Status    int
	Body      string
}

// Records writes idempotency records conditionally. A write whose
// condition fails returns an error matching ErrConflict and the record in
// the way (zero if there is none): what DynamoDB returns with
// ReturnValuesOnConditionCheckFailure. Implementations are safe for
// concurrent use.
type Records interface {
	// Create stores r unless a live record has r.ID (one whose ExpiresAt
	// is after now, in whole seconds).
	Create(ctx context.Context, r Record, now time.Time) (Record, error)
	// Replace stores r over the in-flight record r.ID held by token.
	Replace(ctx context.Context, r Record, token string) (Record, error)
	// Complete marks the in-flight record id held by token completed with
	// status and body, and ends its lease.
	Complete(ctx context.Context, id, token string, status int, body string) (Record, error)
	// Delete deletes the in-flight record id held by token; any other
	// record is left alone, and that is not an error.
	Delete(ctx context.Context, id, token string) error
}

// Store decides what a request with an Idempotency-Key may do, over
// Records. It is safe for concurrent use.
type Store struct {
	records   Records
	lease     time.Duration
	retention time.Duration
	now       func() time.Time
}

// Config configures a Store. The zero value is the production setting.
type Config struct {
	// Lease is how long an in-flight record is owned before a retry may
	// take it over; zero means DefaultLease.
	Lease time.Duration
	// Retention is how long records are kept; zero means
	// DefaultRetention.
	Retention time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// New returns a Store over records (dynamoidempotency.New for the
// sendonce table).
func New(records Records, cfg Config) *Store {
	s := &Store{records: records, lease: cfg.Lease, retention: cfg.Retention, now: cfg.Now}
	if s.lease == 0 {
		s.lease = DefaultLease
	}
	if s.retention == 0 {
		s.retention = DefaultRetention
	}
	if s.now == nil {
		s.now = time.Now
	}
	return s
}

// ID returns the record id of tenant's Idempotency-Key key.
func ID(tenant, key string) string {
	sum := sha256.Sum256([]byte(key))
	return tenant + "#" + hex.EncodeToString(sum[:])
}

// Begin claims (tenant, key) for a request with fingerprint fp that will
// enqueue ledgerKey. It creates an in-flight record unless a live one is
// in the way; then it decides from the record the failed write returned:
// a different fingerprint is a Mismatch, a completed record a Replay, an
// in-flight record with a live lease InFlight, and an in-flight record
// past its lease is taken over by a write fenced on the dead holder's
// token (so only one retry wins).
//
// A write of Begin's that was applied but whose answer was lost (the SDK
// retries it, and the retry fails its condition on the record the first
// try wrote) is recognised by its fencing token in the returned record:
// Begin reports Started, not InFlight, to the request that made it.
func (s *Store) Begin(ctx context.Context, tenant, key string, fp Fingerprint, ledgerKey string) (Begun, error) {
	id, now := ID(tenant, key), s.now()
	token, err := newToken()
	if err != nil {
		return Begun{}, fmt.Errorf("idempotency: begin %s: %w", id, err)
	}
	r := Record{
		ID: id, Fingerprint: fp, Token: token, LedgerKey: ledgerKey,
		LeaseUntil: now.Add(s.lease), CreatedAt: now, ExpiresAt: now.Add(s.retention),
	}
	create := func() (Record, error) { return s.records.Create(ctx, r, now) }
	write, tookOver := create, false
	// Each round either wins or learns the current record from the failed
	// write. Two rounds suffice unless takeovers race; give up after four.
	for range 4 {
		cur, err := write()
		switch {
		case err == nil || errors.Is(err, ErrConflict) && cur.Token == token:
			// Won, or our own write: applied, its answer lost, and the
			// SDK's retry failed the condition on the record it made.
			return Begun{Verdict: Started, Token: token, TookOver: tookOver}, nil
		case !errors.Is(err, ErrConflict):
			return Begun{}, fmt.Errorf("idempotency: begin %s: %w", id, err)
		case cur.Token == "":
			// The record vanished between writes: create again.
			write, tookOver = create, false
			continue
		case cur.Fingerprint.Sum != fp.Sum:
			return Begun{Verdict: Mismatch, Differ: fp.Differ(cur.Fingerprint)}, nil
		case cur.Completed:
			return Begun{Verdict: Replay, Status: cur.Status, Body: cur.Body, LedgerKey: cur.LedgerKey}, nil
		case now.Before(cur.LeaseUntil):
			return Begun{Verdict: InFlight, RetryAfter: cur.LeaseUntil.Sub(now)}, nil
		}
		// A dead in-flight record: take it over, fenced on its token.
		dead := cur.Token
		write = func() (Record, error) { return s.records.Replace(ctx, r, dead) }
		tookOver = true
	}
	return Begun{}, fmt.Errorf("idempotency: begin %s: lost too many races", id)
}

// Complete stores the response of the request holding token and marks the
// record completed. It returns ErrFencingLost if token no longer holds an
// in-flight record. A retry of its own applied write (the answer was lost)
// finds the record completed under token and is a success.
func (s *Store) Complete(ctx context.Context, tenant, key, token string, status int, body string) error {
	id := ID(tenant, key)
	cur, err := s.records.Complete(ctx, id, token, status, body)
	switch {
	case errors.Is(err, ErrConflict) && cur.Token == token && cur.Completed:
		return nil // our own write, retried after its answer was lost
	case errors.Is(err, ErrConflict):
		return fmt.Errorf("idempotency: complete %s: %w", id, ErrFencingLost)
	case err != nil:
		return fmt.Errorf("idempotency: complete %s: %w", id, err)
	}
	return nil
}

// Abandon deletes the in-flight record held by token, so that a retry with
// the same key starts afresh (used when the request was not accepted: rate
// limited, or the queue failed). A record no longer held by token is left
// alone.
func (s *Store) Abandon(ctx context.Context, tenant, key, token string) error {
	id := ID(tenant, key)
	if err := s.records.Delete(ctx, id, token); err != nil {
		return fmt.Errorf("idempotency: abandon %s: %w", id, err)
	}
	return nil
}

func newToken() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}
