// Package memledger is an in-memory ledger.Ledger for unit tests of the
// packages that use the ledger (sender, reconciler, webhook). It is for
// tests only: it keeps rows in one process's memory, forever.
//
// It follows the semantics of package dynamoledger exactly and passes the
// same conformance suite (package ledgertest): times are kept to the
// millisecond, expiry to the second, a row whose expiry has passed is
// treated as absent, and attention rows are spread over the same shards
// and ordered by the same due times.
package memledger

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sendonce/sendonce/internal/ledger"
)

// DefaultRetention is how long rows live after their last write unless
// Config.Retention says otherwise (SENDONCE_RETENTION; README.md, Configuration).
const DefaultRetention = 720 * time.Hour

// defaultLimit is the page size of Attention when the query sets none.
const defaultLimit = 100

// Ledger is an in-memory ledger.Ledger. Its zero value is not usable: call
// New. It is safe for concurrent use.
type Ledger struct {
	now       func() time.Time
	retention time.Duration
	newID     func() string

	mu   sync.Mutex
	rows map[string]ledger.Record
	// owners is the provider message id index (ledger.OwnerIndex):
	// "<provider>#<id>" → key.
	owners map[string]string
}

var (
	_ ledger.Ledger     = (*Ledger)(nil)
	_ ledger.OwnerIndex = (*Ledger)(nil)
)

// Config configures a Ledger. The zero value is the production setting.
type Config struct {
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Retention is how long a row lives after its last write; zero or
	// less means DefaultRetention.
	Retention time.Duration
	// ClaimID generates the claim ids; nil means 128 random bits in hex.
	// It must return a different id on every call.
	ClaimID func() string
}

// New returns an empty in-memory ledger.
func New(cfg Config) *Ledger {
	l := &Ledger{now: cfg.Now, retention: cfg.Retention, newID: cfg.ClaimID, rows: map[string]ledger.Record{}}
	if l.now == nil {
		l.now = time.Now
	}
	if l.retention <= 0 {
		l.retention = DefaultRetention
	}
	if l.newID == nil {
		l.newID = randomID
	}
	return l
}

func randomID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// clock returns now at millisecond precision in UTC, as dynamoledger
// stores it.
func (l *Ledger) clock() time.Time {
	return time.UnixMilli(l.now().UnixMilli()).UTC()
}

func (l *Ledger) expiry(now time.Time) time.Time {
	return time.Unix(now.Add(l.retention).Unix(), 0).UTC()
}

func expired(r ledger.Record, now time.Time) bool {
	return r.ExpiresAt.Unix() < now.Unix()
}

// live returns key's row if it exists and has not expired. l.mu is held.
func (l *Ledger) live(key string, now time.Time) (ledger.Record, bool) {
	r, ok := l.rows[key]
	if !ok || expired(r, now) {
		return ledger.Record{}, false
	}
	return r, true
}

