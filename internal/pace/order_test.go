package pace_test

import (
	"context"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/pace"
	"github.com/sendonce/sendonce/internal/testsupport"
	"github.com/sendonce/sendonce/provider"
	"github.com/sendonce/sendonce/provider/providertest"
)

// TestSendsAfterTheHoldsCutYield: a worker in one container holds 8 of
// a provider's 10 sends a second for the backlog's rows, up to a cut
// (a deadline in 5 minutes). In another container, sends whose deadline
// is later (or that have none) get the 2 the hold leaves; a send whose
// deadline is nearer than the cut, and the worker's own, take from the
// whole limit. Once the hold ends, nothing yields. Both stores.
func TestSendsAfterTheHoldsCutYield(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range stores {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// Real seconds: DynamoDB Local deletes counters whose TTL
			// has passed.
			clock := testsupport.NewClock(time.Now().Truncate(time.Second).Add(2 * time.Second))
			store := tc.store(t)
			worker, sender := tokenByToken(t, store, clock), tokenByToken(t, store, clock)
			now := clock.Now()
			cut := pace.Order{Deadline: now.Add(5 * time.Minute), Since: now.Add(-time.Hour)}
			if err := worker.Hold(ctx, "fake", pace.Hold{Rate: 8, Cut: cut, Until: now.Add(pace.HoldFor)}); err != nil {
				t.Fatal(err)
			}
			take := func(l *pace.Limiter, o *pace.Order, tries int) int {
				n := 0
				for range tries {
					var w time.Duration
					var err error
					if o == nil {
						w, err = l.Acquire(ctx, "fake")
					} else {
						w, err = l.AcquireOrdered(ctx, "fake", *o)
					}
					if err != nil {
						t.Fatal(err)
					}
					if w == 0 {
						n++
					}
				}
				return n
			}
			far := pace.Order{Deadline: now.Add(time.Hour), Since: now}
			none := pace.Order{Since: now}
			near := pace.Order{Deadline: now.Add(2 * time.Minute), Since: now}
			if got := take(sender, &far, 5) + take(sender, &none, 5); got != 2 {
				t.Errorf("sends after the cut: %d tokens, want the 2 the hold leaves", got)
			}
			if got := take(sender, &near, 1); got != 1 {
				t.Errorf("a send before the cut: %d tokens, want 1", got)
			}
			if got := take(worker, nil, 20); got != 7 {
				t.Errorf("the worker: %d tokens, want the 7 left of the limit", got)
			}
			clock.Advance(pace.HoldFor + pace.HoldRefresh)
			if got := take(sender, &far, 20); got != 10 {
				t.Errorf("after the hold: %d tokens, want the whole limit, 10", got)
			}
		})
	}
}

// TestNewMessagesYieldToTheBacklogAfterAnOutage: the provider answered
// again a minute ago, and a worker holds 8 of its 10 sends a second for
// the outage's backlog, up to a cut an hour away. A login code enqueued
// since the recovery, 10 minutes from its deadline, comes before the cut
// but yields all the same (before the backlog first, it took from the
// whole limit, and new messages delayed the backlog's drain); so does a
// new message without validity. A new login code 90 seconds from its
// deadline is urgent and does not yield, nor does a backlog message
// enqueued before the recovery. The hold's Backlog goes through both
// stores.
func TestNewMessagesYieldToTheBacklogAfterAnOutage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range stores {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clock := testsupport.NewClock(time.Now().Truncate(time.Second).Add(2 * time.Second))
			store := tc.store(t)
			worker, sender := tokenByToken(t, store, clock), tokenByToken(t, store, clock)
			now := clock.Now()
			up := now.Add(-time.Minute)
			cut := pace.Order{Deadline: now.Add(time.Hour), Since: up.Add(-time.Second)}
			if err := worker.Hold(ctx, "fake", pace.Hold{Rate: 8, Cut: cut, Until: now.Add(pace.HoldFor), Backlog: up}); err != nil {
				t.Fatal(err)
			}
			take := func(o pace.Order, tries int) int {
				n := 0
				for range tries {
					w, err := sender.AcquireOrdered(ctx, "fake", o)
					if err != nil {
						t.Fatal(err)
					}
					if w == 0 {
						n++
					}
				}
				return n
			}
			newOTP := pace.Order{Deadline: now.Add(10 * time.Minute), Since: now}
			newMarketing := pace.Order{Since: now}
			if got := take(newOTP, 5) + take(newMarketing, 5); got != 2 {
				t.Errorf("new messages, not urgent: %d tokens, want the 2 the hold leaves", got)
			}
			urgent := pace.Order{Deadline: now.Add(90 * time.Second), Since: now.Add(-8 * time.Minute)}
			if got := take(urgent, 1); got != 1 {
				t.Errorf("a new message within pace.Urgent of its deadline: %d tokens, want 1", got)
			}
			old := pace.Order{Deadline: now.Add(30 * time.Minute), Since: up.Add(-30 * time.Minute)}
			if got := take(old, 1); got != 1 {
				t.Errorf("a backlog message (enqueued before the recovery): %d tokens, want 1", got)
			}
		})
	}
}

