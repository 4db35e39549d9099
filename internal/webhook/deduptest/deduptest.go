// Package deduptest is the conformance suite every webhook.Dedup must pass
// (package dynamodedup against DynamoDB Local, package memdedup in
// memory), so the fake cannot drift from the real store.
//
//	func TestConformance(t *testing.T) {
//		deduptest.Run(t, func(t *testing.T, ttl time.Duration, now func() time.Time) webhook.Dedup {
//			return memdedup.New(memdedup.Config{TTL: ttl, Now: now})
//		})
//	}
package deduptest

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/testsupport"
	"github.com/sendonce/sendonce/internal/webhook"
)

// NewDedupFunc builds a fresh, empty store whose records live ttl and
// which reads time from now.
type NewDedupFunc func(t *testing.T, ttl time.Duration, now func() time.Time) webhook.Dedup

const ttl = time.Hour

func callback(p webhook.Provider, eventID string) webhook.Callback {
	return webhook.Callback{Provider: p, EventID: eventID, Key: "v1_" + eventID, Status: webhook.StatusDelivered}
}

// Run runs the suite against the stores newDedup builds. Every subtest
// builds its own store and runs in parallel.
func Run(t *testing.T, newDedup NewDedupFunc) {
	setup := func(t *testing.T) (context.Context, *testsupport.Clock, webhook.Dedup) {
		t.Parallel()
		c := testsupport.NewClock(testsupport.Start)
		return t.Context(), c, newDedup(t, ttl, c.Now)
	}
	seen := func(t *testing.T, ctx context.Context, d webhook.Dedup, id string, want bool) {
		t.Helper()
		if got, err := d.Seen(ctx, id); err != nil || got != want {
			t.Fatalf("Seen(%s) = %v, %v; want %v", id, got, err, want)
		}
	}
	record := func(t *testing.T, ctx context.Context, d webhook.Dedup, cb webhook.Callback, want bool) {
		t.Helper()
		if got, err := d.Record(ctx, cb); err != nil || got != want {
			t.Fatalf("Record(%s) = %v, %v; want created %v", cb.DedupID(), got, err, want)
		}
	}

	t.Run("RecordThenSeen", func(t *testing.T) {
		ctx, _, d := setup(t)
		cb := callback(webhook.ProviderHTTP, "evt_1")
		seen(t, ctx, d, cb.DedupID(), false)
		record(t, ctx, d, cb, true)
		seen(t, ctx, d, cb.DedupID(), true)
		record(t, ctx, d, cb, false)
	})
	t.Run("IdentitiesAreIndependent", func(t *testing.T) {
		ctx, _, d := setup(t)
		record(t, ctx, d, callback(webhook.ProviderHTTP, "evt_1"), true)
		record(t, ctx, d, callback(webhook.ProviderTwilio, "evt_1"), true)
		record(t, ctx, d, callback(webhook.ProviderHTTP, "evt_2"), true)
		seen(t, ctx, d, callback(webhook.ProviderHTTP, "evt_3").DedupID(), false)
	})
	t.Run("ExpiredCountsAsAbsent", func(t *testing.T) {
		ctx, clock, d := setup(t)
		cb := callback(webhook.ProviderHTTP, "evt_1")
		record(t, ctx, d, cb, true)
		clock.Advance(ttl - time.Second)
		seen(t, ctx, d, cb.DedupID(), true)
		record(t, ctx, d, cb, false)
		clock.Advance(time.Second) // exactly at expiry
		seen(t, ctx, d, cb.DedupID(), false)
		record(t, ctx, d, cb, true)
		seen(t, ctx, d, cb.DedupID(), true)
	})
	t.Run("ConcurrentDuplicates", func(t *testing.T) {
		ctx, _, d := setup(t)
		cb := callback(webhook.ProviderTwilio, "tok-1")
		var created atomic.Int32
		testsupport.AtOnce(16, func(int) {
			ok, err := d.Record(ctx, cb)
			if err != nil {
				t.Errorf("Record: %v", err)
			}
			if ok {
				created.Add(1)
			}
		})
		if got := created.Load(); got != 1 {
			t.Errorf("16 concurrent Records created %d records, want exactly 1", got)
		}
		seen(t, ctx, d, cb.DedupID(), true)
	})
}