// Claim implements ledger.Ledger. It returns an input error for an empty
// key or a lease that is not positive, a *ledger.ConflictError holding the
// row when a live row holds the key, and the context's error (with the
// claim it would have taken, as a lost answer) when ctx is done.
func (l *Ledger) Claim(ctx context.Context, e ledger.Entry, lease time.Duration) (ledger.Claim, error) {
	if err := ledger.CheckClaim(e.Key, lease); err != nil {
		return ledger.Claim{}, fmt.Errorf("memledger: claim %s: %w", e.Key, err)
	}
	now := l.clock()
	c := ledger.Claim{Key: e.Key, ClaimID: l.newID(), Attempt: 1, LeaseUntil: now.Add(lease), AttemptedAt: now}
	if err := ctx.Err(); err != nil {
		return c, fmt.Errorf("memledger: claim %s: %w", e.Key, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if cur, ok := l.live(e.Key, now); ok {
		return ledger.Claim{}, fmt.Errorf("memledger: claim %s: %w", e.Key, &ledger.ConflictError{Op: "claim", Current: cur})
	}
	l.rows[e.Key] = ledger.Record{
		Entry:       e,
		State:       ledger.StatePending,
		ClaimID:     c.ClaimID,
		Attempts:    1,
		LeaseUntil:  c.LeaseUntil,
		AttemptedAt: now,
		LookupFrom:  now,
		CreatedAt:   now,
		UpdatedAt:   now,
		ExpiresAt:   l.expiry(now),
	}
	return c, nil
}

// TakeOver implements ledger.Ledger. It returns a *ledger.ConflictError
// holding the current row when cur.ClaimID no longer holds the row or the
// row is neither stale PENDING nor UNCERTAIN, ledger.ErrNotFound when no
// live row exists, and the context's error (with the claim it would have
// taken, as a lost answer) when ctx is done.
func (l *Ledger) TakeOver(ctx context.Context, cur ledger.Record, provider string, lease time.Duration) (ledger.Claim, error) {
	if err := ledger.CheckClaim(cur.Key, lease); err != nil {
		return ledger.Claim{}, fmt.Errorf("memledger: takeover %s: %w", cur.Key, err)
	}
	now := l.clock()
	c := ledger.Claim{Key: cur.Key, ClaimID: l.newID(), Attempt: cur.Attempts + 1, LeaseUntil: now.Add(lease), AttemptedAt: now}
	if err := ctx.Err(); err != nil {
		return c, fmt.Errorf("memledger: takeover %s: %w", cur.Key, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	r, ok := l.live(cur.Key, now)
	if !ok {
		return ledger.Claim{}, fmt.Errorf("memledger: takeover %s: %w", cur.Key, ledger.ErrNotFound)
	}
	if r.ClaimID != cur.ClaimID || !(r.Stale(now) || r.State == ledger.StateUncertain) {
		return ledger.Claim{}, fmt.Errorf("memledger: takeover %s: %w", cur.Key, &ledger.ConflictError{Op: "takeover", Current: r})
	}
	r.State = ledger.StatePending
	r.ClaimID = c.ClaimID
	r.Attempts++
	r.Released = false
	r.RetryAt = time.Time{}
	r.LeaseUntil = c.LeaseUntil
	switch {
	case cur.Released:
		r.LookupFrom = now
	case r.LookupFrom.IsZero():
		r.LookupFrom = r.AttemptedAt
	}
	r.History = ledger.NextHistory(cur)
	if provider != "" {
		r.Provider = provider
	}
	r.AttemptedAt = now
	r.UpdatedAt = now
	r.ExpiresAt = l.expiry(now)
	l.rows[r.Key] = r
	c.Attempt = r.Attempts
	return c, nil
}

// Mark implements ledger.Ledger. It returns an input error for an outcome
// state that is not SENT, FAILED, UNCERTAIN or ABANDONED, and an error
// matching ledger.ErrFencingLost when c does not hold a live PENDING row.
// The row's Reason becomes o.Reason; its provider message id becomes
// o.ProviderMessageID when that is set.
func (l *Ledger) Mark(ctx context.Context, c ledger.Claim, o ledger.Outcome) error {
	if !o.State.Final() && o.State != ledger.StateUncertain {
		return fmt.Errorf("memledger: mark %s: outcome state %q: want SENT, FAILED, UNCERTAIN or ABANDONED", c.Key, o.State)
	}
	return l.update(ctx, "mark", c, func(r *ledger.Record, _ time.Time) bool {
		r.State = o.State
		r.Reason = o.Reason
		if o.ProviderMessageID != "" {
			r.ProviderMessageID = o.ProviderMessageID
		}
		r.Released = false
		r.RetryAt = time.Time{}
		if o.State.Final() {
			r.Address, r.Subject, r.Body = "", "", ""
			r.HTML, r.Data = "", ""
		}
		return true
	})
}

// Release implements ledger.Ledger. It returns an error matching
// ledger.ErrFencingLost when c does not hold a live PENDING row. Releasing
// a claim that is already released changes nothing.
func (l *Ledger) Release(ctx context.Context, c ledger.Claim, reason string, retryAt time.Time) error {
	return l.update(ctx, "release", c, func(r *ledger.Record, now time.Time) bool {
		if r.Released {
			return false
		}
		r.Released = true
		r.Releases++
		r.Reason = reason
		r.LeaseUntil = now
		r.RetryAt = now
		if retryAt.After(now) {
			r.RetryAt = time.UnixMilli(retryAt.UnixMilli()).UTC()
		}
		return true
	})
}

// update runs change on the row c holds, at the clock's now and under the
// lock, and stores it, updated and its expiry refreshed, unless change
// returns false. It returns an error matching ledger.ErrFencingLost when c
// does not hold a live PENDING row.
func (l *Ledger) update(ctx context.Context, op string, c ledger.Claim, change func(r *ledger.Record, now time.Time) bool) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memledger: %s %s: %w", op, c.Key, err)
	}
	now := l.clock()
	l.mu.Lock()
	defer l.mu.Unlock()
	r, err := l.held(c, now)
	if err != nil {
		return fmt.Errorf("memledger: %s %s: %w", op, c.Key, err)
	}
	if change(&r, now) {
		r.UpdatedAt = now
		r.ExpiresAt = l.expiry(now)
		l.rows[r.Key] = r
	}
	return nil
}

// held returns c's row if c holds it (live, PENDING, c's claim id). l.mu
// is held.
func (l *Ledger) held(c ledger.Claim, now time.Time) (ledger.Record, error) {
	r, ok := l.live(c.Key, now)
	if !ok {
		return r, fmt.Errorf("%w: no live row", ledger.ErrFencingLost)
	}
	if r.State != ledger.StatePending || r.ClaimID != c.ClaimID {
		return r, fmt.Errorf("%w: row is %s under attempt %d", ledger.ErrFencingLost, r.State, r.Attempts)
	}
	return r, nil
}

// Get implements ledger.Ledger. It returns ledger.ErrNotFound when no live
// row holds key.
func (l *Ledger) Get(ctx context.Context, key string) (ledger.Record, error) {
	if err := ctx.Err(); err != nil {
		return ledger.Record{}, fmt.Errorf("memledger: get %s: %w", key, err)
	}
	now := l.clock()
	l.mu.Lock()
	defer l.mu.Unlock()
	r, ok := l.live(key, now)
	if !ok {
		return ledger.Record{}, fmt.Errorf("memledger: get %s: %w", key, ledger.ErrNotFound)
	}
	return r, nil
}

// sortKey orders attention rows: due time, fixed width, then the key.
func sortKey(r ledger.Record) string {
	return dueString(ledger.Due(r)) + "#" + r.Key
}

const dueLayout = "2006-01-02T15:04:05.000Z"

func dueString(t time.Time) string { return t.UTC().Format(dueLayout) }

// Attention implements ledger.Ledger. It returns an input error for a shard
// outside [0, ledger.AttentionShards), a negative limit or a cursor it did
// not hand out. Like a DynamoDB Query with a filter, it applies the limit
// before it skips expired rows: a page may be short, even empty, while its
// cursor is not.
func (l *Ledger) Attention(ctx context.Context, q ledger.AttentionQuery) (ledger.AttentionPage, error) {
	if q.Shard < 0 || q.Shard >= ledger.AttentionShards {
		return ledger.AttentionPage{}, fmt.Errorf("memledger: attention: shard %d outside [0, %d)", q.Shard, ledger.AttentionShards)
	}
	if q.Limit < 0 {
		return ledger.AttentionPage{}, fmt.Errorf("memledger: attention: negative limit %d", q.Limit)
	}
	after := ""
	if q.Cursor != "" {
		b, err := base64.RawURLEncoding.DecodeString(q.Cursor)
		if err != nil || !strings.Contains(string(b), "#") {
			return ledger.AttentionPage{}, errors.New("memledger: attention: malformed cursor")
		}
		after = string(b)
	}
	if err := ctx.Err(); err != nil {
		return ledger.AttentionPage{}, fmt.Errorf("memledger: attention: %w", err)
	}
	limit := q.Limit
	if limit == 0 {
		limit = defaultLimit
	}
	now := l.clock()
	bound := dueString(q.DueBefore)
	from := ""
	if !q.DueFrom.IsZero() {
		from = dueString(q.DueFrom)
	}

	rows := l.sorted(func(r ledger.Record) (string, bool) {
		if !r.Indexed() || ledger.Shard(r.Key) != q.Shard {
			return "", false // before the sort key: a query reads one shard of many
		}
		sk := sortKey(r)
		return sk, sk < bound && sk > after && sk >= from
	})
	p := ledger.AttentionPage{Records: []ledger.Record{}}
	for i, r := range rows {
		if i == limit {
			p.Cursor = base64.RawURLEncoding.EncodeToString([]byte(rows[i-1].sk))
			break
		}
		if !expired(r.r, now) {
			p.Records = append(p.Records, r.r)
		}
	}
	return p, nil
}

// row is a record with the key it sorts by.
type row struct {
	sk string
	r  ledger.Record
}

// sorted returns the rows sel selects, whether live or not, in the order
// of the sort keys sel gives them.
func (l *Ledger) sorted(sel func(ledger.Record) (string, bool)) []row {
	var rows []row
	l.mu.Lock()
	for _, r := range l.rows {
		if sk, ok := sel(r); ok {
			rows = append(rows, row{sk, r})
		}
	}
	l.mu.Unlock()
	sort.Slice(rows, func(i, j int) bool { return rows[i].sk < rows[j].sk })
	return rows
}

// ApplyDelivery implements ledger.Ledger. It returns an input error for a
// rank below 1 or an empty status, and ledger.ErrNotFound when no live row
// holds key.
func (l *Ledger) ApplyDelivery(ctx context.Context, key string, d ledger.Delivery) (bool, error) {
	if err := checkDelivery(d); err != nil {
		return false, fmt.Errorf("memledger: apply delivery %s: %w", key, err)
	}
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("memledger: apply delivery %s: %w", key, err)
	}
	now := l.clock()
	l.mu.Lock()
	defer l.mu.Unlock()
	r, ok := l.live(key, now)
	if !ok {
		return false, fmt.Errorf("memledger: apply delivery %s: %w", key, ledger.ErrNotFound)
	}
	if r.DeliveryRank >= d.Rank {
		return false, nil
	}
	r.DeliveryStatus = d.Status
	r.DeliveryRank = d.Rank
	r.DeliveryAt = time.UnixMilli(d.At.UnixMilli()).UTC()
	if r.ProviderMessageID == "" {
		r.ProviderMessageID = d.ProviderMessageID
	}
	r.ExpiresAt = l.expiry(now)
	l.rows[key] = r
	return true, nil
}

func checkDelivery(d ledger.Delivery) error {
	if d.Rank < 1 {
		return fmt.Errorf("rank %d: must be at least 1", d.Rank)
	}
	if d.Status == "" {
		return errors.New("empty status")
	}
	return nil
}

// RecordOwner implements ledger.OwnerIndex.
func (l *Ledger) RecordOwner(_ context.Context, provider, id, key string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.owners == nil {
		l.owners = map[string]string{}
	}
	l.owners[provider+"#"+id] = key
	return nil
}

// Owners implements ledger.OwnerIndex.
func (l *Ledger) Owners(_ context.Context, provider string, ids []string) (map[string]string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]string{}
	for _, id := range ids {
		if k, ok := l.owners[provider+"#"+id]; ok {
			out[id] = k
		}
	}
	return out, nil
}