// TestTimeoutsAmongSuccessesDoNotSlowThePace: a provider that answers
// 10 % of its calls with a timeout (ambiguous) is not down, even when
// the first three calls of a second time out: the second is judged whole
// (before, those three alone dropped the rate to the floor, 5 %, and a
// 20-second ramp followed). A second whose timeouts outnumber its
// successes, and three refusals with no success, still are an outage.
func TestTimeoutsAmongSuccessesDoNotSlowThePace(t *testing.T) {
	t.Parallel()
	clock := testsupport.NewClock(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	l := newLimiter(t, &pace.MemStore{}, clock, 100)
	timeout := providertest.Error(provider.Ambiguous, "timeout")
	for range 3 {
		l.Observe("fake", timeout)
	}
	for range 27 {
		l.Observe("fake", nil)
	}
	clock.Advance(time.Second)
	l.Observe("fake", nil)
	if f := l.Factor("fake"); f != 1 {
		t.Errorf("3 timeouts, then 27 successes: factor %.2f, want 1", f)
	}
	for range 5 {
		l.Observe("fake", timeout)
	}
	l.Observe("fake", nil)
	clock.Advance(time.Second)
	l.Observe("fake", nil)
	if f := l.Factor("fake"); f > 0.1 {
		t.Errorf("a second of 5 timeouts and 1 success: factor %.2f, want the floor (and one ramp step)", f)
	}
	clock.Advance(time.Minute)
	for range 30 {
		l.Observe("fake", nil)
		clock.Advance(time.Second)
	}
	for range 3 {
		l.Observe("fake", providertest.Error(provider.Transient, "503"))
	}
	if f := l.Factor("fake"); f != 0.05 {
		t.Errorf("3 refusals, no success: factor %.2f, want the floor at once", f)
	}
}

// TestAgedDeadline: a message without validity is ranked Horizon (an
// hour) after it was enqueued: after a message of its age with a
// deadline, but before a transactional message enqueued later whose
// hour ends after its aged deadline. Before, it went after every message
// with a deadline, however much younger: after an outage, the backlog's
// marketing waited behind every new message, and the backlog drained
// last of all.
func TestAgedDeadline(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	marketing := pace.Order{Since: t0}
	if got, want := marketing.Rank(), t0.Add(pace.Horizon); !got.Equal(want) {
		t.Errorf("Rank of a message without validity = %s, want %s (enqueued + pace.Horizon)", got, want)
	}
	for _, tc := range []struct {
		name  string
		other pace.Order
		after bool // marketing goes after other
	}{
		{"an OTP of its age", pace.Order{Deadline: t0.Add(10 * time.Minute), Since: t0}, true},
		{"a transactional message of its age", pace.Order{Deadline: t0.Add(time.Hour), Since: t0.Add(-time.Second)}, true},
		{"a transactional message enqueued 10 minutes later", pace.Order{Deadline: t0.Add(70 * time.Minute), Since: t0.Add(10 * time.Minute)}, false},
		{"a marketing message enqueued later", pace.Order{Since: t0.Add(time.Minute)}, false},
		{"an order with neither deadline nor age", pace.Order{}, false},
	} {
		if got := marketing.After(tc.other); got != tc.after {
			t.Errorf("marketing enqueued at t0 after %s: %t, want %t", tc.name, got, tc.after)
		}
		if got := tc.other.After(marketing); got == tc.after {
			t.Errorf("%s after marketing enqueued at t0: %t, want %t", tc.name, got, !tc.after)
		}
	}
}

// tokenByToken is a limiter of 10 sends a second of provider "fake" over
// store that takes its tokens one at a time, so that the counts are the
// sends'.
func tokenByToken(t *testing.T, store pace.Store, clock *testsupport.Clock) *pace.Limiter {
	t.Helper()
	l, err := pace.New(store, map[string]int{"fake": 10}, pace.Options{Now: clock.Now, Block: 1})
	if err != nil {
		t.Fatal(err)
	}
	return l
}
