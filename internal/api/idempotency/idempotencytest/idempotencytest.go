// Package idempotencytest is the conformance suite every
// idempotency.Records must pass (package dynamoidempotency against
// DynamoDB Local, package memidempotency in memory), driven through
// idempotency.Store, and Lossy, which loses a write's answer the way the
// SDK's retry after a reset connection does.
//
//	func TestConformance(t *testing.T) {
//		idempotencytest.Run(t, func(t *testing.T) idempotency.Records { return memidempotency.New() })
//	}
package idempotencytest

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/api/idempotency"
	"github.com/sendonce/sendonce/internal/testsupport"
)

// NewRecordsFunc builds fresh, empty records.
type NewRecordsFunc func(t *testing.T) idempotency.Records

const (
	lease     = 30 * time.Second
	retention = time.Hour
)

var (
	fp1 = idempotency.Fingerprint{Sum: "fp1", Fields: map[string]string{"channel": "a", "template": "t1"}}
	fp2 = idempotency.Fingerprint{Sum: "fp2", Fields: map[string]string{"channel": "a", "template": "t2", "data": "d"}}
)

type bundle struct {
	ctx   context.Context
	clock *testsupport.Clock
	lossy *Lossy
	s     *idempotency.Store
}

func (b *bundle) begin(t *testing.T, tenant, key string, fp idempotency.Fingerprint, want idempotency.Verdict) idempotency.Begun {
	t.Helper()
	got, err := b.s.Begin(b.ctx, tenant, key, fp, "v1_"+key)
	if err != nil || got.Verdict != want {
		t.Fatalf("Begin(%s, %s, %s) = %+v, %v; want verdict %d", tenant, key, fp.Sum, got, err, want)
	}
	return got
}

func (b *bundle) complete(t *testing.T, key, token string, want error) {
	t.Helper()
	if err := b.s.Complete(b.ctx, "acme", key, token, 202, `{"id":"v1_`+key+`"}`); !errors.Is(err, want) {
		t.Fatalf("Complete(%s) = %v, want %v", key, err, want)
	}
}

// concurrently runs n Begins of one key at once and counts the verdicts.
func (b *bundle) concurrently(t *testing.T, n int, key string) map[idempotency.Verdict]int {
	var mu sync.Mutex
	count := map[idempotency.Verdict]int{}
	testsupport.AtOnce(n, func(int) {
		got, err := b.s.Begin(b.ctx, "acme", key, fp1, "v1_"+key)
		if err != nil {
			t.Errorf("Begin: %v", err)
		}
		mu.Lock()
		count[got.Verdict]++
		mu.Unlock()
	})
	return count
}

