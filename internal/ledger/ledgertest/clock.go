package ledgertest

import (
	"sync"
	"time"
)

// Start is the time every clock of the suite starts at: a whole
// millisecond, in UTC, so that implementations storing milliseconds
// round-trip it exactly.
var Start = time.Date(2026, time.November, 29, 12, 0, 0, 0, time.UTC)

// Clock is a fake clock that moves only when told to. It is safe for
// concurrent use. Pass its Now method wherever a ledger takes a clock.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock that reads start until it is advanced.
func NewClock(start time.Time) *Clock {
	return &Clock{now: start}
}

// Now returns the clock's current time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d (backward if d is negative) and
// returns the new time.
func (c *Clock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}
