// Package memidempotency is in-memory idempotency.Records for unit tests.
// It passes the same suite as the DynamoDB records (package
// idempotencytest).
package memidempotency

import (
	"context"
	"maps"
	"sync"
	"time"

	"github.com/sendonce/sendonce/internal/api/idempotency"
)

// Records is in-memory idempotency.Records with the conditions of
// dynamoidempotency.Records (a record past its ExpiresAt, in whole
// seconds, counts as absent to Create). It is safe for concurrent use.
type Records struct {
	mu   sync.Mutex
	byID map[string]idempotency.Record
}

// New returns empty records.
func New() *Records { return &Records{byID: map[string]idempotency.Record{}} }

// stored is r as dynamoidempotency.Records keeps it: times truncated as
// stored, the fields copied.
func stored(r idempotency.Record) idempotency.Record {
	r.LeaseUntil = time.UnixMilli(r.LeaseUntil.UnixMilli()).UTC()
	r.ExpiresAt = time.Unix(r.ExpiresAt.Unix(), 0).UTC()
	r.Fingerprint.Fields = maps.Clone(r.Fingerprint.Fields)
	return r
}

// heldBy reports whether the record id is in flight under token, and
// returns it.
func (m *Records) heldBy(id, token string) (idempotency.Record, bool) {
	cur, ok := m.byID[id]
	return cur, ok && cur.Token == token && !cur.Completed
}

// Create implements idempotency.Records.
func (m *Records) Create(_ context.Context, r idempotency.Record, now time.Time) (idempotency.Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur, ok := m.byID[r.ID]; ok && cur.ExpiresAt.Unix() > now.Unix() {
		return cur, idempotency.ErrConflict
	}
	m.byID[r.ID] = stored(r)
	return idempotency.Record{}, nil
}

// Replace implements idempotency.Records.
func (m *Records) Replace(_ context.Context, r idempotency.Record, token string) (idempotency.Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur, ok := m.heldBy(r.ID, token); !ok {
		return cur, idempotency.ErrConflict
	}
	m.byID[r.ID] = stored(r)
	return idempotency.Record{}, nil
}

// Complete implements idempotency.Records.
func (m *Records) Complete(_ context.Context, id, token string, status int, body string) (idempotency.Record, error) {
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
func (m *Records) Delete(_ context.Context, id, token string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.heldBy(id, token); ok {
		delete(m.byID, id)
	}
	return nil
}
