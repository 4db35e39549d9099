// Package memapikey is in-memory apikey.Records for unit tests. It
// passes the same suite as the DynamoDB records (package apikeytest).
package memapikey

import (
	"context"
	"sync"
	"time"

	"github.com/sendonce/sendonce/internal/apikey"
)

var _ apikey.Records = (*Records)(nil)

// Records is in-memory apikey.Records. It is safe for concurrent use.
type Records struct {
	mu   sync.Mutex
	byID map[string]apikey.Record
}

// New returns empty records.
func New() *Records { return &Records{byID: map[string]apikey.Record{}} }

// Put implements apikey.Records.
func (m *Records) Put(_ context.Context, r apikey.Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.byID[r.ID]; ok {
		return apikey.ErrExists
	}
	m.byID[r.ID] = r
	return nil
}

// Get implements apikey.Records.
func (m *Records) Get(_ context.Context, id string) (apikey.Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.byID[id]
	if !ok {
		return apikey.Record{}, apikey.ErrNotFound
	}
	return r, nil
}

// Revoke implements apikey.Records.
func (m *Records) Revoke(_ context.Context, id string, at time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.byID[id]
	if !ok {
		return apikey.ErrNotFound
	}
	if r.RevokedAt.IsZero() {
		r.RevokedAt = at
	}
	r.Revoked = true
	m.byID[id] = r
	return nil
}

// List implements apikey.Records.
func (m *Records) List(_ context.Context, tenant string) ([]apikey.Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var rs []apikey.Record
	for _, r := range m.byID {
		if r.Tenant == tenant {
			rs = append(rs, r)
		}
	}
	return rs, nil
}
