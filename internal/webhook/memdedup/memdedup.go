// Package memdedup is an in-memory webhook.Dedup, for unit tests and the
// callbacks over package sendonce's in-memory ledger. It passes the same
// suite as the DynamoDB store (package deduptest).
package memdedup

import (
	"context"
	"sync"
	"time"

	"github.com/sendonce/sendonce/internal/webhook"
)

// Dedup is an in-memory webhook.Dedup with the expiry rules of
// dynamodedup.Dedup (whole seconds; a record is gone at its expiry). It
// is safe for concurrent use.
type Dedup struct {
	ttl time.Duration
	now func() time.Time

	mu      sync.Mutex
	expires map[string]int64 // Unix seconds
}

var _ webhook.Dedup = (*Dedup)(nil)

// Config configures a Dedup. The zero value is the production setting.
type Config struct {
	// TTL is how long a record is kept; zero or less means
	// webhook.DefaultDedupTTL.
	TTL time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// New returns an empty Dedup.
func New(cfg Config) *Dedup {
	m := &Dedup{ttl: cfg.TTL, now: cfg.Now, expires: map[string]int64{}}
	if m.ttl <= 0 {
		m.ttl = webhook.DefaultDedupTTL
	}
	if m.now == nil {
		m.now = time.Now
	}
	return m
}

// Seen implements webhook.Dedup.
func (m *Dedup) Seen(_ context.Context, id string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.now().Unix() < m.expires[id], nil
}

// Record implements webhook.Dedup.
func (m *Dedup) Record(_ context.Context, cb webhook.Callback) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	if id := cb.DedupID(); now.Unix() >= m.expires[id] {
		m.expires[id] = now.Add(m.ttl).Unix()
		return true, nil
	}
	return false, nil
}