// Run runs the suite against the records newRecords builds. Every subtest
// builds its own records and runs in parallel.
func Run(t *testing.T, newRecords NewRecordsFunc) {
	setup := func(t *testing.T) *bundle {
		t.Parallel()
		c := testsupport.NewClock(testsupport.Start)
		l := NewLossy(newRecords(t))
		return &bundle{ctx: t.Context(), clock: c, lossy: l, s: idempotency.New(l, idempotency.Config{Lease: lease, Retention: retention, Now: c.Now})}
	}

	t.Run("BeginCompleteReplay", func(t *testing.T) {
		b := setup(t)
		first := b.begin(t, "acme", "k1", fp1, idempotency.Started)
		if first.Token == "" || first.TookOver {
			t.Errorf("first Begin = %+v, want a token and no takeover", first)
		}
		b.complete(t, "k1", first.Token, nil)
		for range 2 {
			got := b.begin(t, "acme", "k1", fp1, idempotency.Replay)
			if got.Status != 202 || got.Body != `{"id":"v1_k1"}` || got.LedgerKey != "v1_k1" {
				t.Errorf("Replay = %+v, want the stored 202, body and ledger key", got)
			}
		}
	})
	t.Run("Mismatch", func(t *testing.T) {
		b := setup(t)
		b.begin(t, "acme", "k1", fp1, idempotency.Started)
		got := b.begin(t, "acme", "k1", fp2, idempotency.Mismatch)
		if want := []string{"data", "template"}; !slices.Equal(got.Differ, want) {
			t.Errorf("Differ = %q, want %q", got.Differ, want)
		}
	})
	t.Run("InFlightThenTakeover", func(t *testing.T) {
		b := setup(t)
		dead := b.begin(t, "acme", "k1", fp1, idempotency.Started)
		b.clock.Advance(10 * time.Second)
		if got := b.begin(t, "acme", "k1", fp1, idempotency.InFlight); got.RetryAfter != 20*time.Second {
			t.Errorf("RetryAfter = %v, want the lease's 20s left", got.RetryAfter)
		}
		b.clock.Advance(20 * time.Second) // the lease is over: the holder died
		took := b.begin(t, "acme", "k1", fp1, idempotency.Started)
		if !took.TookOver || took.Token == dead.Token {
			t.Errorf("takeover = %+v, want TookOver with a new token", took)
		}
		// The dead holder wakes: it can neither complete nor abandon.
		b.complete(t, "k1", dead.Token, idempotency.ErrFencingLost)
		if err := b.s.Abandon(b.ctx, "acme", "k1", dead.Token); err != nil {
			t.Fatalf("Abandon with a lost token: %v", err)
		}
		b.begin(t, "acme", "k1", fp1, idempotency.InFlight)
		b.complete(t, "k1", took.Token, nil)
		b.begin(t, "acme", "k1", fp1, idempotency.Replay)
	})
	t.Run("ConcurrentBeginOneWins", func(t *testing.T) {
		b := setup(t)
		got := b.concurrently(t, 24, "burst")
		if got[idempotency.Started] != 1 || got[idempotency.InFlight] != 23 {
			t.Errorf("24 concurrent Begins: %v; want exactly 1 Started, 23 InFlight", got)
		}
	})
	t.Run("ConcurrentTakeoverOneWins", func(t *testing.T) {
		b := setup(t)
		b.begin(t, "acme", "burst", fp1, idempotency.Started)
		b.clock.Advance(lease)
		got := b.concurrently(t, 16, "burst")
		if got[idempotency.Started] != 1 || got[idempotency.InFlight] != 15 {
			t.Errorf("16 concurrent takeovers: %v; want exactly 1 Started, 15 InFlight", got)
		}
	})
	// An applied write whose answer is lost is sent again by the SDK; the
	// second try fails its condition on the record the first wrote. The
	// request must recognise its own token, not answer 409 to itself.
	t.Run("LostBeginAnswer", func(t *testing.T) {
		b := setup(t)
		b.lossy.LoseNext(1)
		got := b.begin(t, "acme", "k1", fp1, idempotency.Started)
		if b.lossy.Lost() != 1 || got.TookOver {
			t.Fatalf("lost %d answers, Begin = %+v; want 1 lost and a plain Started", b.lossy.Lost(), got)
		}
		b.complete(t, "k1", got.Token, nil)
	})
	t.Run("LostTakeoverAnswer", func(t *testing.T) {
		b := setup(t)
		dead := b.begin(t, "acme", "k1", fp1, idempotency.Started)
		b.clock.Advance(lease + time.Second)
		b.lossy.LoseNext(1) // the create fails its condition; the takeover's answer is lost
		got := b.begin(t, "acme", "k1", fp1, idempotency.Started)
		if b.lossy.Lost() != 1 || !got.TookOver || got.Token == dead.Token {
			t.Fatalf("lost %d answers, Begin = %+v; want 1 lost, TookOver with a new token", b.lossy.Lost(), got)
		}
		b.complete(t, "k1", got.Token, nil)
		b.complete(t, "k1", dead.Token, idempotency.ErrFencingLost)
	})
	t.Run("LostCompleteAnswer", func(t *testing.T) {
		b := setup(t)
		got := b.begin(t, "acme", "k1", fp1, idempotency.Started)
		b.lossy.LoseNext(1)
		b.complete(t, "k1", got.Token, nil)
		if b.lossy.Lost() != 1 {
			t.Fatalf("lost %d answers, want 1", b.lossy.Lost())
		}
		b.begin(t, "acme", "k1", fp1, idempotency.Replay)
		b.complete(t, "k1", "another-token", idempotency.ErrFencingLost)
	})
	t.Run("Abandon", func(t *testing.T) {
		b := setup(t)
		got := b.begin(t, "acme", "k1", fp1, idempotency.Started)
		if err := b.s.Abandon(b.ctx, "acme", "k1", "another-token"); err != nil {
			t.Fatalf("Abandon with another token: %v", err)
		}
		b.begin(t, "acme", "k1", fp1, idempotency.InFlight)
		if err := b.s.Abandon(b.ctx, "acme", "k1", got.Token); err != nil {
			t.Fatalf("Abandon: %v", err)
		}
		// The key starts afresh, even with another request.
		if again := b.begin(t, "acme", "k1", fp2, idempotency.Started); again.TookOver {
			t.Errorf("Begin after Abandon took over: %+v", again)
		}
		b.complete(t, "never-begun", "t", idempotency.ErrFencingLost)
	})
	t.Run("ExpiredIsAbsent", func(t *testing.T) {
		b := setup(t)
		b.complete(t, "k1", b.begin(t, "acme", "k1", fp1, idempotency.Started).Token, nil)
		b.clock.Advance(retention - time.Second)
		b.begin(t, "acme", "k1", fp2, idempotency.Mismatch)
		b.clock.Advance(time.Second) // exactly at expiry
		if got := b.begin(t, "acme", "k1", fp2, idempotency.Started); got.TookOver {
			t.Errorf("Begin over an expired record took over: %+v", got)
		}
	})
	t.Run("TenantsAreIndependent", func(t *testing.T) {
		b := setup(t)
		b.begin(t, "acme", "k1", fp1, idempotency.Started)
		b.begin(t, "globex", "k1", fp2, idempotency.Started)
		b.begin(t, "acme", "k2", fp2, idempotency.Started)
	})
}
