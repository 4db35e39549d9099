// Package memratelimit is in-memory ratelimit.Windows for unit tests. It
// passes the same suite as the DynamoDB windows (package ratelimittest).
package memratelimit

import (
	"context"
	"sync"
	"time"

	"github.com/sendonce/sendonce/internal/api/ratelimit"
)

var _ ratelimit.Windows = (*Windows)(nil)

// Windows is in-memory ratelimit.Windows. It is safe for concurrent use.
type Windows struct {
	mu    sync.Mutex
	count map[string]int
}

// New returns empty windows.
func New() *Windows { return &Windows{count: map[string]int{}} }

// Add implements ratelimit.Windows. Windows are never reused (their id
// holds their start), so none expires here.
func (m *Windows) Add(_ context.Context, id string, limit int, _ time.Time) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.count[id] >= limit {
		return false, nil
	}
	m.count[id]++
	return true, nil
}
