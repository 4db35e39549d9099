// Package ratelimittest is the conformance suite every ratelimit.Windows
// must pass (package dynamoratelimit against DynamoDB Local, package
// memratelimit in memory), driven through ratelimit.Limiter, so the fake
// cannot drift from the real store.
//
//	func TestConformance(t *testing.T) {
//		ratelimittest.Run(t, func(t *testing.T) ratelimit.Windows { return memratelimit.New() })
//	}
package ratelimittest

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/api/ratelimit"
	"github.com/sendonce/sendonce/internal/testsupport"
)

// NewWindowsFunc builds fresh, empty windows.
type NewWindowsFunc func(t *testing.T) ratelimit.Windows

// Run runs the suite against the windows newWindows builds. Every subtest
// builds its own windows and runs in parallel; the clock starts 10s into
// a one-minute window.
func Run(t *testing.T, newWindows NewWindowsFunc) {
	rate := ratelimit.Rate{Limit: 3, Window: time.Minute}
	setup := func(t *testing.T) (context.Context, *testsupport.Clock, *ratelimit.Limiter) {
		t.Parallel()
		c := testsupport.NewClock(testsupport.Start.Add(10 * time.Second))
		return t.Context(), c, ratelimit.New(newWindows(t), ratelimit.Config{Now: c.Now})
	}
	allow := func(t *testing.T, ctx context.Context, l *ratelimit.Limiter, scope, subject string, want bool, wantWait time.Duration) {
		t.Helper()
		ok, wait, err := l.Allow(ctx, scope, subject, rate)
		if err != nil || ok != want || wait != wantWait {
			t.Fatalf("Allow(%s, %s) = %v, %v, %v; want %v, %v", scope, subject, ok, wait, err, want, wantWait)
		}
	}

	t.Run("LimitThenRefuse", func(t *testing.T) {
		ctx, _, l := setup(t)
		for range rate.Limit {
			allow(t, ctx, l, "tenant", "acme", true, 0)
		}
		allow(t, ctx, l, "tenant", "acme", false, 50*time.Second) // until the window ends
		allow(t, ctx, l, "tenant", "acme", false, 50*time.Second)
	})
	t.Run("WindowRollover", func(t *testing.T) {
		ctx, clock, l := setup(t)
		for range rate.Limit {
			allow(t, ctx, l, "tenant", "acme", true, 0)
		}
		clock.Advance(49 * time.Second) // the last second of the window
		allow(t, ctx, l, "tenant", "acme", false, time.Second)
		clock.Advance(time.Second) // the next window: a fresh count, refusals not counted
		for range rate.Limit {
			allow(t, ctx, l, "tenant", "acme", true, 0)
		}
		allow(t, ctx, l, "tenant", "acme", false, time.Minute)
	})
	t.Run("ScopesAndSubjectsAreIndependent", func(t *testing.T) {
		ctx, _, l := setup(t)
		for range rate.Limit {
			allow(t, ctx, l, "tenant", "acme", true, 0)
		}
		allow(t, ctx, l, "tenant", "globex", true, 0)
		allow(t, ctx, l, "recipient", "acme", true, 0)
		allow(t, ctx, l, "recipient", "acme\x00user-42", true, 0)
	})
	t.Run("ConcurrentRequestsCountExactly", func(t *testing.T) {
		ctx, _, l := setup(t)
		var allowed atomic.Int32
		testsupport.AtOnce(20, func(int) {
			ok, _, err := l.Allow(ctx, "tenant", "acme", rate)
			if err != nil {
				t.Errorf("Allow: %v", err)
			}
			if ok {
				allowed.Add(1)
			}
		})
		if got := allowed.Load(); got != int32(rate.Limit) {
			t.Errorf("20 concurrent requests: %d allowed, want exactly %d", got, rate.Limit)
		}
	})
}
