package idempotencytest

import (
	"context"
	"maps"
	"sync"
	"time"

	"github.com/sendonce/sendonce/internal/api/idempotency"
)

// Mem is in-memory idempotency.Records with the conditions of
// idempotency.DynamoRecords (a record past its ExpiresAt, in whole
// seconds, counts as absent to Create). It is safe for concurrent use.
type Mem struct {
	mu   sync.Mutex
	byID map[string]idempotency.Record
}

// NewMem returns empty Mem records.
func NewMem() *Mem { return &Mem{byID: map[string]idempotency.Record{}} }

// stored is r as DynamoRecords keeps it: times truncated as stored, the
// fields copied.
func stored(r idempotency.Record) idempotency.Record {
	r.LeaseUntil = time.UnixMilli(r.LeaseUntil.UnixMilli()).UTC()
	r.ExpiresAt = time.Unix(r.ExpiresAt.Unix(), 0).UTC()
	r.Fingerprint.Fields = maps.Clone(r.Fingerprint.Fields)
	return r
}

// heldBy reports whether the record id is in flight under token, and
// returns it.
func (m *Mem) heldBy(id, token string) (idempotency.Record, bool) {
	cur, ok := m.byID[id]
	return cur, ok && cur.Token == token && !cur.Completed
}

// Create implements idempotency.Records.
func (m *Mem) Create(_ context.Context, r idempotency.Record, now time.Time) (idempotency.Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur, ok := m.byID[r.ID]; ok && cur.ExpiresAt.Unix() > now.Unix() {
		return cur, idempotency.ErrConflict
	}
	m.byID[r.ID] = stored(r)
	return idempotency.Record{}, nil
}

// Replace implements idempotency.Records.
func (m *Mem) Replace(_ context.Context, r idempotency.Record, token string) (idempotency.Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur, ok := m.heldBy(r.ID, token); !ok {
		return cur, idempotency.ErrConflict
	}
	m.byID[r.ID] = stored(r)
	return idempotency.Record{}, nil
}

// Complete implements idempotency.Records.
func (m *Mem) Complete(_ context.Context, id, token string, status int, body string) (idempotency.Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, ok := m.heldBy(id, token)
	if !ok {
		return cur, idempotency.ErrConflict
	}
	cur.Completed, cur.Status, cur.Body, cur.LeaseUntil = true, status, body, time.Time{}
	m.byID[id] = cur
	return idempotency.Record{}, nil
}

// Delete implements idempotency.Records.
func (m *Mem) Delete(_ context.Context, id, token string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.heldBy(id, token); ok {
		delete(m.byID, id)
	}
	return nil
}

// Lossy wraps idempotency.Records and, when told to, loses the answer of
// a write the way a reset connection does under the SDK: the write
// applies, its answer is lost, and the SDK sends the same request again;
// the caller gets the answer of that second try. It is safe for
// concurrent use.
type Lossy struct {
	idempotency.Records

	mu   sync.Mutex
	lose int
	lost int
}

// NewLossy returns a Lossy over r that loses nothing until told to.
func NewLossy(r idempotency.Records) *Lossy { return &Lossy{Records: r} }

// LoseNext makes the next n writes (of any kind) that apply lose their
// first answer.
func (l *Lossy) LoseNext(n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lose += n
}

// Lost returns how many answers were lost.
func (l *Lossy) Lost() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

// take reports whether this applied write's answer is to be lost.
func (l *Lossy) take() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lose == 0 {
		return false
	}
	l.lose--
	l.lost++
	return true
}

// twice runs write, and once more if its answer is to be lost.
func (l *Lossy) twice(write func() (idempotency.Record, error)) (idempotency.Record, error) {
	cur, err := write()
	if err == nil && l.take() {
		return write()
	}
	return cur, err
}

// Create implements idempotency.Records.
func (l *Lossy) Create(ctx context.Context, r idempotency.Record, now time.Time) (idempotency.Record, error) {
	return l.twice(func() (idempotency.Record, error) { return l.Records.Create(ctx, r, now) })
}

// Replace implements idempotency.Records.
func (l *Lossy) Replace(ctx context.Context, r idempotency.Record, token string) (idempotency.Record, error) {
	return l.twice(func() (idempotency.Record, error) { return l.Records.Replace(ctx, r, token) })
}

// Complete implements idempotency.Records.
func (l *Lossy) Complete(ctx context.Context, id, token string, status int, body string) (idempotency.Record, error) {
	return l.twice(func() (idempotency.Record, error) { return l.Records.Complete(ctx, id, token, status, body) })
}
