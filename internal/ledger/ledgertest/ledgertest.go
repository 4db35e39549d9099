// Package ledgertest is the conformance suite every ledger.Ledger
// implementation must pass (package dynamoledger against DynamoDB Local,
// package memledger in memory), so that the in-memory fake used by unit
// tests cannot drift from the real store.
//
// An implementation's test calls Run with a constructor that builds a
// fresh, empty ledger reading time from the clock it is given:
//
//	func TestConformance(t *testing.T) {
//		ledgertest.Run(t, func(t *testing.T, now func() time.Time) ledger.Ledger {
//			return memledger.New(memledger.Config{Now: now})
//		})
//	}
//
// The suite moves the clock (a *testsupport.Clock) to expire leases and
// rows. It finds a row's expiry from Record.ExpiresAt, so it works with
// any retention of at least a few minutes.
package ledgertest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/sendkey"
	"github.com/sendonce/sendonce/internal/testsupport"
)

// NewLedgerFunc builds a fresh, empty ledger that reads time from now.
type NewLedgerFunc func(t *testing.T, now func() time.Time) ledger.Ledger

// lease is the lease every claim of the suite asks for.
const lease = 60 * time.Second

// bundle is what one subtest works with.
type bundle struct {
	ctx   context.Context
	clock *testsupport.Clock
	l     ledger.Ledger
}

// Run runs the conformance suite against the ledgers newLedger builds.
// Every subtest builds its own ledger and runs in parallel: setup calls
// t.Parallel.
func Run(t *testing.T, newLedger NewLedgerFunc) {
	setup := func(t *testing.T) *bundle {
		t.Helper()
		t.Parallel()
		clock := testsupport.NewClock(testsupport.Start)
		return &bundle{ctx: t.Context(), clock: clock, l: newLedger(t, clock.Now)}
	}

	for _, part := range []struct {
		name string
		run  func(*testing.T, setupFunc)
	}{
		{"Claim", runClaim}, {"Mark", runMark}, {"Release", runRelease}, {"TakeOver", runTakeOver},
		{"Get", runGet}, {"Attention", runAttention}, {"ApplyDelivery", runApplyDelivery},
		{"OwnerIndex", runOwnerIndex},
	} {
		t.Run(part.name, func(t *testing.T) {
			t.Parallel()
			part.run(t, setup)
		})
	}
}

// setupFunc marks t parallel and returns a bundle over a fresh ledger.
type setupFunc func(t *testing.T) *bundle

// Key returns the idempotency key of a test message with event id event.
func Key(event string) string {
	return sendkey.Derive(sendkey.Parts{Tenant: "acme", EventID: event, RecipientID: "user-42", Channel: "sms", Template: "order_shipped"})
}

// NewEntry returns a complete entry for key, every field set.
func NewEntry(key string) ledger.Entry {
	e := ledger.Entry{
		Key:         key,
		Tenant:      "acme",
		Channel:     "sms",
		Class:       "transactional",
		Provider:    "http",
		Template:    "order_shipped",
		RecipientID: "user-42",
		Address:     "+15551234567",
		Subject:     "Order shipped",
		Body:        "Your order A-1001 shipped",
	}
	e.HTML, e.TemplateVersion, e.TemplateLocale = "<p>Your order A-1001 shipped</p>", 3, "pt-BR"
	e.Data = `{"order":"A-1001","n":1.50}`
	e.ValidUntil = time.Date(2026, 12, 1, 12, 5, 0, 123e6, time.UTC)
	return e
}

var eventSeq struct {
	mu sync.Mutex
	n  int
}

// newKey returns a key no other subtest uses.
func newKey(t *testing.T) string {
	eventSeq.mu.Lock()
	eventSeq.n++
	n := eventSeq.n
	eventSeq.mu.Unlock()
	return Key(fmt.Sprintf("%s/%d", t.Name(), n))
}

// claim claims a fresh key and fails t on error.
func (b *bundle) claim(t *testing.T) (ledger.Entry, ledger.Claim) {
	t.Helper()
	e := NewEntry(newKey(t))
	c, err := b.l.Claim(b.ctx, e, lease)
	if err != nil {
		t.Fatalf("Claim(%s): %v", e.Key, err)
	}
	return e, c
}

func (b *bundle) get(t *testing.T, key string) ledger.Record { t.Helper(); return Row(t, b.l, key) }

// Row returns the live row of key in l, and fails t when Get fails.
func Row(t testing.TB, l ledger.Ledger, key string) ledger.Record {
	t.Helper()
	r, err := l.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("Get(%s): %v", key, err)
	}
	return r
}

func (b *bundle) mark(t *testing.T, c ledger.Claim, o ledger.Outcome) {
	t.Helper()
	if err := b.l.Mark(b.ctx, c, o); err != nil {
		t.Fatalf("Mark(%s, %s): %v", c.Key, o.State, err)
	}
}

func (b *bundle) release(t *testing.T, c ledger.Claim, reason string, retryAt time.Time) {
	t.Helper()
	if err := b.l.Release(b.ctx, c, reason, retryAt); err != nil {
		t.Fatalf("Release(%s, %q): %v", c.Key, reason, err)
	}
}

// takeOver takes over the current row of key and fails t on error.
func (b *bundle) takeOver(t *testing.T, key string) ledger.Claim {
	t.Helper()
	c, err := b.l.TakeOver(b.ctx, b.get(t, key), "", lease)
	if err != nil {
		t.Fatalf("TakeOver(%s): %v", key, err)
	}
	return c
}

// expire moves the clock past r's expiry.
func (b *bundle) expire(t *testing.T, r ledger.Record) {
	t.Helper()
	if !r.ExpiresAt.After(b.clock.Now()) {
		t.Fatalf("row %s: ExpiresAt %v is not after now %v", r.Key, r.ExpiresAt, b.clock.Now())
	}
	b.clock.Set(r.ExpiresAt.Add(2 * time.Second))
}

// norm makes times comparable with reflect.DeepEqual: UTC, millisecond
// precision, zero stays zero.
func norm(r ledger.Record) ledger.Record {
	for _, p := range []*time.Time{&r.LeaseUntil, &r.AttemptedAt, &r.CreatedAt, &r.UpdatedAt, &r.ExpiresAt, &r.DeliveryAt, &r.ValidUntil} {
		if !p.IsZero() {
			*p = time.UnixMilli(p.UnixMilli()).UTC()
		}
	}
	return r
}

func sameRecord(t *testing.T, what string, got, want ledger.Record) {
	t.Helper()
	if g, w := norm(got), norm(want); !reflect.DeepEqual(g, w) {
		t.Errorf("%s:\n got %+v\nwant %+v", what, g, w)
	}
}

func sameTime(t *testing.T, what string, got, want time.Time) {
	t.Helper()
	if !got.Equal(want) {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

// wantPending is the row a first claim of e at now under c writes; its
// ExpiresAt is taken from got after checking it lies ahead.
func wantPending(t *testing.T, e ledger.Entry, c ledger.Claim, now time.Time, got ledger.Record) ledger.Record {
	t.Helper()
	if !got.ExpiresAt.After(now) {
		t.Errorf("ExpiresAt = %v, want after now %v", got.ExpiresAt, now)
	}
	return ledger.Record{
		Entry:       e,
		State:       ledger.StatePending,
		ClaimID:     c.ClaimID,
		Attempts:    1,
		LeaseUntil:  now.Add(lease),
		AttemptedAt: now,
		LookupFrom:  now,
		CreatedAt:   now,
		UpdatedAt:   now,
		ExpiresAt:   got.ExpiresAt,
	}
}

// onAbsent runs op (named name) on a key that has no row and fails t
// unless it returns want and leaves the key without a row.
func onAbsent(t *testing.T, setup setupFunc, name string, want error, op func(b *bundle, key string) error) {
	b := setup(t)
	key := newKey(t)
	if err := op(b, key); !errors.Is(err, want) {
		t.Fatalf("%s: err = %v, want %v", name, err, want)
	}
	if _, err := b.l.Get(b.ctx, key); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("Get after %s: err = %v, want ErrNotFound (no row created)", name, err)
	}
}

// arrangement names a way of preparing a fresh claim's row; arrange
// returns the claim to use afterwards.
type arrangement struct {
	name    string
	arrange func(t *testing.T, b *bundle, c ledger.Claim) ledger.Claim
}

// fencedOut runs op (named name) with the claim each arrangement leaves,
// one subtest "FencingLost/<arrangement>" each, and fails t unless op
// returns ErrFencingLost and leaves the row as it was.
func fencedOut(t *testing.T, setup setupFunc, name string, op func(b *bundle, c ledger.Claim) error, cases []arrangement) {
	for _, tc := range cases {
		t.Run("FencingLost/"+tc.name, func(t *testing.T) {
			b := setup(t)
			e, c := b.claim(t)
			c = tc.arrange(t, b, c)
			before := b.get(t, e.Key)
			b.clock.Advance(time.Second)
			if err := op(b, c); !errors.Is(err, ledger.ErrFencingLost) {
				t.Fatalf("%s: err = %v, want ErrFencingLost", name, err)
			}
			sameRecord(t, "row after fenced "+name, b.get(t, e.Key), before)
		})
	}
}

// onExpired claims a key, marks it with o unless o.State is empty, moves
// the clock past the row's expiry, and fails t unless op (named name), given
// the claim and the row as it was before it expired, returns want.
func onExpired(t *testing.T, setup setupFunc, name string, want error, o ledger.Outcome, op func(b *bundle, c ledger.Claim, cur ledger.Record) error) {
	b := setup(t)
	e, c := b.claim(t)
	if o.State != "" {
		b.mark(t, c, o)
	}
	cur := b.get(t, e.Key)
	b.expire(t, cur)
	if err := op(b, c, cur); !errors.Is(err, want) {
		t.Fatalf("%s: err = %v, want %v", name, err, want)
	}
}

// contend calls take from workers goroutines at once, for key number i,
// and fails t unless exactly one call won and every other one lost with a
// conflict. It returns the winner's claim and the rows the losers saw.
func contend(t *testing.T, i, workers int, take func() (ledger.Claim, error)) (ledger.Claim, []ledger.Record) {
	t.Helper()
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		winners   []ledger.Claim
		conflicts []ledger.Record
		others    []error
	)
	for range workers {
		wg.Go(func() {
			c, err := take()
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				winners = append(winners, c)
			} else if cur, ok := ledger.AsConflict(err); ok {
				conflicts = append(conflicts, cur)
			} else {
				others = append(others, err)
			}
		})
	}
	wg.Wait()
	if len(others) > 0 {
		t.Fatalf("key %d: unexpected errors: %v", i, others)
	}
	if len(winners) != 1 || len(conflicts) != workers-1 {
		t.Fatalf("key %d: %d winners, %d conflicts; want 1 and %d", i, len(winners), len(conflicts), workers-1)
	}
	return winners[0], conflicts
}

// final drops what a final row no longer keeps.
func final(e ledger.Entry) ledger.Entry {
	e.Address, e.Subject, e.Body = "", "", ""
	e.HTML, e.Data = "", ""
	return e
}

func runClaim(t *testing.T, setup setupFunc) {
	t.Run("First", func(t *testing.T) {
		b := setup(t)
		now := b.clock.Now()
		e, c := b.claim(t)
		if c.Key != e.Key || c.ClaimID == "" || c.Attempt != 1 {
			t.Errorf("claim = %+v, want key %s, a claim id, attempt 1", c, e.Key)
		}
		sameTime(t, "LeaseUntil", c.LeaseUntil, now.Add(lease))
		sameTime(t, "AttemptedAt", c.AttemptedAt, now)
		got := b.get(t, e.Key)
		sameRecord(t, "row", got, wantPending(t, e, c, now, got))
		if got.Stale(now) {
			t.Errorf("fresh claim is stale at %v", now)
		}
	})

	t.Run("FreshClaimIDs", func(t *testing.T) {
		b := setup(t)
		seen := map[string]bool{}
		for range 8 {
			_, c := b.claim(t)
			if seen[c.ClaimID] {
				t.Fatalf("claim id %q handed out twice", c.ClaimID)
			}
			seen[c.ClaimID] = true
		}
	})

	t.Run("DuplicateOfPending", func(t *testing.T) {
		b := setup(t)
		e, c := b.claim(t)
		before := b.get(t, e.Key)
		b.clock.Advance(time.Second)
		_, err := b.l.Claim(b.ctx, e, lease)
		if !errors.Is(err, ledger.ErrExists) {
			t.Fatalf("second Claim: err = %v, want ErrExists", err)
		}
		var ce *ledger.ConflictError
		if !errors.As(err, &ce) {
			t.Fatalf("second Claim: err = %T, want *ledger.ConflictError", err)
		}
		cur, ok := ledger.AsConflict(err)
		if !ok {
			t.Fatalf("AsConflict(%v) = false", err)
		}
		if cur.State != ledger.StatePending || cur.ClaimID != c.ClaimID || cur.Attempts != 1 {
			t.Errorf("conflict row = %s/%s/%d, want PENDING/%s/1", cur.State, cur.ClaimID, cur.Attempts, c.ClaimID)
		}
		sameRecord(t, "conflict row", cur, before)
		sameRecord(t, "row after duplicate", b.get(t, e.Key), before)
	})

	t.Run("DuplicateOfSent", func(t *testing.T) {
		b := setup(t)
		e, c := b.claim(t)
		b.mark(t, c, ledger.Outcome{State: ledger.StateSent, ProviderMessageID: "msg_123"})
		want := b.get(t, e.Key)
		_, err := b.l.Claim(b.ctx, e, lease)
		cur, ok := ledger.AsConflict(err)
		if !ok || !errors.Is(err, ledger.ErrExists) {
			t.Fatalf("Claim of a SENT row: err = %v, want a *ConflictError matching ErrExists", err)
		}
		if cur.State != ledger.StateSent || cur.ClaimID != c.ClaimID || cur.Attempts != 1 || cur.ProviderMessageID != "msg_123" {
			t.Errorf("conflict row = %s/%s/%d/%s, want SENT/%s/1/msg_123", cur.State, cur.ClaimID, cur.Attempts, cur.ProviderMessageID, c.ClaimID)
		}
		sameRecord(t, "conflict row", cur, want)
	})

	t.Run("OverExpiredRow", func(t *testing.T) {
		b := setup(t)
		e, c := b.claim(t)
		b.mark(t, c, ledger.Outcome{State: ledger.StateSent, ProviderMessageID: "msg_old"})
		if _, err := b.l.ApplyDelivery(b.ctx, e.Key, ledger.Delivery{Status: "delivered", Rank: 2, At: b.clock.Now()}); err != nil {
			t.Fatalf("ApplyDelivery: %v", err)
		}
		old := b.get(t, e.Key)

		// One second before expiry the row still holds the key.
		b.clock.Set(old.ExpiresAt.Add(-time.Second))
		if _, err := b.l.Claim(b.ctx, e, lease); !errors.Is(err, ledger.ErrExists) {
			t.Fatalf("Claim just before expiry: err = %v, want ErrExists", err)
		}

		b.expire(t, old)
		now := b.clock.Now()
		c2, err := b.l.Claim(b.ctx, e, lease)
		if err != nil {
			t.Fatalf("Claim over an expired row: %v", err)
		}
		if c2.ClaimID == c.ClaimID || c2.Attempt != 1 {
			t.Errorf("claim = %+v, want a new claim id and attempt 1", c2)
		}
		got := b.get(t, e.Key)
		sameRecord(t, "row", got, wantPending(t, e, c2, now, got))
	})

	t.Run("Concurrent", func(t *testing.T) {
		b := setup(t)
		const workers = 64
		for i := range 4 {
			e := NewEntry(newKey(t))
			winner, conflicts := contend(t, i, workers, func() (ledger.Claim, error) { return b.l.Claim(b.ctx, e, lease) })
			for _, cur := range conflicts {
				if cur.ClaimID != winner.ClaimID {
					t.Errorf("key %d: conflict shows claim %s, want the winner's %s", i, cur.ClaimID, winner.ClaimID)
				}
			}
			if got := b.get(t, e.Key); got.ClaimID != winner.ClaimID || got.Attempts != 1 {
				t.Errorf("key %d: row claim %s attempt %d, want %s and 1", i, got.ClaimID, got.Attempts, winner.ClaimID)
			}
		}
	})

	// A Claim whose answer is lost (here: the context was cancelled)
	// returns the claim it tried to take; releasing it is harmless when
	// the write never applied.
	// The message's validity is written by the claim, in the same write,
	// and kept through takeovers, releases and a final mark: the
	// reconciler judges it from the row (package decide).
	t.Run("ValidUntilKeptForTheRowsLife", func(t *testing.T) {
		b := setup(t)
		e, c := b.claim(t)
		sameTime(t, "ValidUntil after the claim", b.get(t, e.Key).ValidUntil, e.ValidUntil)
		b.release(t, c, "provider 503", time.Time{})
		c2 := b.takeOver(t, e.Key)
		sameTime(t, "ValidUntil after a release and a takeover", b.get(t, e.Key).ValidUntil, e.ValidUntil)
		b.mark(t, c2, ledger.Outcome{State: ledger.StateFailed, Reason: "expired: test"})
		sameTime(t, "ValidUntil after a final mark", b.get(t, e.Key).ValidUntil, e.ValidUntil)
		none := NewEntry(newKey(t))
		none.ValidUntil = time.Time{}
		if _, err := b.l.Claim(b.ctx, none, lease); err != nil {
			t.Fatal(err)
		}
		if got := b.get(t, none.Key).ValidUntil; !got.IsZero() {
			t.Errorf("ValidUntil of a message without validity = %v, want zero", got)
		}
	})

	t.Run("LostAnswerReturnsTheClaim", func(t *testing.T) {
		b := setup(t)
		e := NewEntry(newKey(t))
		ctx, cancel := context.WithCancel(b.ctx)
		cancel()
		now := b.clock.Now()
		c, err := b.l.Claim(ctx, e, lease)
		if err == nil || errors.Is(err, ledger.ErrExists) {
			t.Fatalf("Claim with a cancelled context: err = %v, want a lost answer", err)
		}
		if c.Key != e.Key || c.ClaimID == "" || c.Attempt != 1 {
			t.Fatalf("claim with the lost answer = %+v, want key %s, a claim id, attempt 1", c, e.Key)
		}
		sameTime(t, "AttemptedAt", c.AttemptedAt, now)
		if err := b.l.Release(b.ctx, c, "lost answer", time.Time{}); !errors.Is(err, ledger.ErrFencingLost) {
			t.Errorf("Release of a claim never written: err = %v, want ErrFencingLost", err)
		}
		if _, err := b.l.Get(b.ctx, e.Key); !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("Get: err = %v, want ErrNotFound", err)
		}
		if _, err := b.l.Claim(b.ctx, e, lease); err != nil {
			t.Errorf("Claim after the lost answer: %v", err)
		}
	})

	t.Run("InvalidInput", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			name  string
			entry ledger.Entry
			lease time.Duration
		}{
			{"EmptyKey", NewEntry(""), lease},
			{"ZeroLease", NewEntry(Key("zero-lease")), 0},
			{"NegativeLease", NewEntry(Key("negative-lease")), -time.Second},
		} {
			t.Run(tc.name, func(t *testing.T) {
				b := setup(t)
				_, err := b.l.Claim(b.ctx, tc.entry, tc.lease)
				if err == nil || errors.Is(err, ledger.ErrExists) {
					t.Fatalf("Claim: err = %v, want an input error", err)
				}
				if tc.entry.Key != "" {
					if _, err := b.l.Get(b.ctx, tc.entry.Key); !errors.Is(err, ledger.ErrNotFound) {
						t.Errorf("Get after rejected claim: err = %v, want ErrNotFound", err)
					}
				}
			})
		}
	})
}

func runMark(t *testing.T, setup setupFunc) {
	for _, tc := range []struct {
		name string
		o    ledger.Outcome
	}{
		{"Sent", ledger.Outcome{State: ledger.StateSent, ProviderMessageID: "msg_1"}},
		{"Failed", ledger.Outcome{State: ledger.StateFailed, Reason: "invalid number"}},
		{"Abandoned", ledger.Outcome{State: ledger.StateAbandoned, ProviderMessageID: "msg_2", Reason: "attempt limit"}},
		{"Uncertain", ledger.Outcome{State: ledger.StateUncertain, Reason: "timeout after write"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := setup(t)
			e, c := b.claim(t)
			before := b.get(t, e.Key)
			now := b.clock.Advance(5 * time.Second)
			b.mark(t, c, tc.o)
			got := b.get(t, e.Key)

			want := before
			want.State = tc.o.State
			want.ProviderMessageID = tc.o.ProviderMessageID
			want.Reason = tc.o.Reason
			want.UpdatedAt = now
			if tc.o.State.Final() {
				want.Entry = final(e)
			}
			if !got.ExpiresAt.After(before.ExpiresAt) {
				t.Errorf("ExpiresAt = %v, want refreshed past %v", got.ExpiresAt, before.ExpiresAt)
			}
			want.ExpiresAt = got.ExpiresAt
			sameRecord(t, "row", got, want)
		})
	}

	t.Run("KeepsProviderMessageIDWhenNoneGiven", func(t *testing.T) {
		b := setup(t)
		e, c := b.claim(t)
		if _, err := b.l.ApplyDelivery(b.ctx, e.Key, ledger.Delivery{Status: "sent", Rank: 1, At: b.clock.Now(), ProviderMessageID: "msg_cb"}); err != nil {
			t.Fatalf("ApplyDelivery: %v", err)
		}
		b.mark(t, c, ledger.Outcome{State: ledger.StateSent})
		if got := b.get(t, e.Key); got.ProviderMessageID != "msg_cb" {
			t.Errorf("ProviderMessageID = %q, want msg_cb", got.ProviderMessageID)
		}
	})

	t.Run("ReplacesReleaseReason", func(t *testing.T) {
		b := setup(t)
		e, c := b.claim(t)
		b.release(t, c, "provider 503", time.Time{})
		b.mark(t, c, ledger.Outcome{State: ledger.StateSent, ProviderMessageID: "msg_1"})
		got := b.get(t, e.Key)
		if got.Reason != "" || got.Released {
			t.Errorf("after Mark SENT: Reason %q Released %v, want empty and false", got.Reason, got.Released)
		}
	})

	fencedOut(t, setup, "Mark", func(b *bundle, c ledger.Claim) error {
		return b.l.Mark(b.ctx, c, ledger.Outcome{State: ledger.StateFailed, Reason: "late"})
	}, []arrangement{
		{"WrongClaimID", func(t *testing.T, b *bundle, c ledger.Claim) ledger.Claim {
			c.ClaimID = "not-" + c.ClaimID
			return c
		}},
		{"EmptyClaimID", func(t *testing.T, b *bundle, c ledger.Claim) ledger.Claim {
			c.ClaimID = ""
			return c
		}},
		{"OldClaimAfterTakeOver", func(t *testing.T, b *bundle, c ledger.Claim) ledger.Claim {
			b.clock.Advance(lease + time.Second)
			b.takeOver(t, c.Key)
			return c
		}},
		{"AlreadyMarked", func(t *testing.T, b *bundle, c ledger.Claim) ledger.Claim {
			b.mark(t, c, ledger.Outcome{State: ledger.StateSent, ProviderMessageID: "msg_1"})
			return c
		}},
		{"AlreadyUncertain", func(t *testing.T, b *bundle, c ledger.Claim) ledger.Claim {
			b.mark(t, c, ledger.Outcome{State: ledger.StateUncertain, Reason: "timeout"})
			return c
		}},
	})

	t.Run("FencingLost/AbsentKey", func(t *testing.T) {
		onAbsent(t, setup, "Mark", ledger.ErrFencingLost, func(b *bundle, key string) error {
			return b.l.Mark(b.ctx, ledger.Claim{Key: key, ClaimID: "c1", Attempt: 1}, ledger.Outcome{State: ledger.StateSent})
		})
	})

	t.Run("FencingLost/ExpiredRow", func(t *testing.T) {
		onExpired(t, setup, "Mark", ledger.ErrFencingLost, ledger.Outcome{}, func(b *bundle, c ledger.Claim, _ ledger.Record) error {
			return b.l.Mark(b.ctx, c, ledger.Outcome{State: ledger.StateSent})
		})
	})

	t.Run("InvalidOutcome", func(t *testing.T) {
		t.Parallel()
		for _, s := range []ledger.State{"", ledger.StatePending, "DELIVERED"} {
			t.Run(string(s), func(t *testing.T) {
				b := setup(t)
				e, c := b.claim(t)
				before := b.get(t, e.Key)
				if err := b.l.Mark(b.ctx, c, ledger.Outcome{State: s}); err == nil || errors.Is(err, ledger.ErrFencingLost) {
					t.Fatalf("Mark(%q): err = %v, want an input error", s, err)
				}
				sameRecord(t, "row", b.get(t, e.Key), before)
			})
		}
	})
}

func runRelease(t *testing.T, setup setupFunc) {
	t.Run("OK", func(t *testing.T) {
		b := setup(t)
		e, c := b.claim(t)
		before := b.get(t, e.Key)
		now := b.clock.Advance(5 * time.Second)
		b.release(t, c, "provider 503", time.Time{})
		got := b.get(t, e.Key)
		want := before
		want.Released = true
		want.Releases = 1
		want.Reason = "provider 503"
		want.LeaseUntil = now
		want.RetryAt = now
		want.UpdatedAt = now
		want.ExpiresAt = got.ExpiresAt
		sameRecord(t, "row", got, want)
		if !got.Stale(now) {
			t.Errorf("released row is not stale at %v", now)
		}
		sameTime(t, "Due", ledger.Due(got), now)
	})

	// A second Release of a released claim (a retry whose first answer was
	// lost) changes nothing and succeeds: the release counts once.
	t.Run("Twice", func(t *testing.T) {
		b := setup(t)
		e, c := b.claim(t)
		b.release(t, c, "first", time.Time{})
		want := b.get(t, e.Key)
		b.clock.Advance(time.Second)
		b.release(t, c, "second", b.clock.Now().Add(time.Hour))
		got := b.get(t, e.Key)
		sameRecord(t, "row after a second release", got, want)
		if got.Releases != 1 || got.Reason != "first" {
			t.Errorf("Releases %d Reason %q, want 1 and first", got.Releases, got.Reason)
		}
	})

	// RetryAt is the reconciler's backoff: the row is due then, but its
	// lease has ended, so a sender may take it over at once.
	t.Run("RetryAt", func(t *testing.T) {
		b := setup(t)
		e, c := b.claim(t)
		now := b.clock.Advance(time.Second)
		retry := now.Add(5 * time.Minute)
		b.release(t, c, "provider 429", retry)
		got := b.get(t, e.Key)
		sameTime(t, "RetryAt", got.RetryAt, retry)
		sameTime(t, "LeaseUntil", got.LeaseUntil, now)
		sameTime(t, "Due", ledger.Due(got), retry)
		if !got.Stale(now) {
			t.Errorf("released row is not stale at %v", now)
		}
		if byKey, _ := b.attentionAll(t, now.Add(time.Minute), 0); len(byKey) != 0 {
			t.Errorf("a row backing off until %v is listed as due before %v", retry, now.Add(time.Minute))
		}
		if byKey, _ := b.attentionAll(t, retry.Add(time.Millisecond), 0); len(byKey) != 1 {
			t.Errorf("attention lists %d rows due before %v, want the released row", len(byKey), retry.Add(time.Millisecond))
		}
		// A takeover at once (a sender's redelivery) clears the backoff and
		// keeps the release count.
		c2, err := b.l.TakeOver(b.ctx, got, "", lease)
		if err != nil {
			t.Fatalf("TakeOver of a backing-off row: %v", err)
		}
		got = b.get(t, e.Key)
		if got.Released || !got.RetryAt.IsZero() || got.Releases != 1 || got.Attempts != 2 {
			t.Errorf("after takeover: Released %v RetryAt %v Releases %d Attempts %d, want false, zero, 1, 2", got.Released, got.RetryAt, got.Releases, got.Attempts)
		}
		b.release(t, c2, "again", time.Time{})
		if got := b.get(t, e.Key); got.Releases != 2 {
			t.Errorf("Releases = %d after two released claims, want 2", got.Releases)
		}
		b.mark(t, c2, ledger.Outcome{State: ledger.StateSent, ProviderMessageID: "msg_1"})
		if got := b.get(t, e.Key); got.Released || !got.RetryAt.IsZero() {
			t.Errorf("after Mark: Released %v RetryAt %v, want false and zero", got.Released, got.RetryAt)
		}
	})

	fencedOut(t, setup, "Release", func(b *bundle, c ledger.Claim) error {
		return b.l.Release(b.ctx, c, "late", time.Time{})
	}, []arrangement{
		{"WrongClaimID", func(t *testing.T, b *bundle, c ledger.Claim) ledger.Claim {
			c.ClaimID += "x"
			return c
		}},
		{"AfterMark", func(t *testing.T, b *bundle, c ledger.Claim) ledger.Claim {
			b.mark(t, c, ledger.Outcome{State: ledger.StateFailed, Reason: "rejected"})
			return c
		}},
		{"AfterTakeOver", func(t *testing.T, b *bundle, c ledger.Claim) ledger.Claim {
			b.release(t, c, "first", time.Time{})
			b.takeOver(t, c.Key)
			return c
		}},
	})

	t.Run("FencingLost/AbsentKey", func(t *testing.T) {
		onAbsent(t, setup, "Release", ledger.ErrFencingLost, func(b *bundle, key string) error {
			return b.l.Release(b.ctx, ledger.Claim{Key: key, ClaimID: "c1", Attempt: 1}, "x", time.Time{})
		})
	})
}

func runTakeOver(t *testing.T, setup setupFunc) {
	// Each case prepares a row that may be taken over and returns how long
	// to wait before the takeover.
	for _, tc := range []struct {
		name    string
		arrange func(t *testing.T, b *bundle, c ledger.Claim)
		// state is the state before the takeover.
		state ledger.State
	}{
		{"StalePending", func(t *testing.T, b *bundle, c ledger.Claim) {
			b.clock.Advance(lease + time.Second)
		}, ledger.StatePending},
		{"PendingAtLeaseEnd", func(t *testing.T, b *bundle, c ledger.Claim) {
			b.clock.Advance(lease)
		}, ledger.StatePending},
		{"Released", func(t *testing.T, b *bundle, c ledger.Claim) {
			b.release(t, c, "provider 503", time.Time{})
		}, ledger.StatePending},
		{"Uncertain", func(t *testing.T, b *bundle, c ledger.Claim) {
			b.mark(t, c, ledger.Outcome{State: ledger.StateUncertain, Reason: "timeout"})
			b.clock.Advance(time.Second)
		}, ledger.StateUncertain},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := setup(t)
			e, c := b.claim(t)
			tc.arrange(t, b, c)
			cur := b.get(t, e.Key)
			if cur.State != tc.state {
				t.Fatalf("state before takeover = %s, want %s", cur.State, tc.state)
			}
			now := b.clock.Now()
			c2, err := b.l.TakeOver(b.ctx, cur, "", lease)
			if err != nil {
				t.Fatalf("TakeOver: %v", err)
			}
			if c2.Key != e.Key || c2.ClaimID == "" || c2.ClaimID == c.ClaimID || c2.Attempt != 2 {
				t.Errorf("claim = %+v, want key %s, a new claim id, attempt 2", c2, e.Key)
			}
			sameTime(t, "LeaseUntil", c2.LeaseUntil, now.Add(lease))
			sameTime(t, "AttemptedAt", c2.AttemptedAt, now)

			got := b.get(t, e.Key)
			want := cur
			want.Entry = e
			want.State = ledger.StatePending
			want.ClaimID = c2.ClaimID
			want.Attempts = 2
			want.Released = false
			want.RetryAt = time.Time{}
			want.LeaseUntil = now.Add(lease)
			want.AttemptedAt = now
			// The lookup window restarts after a release and keeps covering
			// the attempt being resolved otherwise.
			if cur.Released {
				want.LookupFrom = now
			} else {
				want.LookupFrom = cur.AttemptedAt
			}
			want.UpdatedAt = now
			want.ExpiresAt = got.ExpiresAt
			want.History = ledger.NextHistory(cur)
			sameRecord(t, "row", got, want)
			if len(got.History) != 1 || !strings.HasPrefix(got.History[0], "1 http ") {
				t.Errorf("History = %q, want the first attempt through http", got.History)
			}

			// The new claim holds the row; the old one does not.
			if err := b.l.Mark(b.ctx, c, ledger.Outcome{State: ledger.StateSent}); !errors.Is(err, ledger.ErrFencingLost) {
				t.Errorf("Mark with the old claim: err = %v, want ErrFencingLost", err)
			}
			b.mark(t, c2, ledger.Outcome{State: ledger.StateSent, ProviderMessageID: "msg_2"})
		})
	}

	// Each takeover adds the attempt it replaces to History, which keeps
	// the latest MaxHistory.
	t.Run("HistoryIsBounded", func(t *testing.T) {
		b := setup(t)
		e, c := b.claim(t)
		for i := range ledger.MaxHistory + 2 {
			b.release(t, c, fmt.Sprintf("provider 503 #%d", i+1), time.Time{})
			cur := b.get(t, e.Key)
			var err error
			if c, err = b.l.TakeOver(b.ctx, cur, "", lease); err != nil {
				t.Fatalf("TakeOver %d: %v", i+1, err)
			}
		}
		h := b.get(t, e.Key).History
		if len(h) != ledger.MaxHistory {
			t.Fatalf("History holds %d entries, want %d: %q", len(h), ledger.MaxHistory, h)
		}
		if want := fmt.Sprintf("%d http released: provider 503 #%d", ledger.MaxHistory+2, ledger.MaxHistory+2); h[len(h)-1] != want {
			t.Errorf("the latest entry = %q, want %q", h[len(h)-1], want)
		}
	})

	// The takeover records the new attempt's provider when the caller
	// names one, and keeps the row's otherwise.
	for _, tc := range []struct{ name, provider, want string }{
		{"ProviderNamed", "sns", "sns"},
		{"ProviderKept", "", "http"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := setup(t)
			e, c := b.claim(t)
			b.release(t, c, "provider 503", time.Time{})
			cur := b.get(t, e.Key)
			if cur.Provider != "http" {
				t.Fatalf("Provider before the takeover = %q, want http", cur.Provider)
			}
			if _, err := b.l.TakeOver(b.ctx, cur, tc.provider, lease); err != nil {
				t.Fatalf("TakeOver: %v", err)
			}
			if got := b.get(t, e.Key).Provider; got != tc.want {
				t.Errorf("Provider after the takeover = %q, want %q", got, tc.want)
			}
		})
	}

	for _, tc := range []struct {
		name    string
		arrange func(t *testing.T, b *bundle, c ledger.Claim) ledger.Record
	}{
		{"LivePending", func(t *testing.T, b *bundle, c ledger.Claim) ledger.Record {
			b.clock.Advance(lease - time.Millisecond)
			return b.get(t, c.Key)
		}},
		{"Sent", func(t *testing.T, b *bundle, c ledger.Claim) ledger.Record {
			b.mark(t, c, ledger.Outcome{State: ledger.StateSent, ProviderMessageID: "msg_1"})
			return b.get(t, c.Key)
		}},
		{"Failed", func(t *testing.T, b *bundle, c ledger.Claim) ledger.Record {
			b.mark(t, c, ledger.Outcome{State: ledger.StateFailed, Reason: "rejected"})
			return b.get(t, c.Key)
		}},
		{"Abandoned", func(t *testing.T, b *bundle, c ledger.Claim) ledger.Record {
			b.mark(t, c, ledger.Outcome{State: ledger.StateAbandoned, Reason: "policy"})
			return b.get(t, c.Key)
		}},
		{"OldClaimID", func(t *testing.T, b *bundle, c ledger.Claim) ledger.Record {
			old := b.get(t, c.Key)
			b.clock.Advance(lease + time.Second)
			b.takeOver(t, c.Key)
			// Even once the new claim is stale, the old ClaimID is fenced out.
			b.clock.Advance(lease + time.Second)
			return old
		}},
	} {
		t.Run("Conflict/"+tc.name, func(t *testing.T) {
			b := setup(t)
			_, c := b.claim(t)
			cur := tc.arrange(t, b, c)
			before := b.get(t, c.Key)
			_, err := b.l.TakeOver(b.ctx, cur, "", lease)
			got, ok := ledger.AsConflict(err)
			if !ok || !errors.Is(err, ledger.ErrExists) {
				t.Fatalf("TakeOver: err = %v, want a *ConflictError matching ErrExists", err)
			}
			sameRecord(t, "conflict row", got, before)
			sameRecord(t, "row after failed takeover", b.get(t, c.Key), before)
		})
	}

	// A takeover that sends nothing (it marks UNCERTAIN, or its answer is
	// lost) must not move the lookup window past the attempt being
	// resolved; a release restarts it.
	t.Run("LookupFromCoversTheAttemptBeingResolved", func(t *testing.T) {
		b := setup(t)
		t0 := b.clock.Now()
		e, _ := b.claim(t)
		b.clock.Advance(lease + time.Second)
		c2 := b.takeOver(t, e.Key)
		b.mark(t, c2, ledger.Outcome{State: ledger.StateUncertain, Reason: "dead worker"})
		b.clock.Advance(time.Minute)
		c3 := b.takeOver(t, e.Key)
		got := b.get(t, e.Key)
		sameTime(t, "LookupFrom after two takeovers", got.LookupFrom, t0)
		sameTime(t, "LookupStart", got.LookupStart(), t0)
		sameTime(t, "AttemptedAt", got.AttemptedAt, c3.AttemptedAt)
		b.release(t, c3, "provider 503", time.Time{})
		now := b.clock.Advance(time.Second)
		b.takeOver(t, e.Key)
		sameTime(t, "LookupFrom after a release", b.get(t, e.Key).LookupFrom, now)
	})

	t.Run("LostAnswerReturnsTheClaim", func(t *testing.T) {
		b := setup(t)
		e, c := b.claim(t)
		b.release(t, c, "provider 503", time.Time{})
		cur := b.get(t, e.Key)
		ctx, cancel := context.WithCancel(b.ctx)
		cancel()
		c2, err := b.l.TakeOver(ctx, cur, "", lease)
		if err == nil || errors.Is(err, ledger.ErrExists) || errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("TakeOver with a cancelled context: err = %v, want a lost answer", err)
		}
		if c2.Key != e.Key || c2.ClaimID == "" || c2.ClaimID == c.ClaimID || c2.Attempt != 2 {
			t.Fatalf("claim with the lost answer = %+v, want key %s, a new claim id, attempt 2", c2, e.Key)
		}
		if err := b.l.Release(b.ctx, c2, "lost answer", time.Time{}); !errors.Is(err, ledger.ErrFencingLost) {
			t.Errorf("Release of a takeover never written: err = %v, want ErrFencingLost", err)
		}
		sameRecord(t, "row", b.get(t, e.Key), cur)
	})

	t.Run("NotFound/Absent", func(t *testing.T) {
		onAbsent(t, setup, "TakeOver", ledger.ErrNotFound, func(b *bundle, key string) error {
			_, err := b.l.TakeOver(b.ctx, ledger.Record{Entry: NewEntry(key), State: ledger.StateUncertain, ClaimID: "c1", Attempts: 1}, "", lease)
			return err
		})
	})

	t.Run("NotFound/Expired", func(t *testing.T) {
		onExpired(t, setup, "TakeOver", ledger.ErrNotFound, ledger.Outcome{State: ledger.StateUncertain, Reason: "timeout"}, func(b *bundle, _ ledger.Claim, cur ledger.Record) error {
			_, err := b.l.TakeOver(b.ctx, cur, "", lease)
			return err
		})
	})

	t.Run("InvalidLease", func(t *testing.T) {
		b := setup(t)
		e, c := b.claim(t)
		b.mark(t, c, ledger.Outcome{State: ledger.StateUncertain, Reason: "timeout"})
		cur := b.get(t, e.Key)
		_, err := b.l.TakeOver(b.ctx, cur, "", 0)
		if err == nil || errors.Is(err, ledger.ErrExists) || errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("TakeOver with zero lease: err = %v, want an input error", err)
		}
		sameRecord(t, "row", b.get(t, e.Key), cur)
	})

	t.Run("Concurrent", func(t *testing.T) {
		b := setup(t)
		const workers = 8
		for i := range 4 {
			e, c := b.claim(t)
			if i%2 == 0 {
				b.mark(t, c, ledger.Outcome{State: ledger.StateUncertain, Reason: "timeout"})
			} else {
				b.clock.Advance(lease)
			}
			cur := b.get(t, e.Key)
			winner, conflicts := contend(t, i, workers, func() (ledger.Claim, error) { return b.l.TakeOver(b.ctx, cur, "", lease) })
			for _, got := range conflicts {
				if got.ClaimID != winner.ClaimID || got.State != ledger.StatePending || got.Attempts != 2 {
					t.Errorf("key %d: conflict row %s/%s/%d, want PENDING/%s/2", i, got.State, got.ClaimID, got.Attempts, winner.ClaimID)
				}
			}
		}
	})
}

func runGet(t *testing.T, setup setupFunc) {
	t.Run("NotFound/Absent", func(t *testing.T) {
		onAbsent(t, setup, "Get", ledger.ErrNotFound, func(b *bundle, key string) error {
			_, err := b.l.Get(b.ctx, key)
			return err
		})
	})
	t.Run("NotFound/Expired", func(t *testing.T) {
		onExpired(t, setup, "Get", ledger.ErrNotFound, ledger.Outcome{State: ledger.StateSent, ProviderMessageID: "msg_1"}, func(b *bundle, c ledger.Claim, _ ledger.Record) error {
			_, err := b.l.Get(b.ctx, c.Key)
			return err
		})
	})
}

// due is when r is due for attention.
func due(r ledger.Record) time.Time {
	if r.State == ledger.StateUncertain {
		return r.UpdatedAt
	}
	return r.LeaseUntil
}

// attention pages through one shard and returns every row, checking that
// no page exceeds limit.
func (b *bundle) attention(t *testing.T, shard int, dueBefore time.Time, limit int) (rows []ledger.Record, pages int) {
	t.Helper()
	q := ledger.AttentionQuery{Shard: shard, DueBefore: dueBefore, Limit: limit}
	for {
		p, err := b.l.Attention(b.ctx, q)
		if err != nil {
			t.Fatalf("Attention(shard %d, cursor %q): %v", shard, q.Cursor, err)
		}
		pages++
		if limit > 0 && len(p.Records) > limit {
			t.Fatalf("Attention(shard %d): page of %d rows, limit %d", shard, len(p.Records), limit)
		}
		rows = append(rows, p.Records...)
		if p.Cursor == "" {
			return rows, pages
		}
		if pages > 1000 {
			t.Fatalf("Attention(shard %d): more than 1000 pages", shard)
		}
		q.Cursor = p.Cursor
	}
}

// attentionAll returns the rows of every shard, checking that each shard is
// ordered oldest due first and that no key shows up twice.
func (b *bundle) attentionAll(t *testing.T, dueBefore time.Time, limit int) (byKey map[string]ledger.Record, byShard [][]ledger.Record) {
	t.Helper()
	byKey = map[string]ledger.Record{}
	byShard = make([][]ledger.Record, ledger.AttentionShards)
	for s := range ledger.AttentionShards {
		rows, _ := b.attention(t, s, dueBefore, limit)
		byShard[s] = rows
		for i, r := range rows {
			if _, dup := byKey[r.Key]; dup {
				t.Errorf("key %s listed twice", r.Key)
			}
			byKey[r.Key] = r
			if i > 0 && due(r).Before(due(rows[i-1])) {
				t.Errorf("shard %d: row %d due %v before row %d due %v", s, i, due(r), i-1, due(rows[i-1]))
			}
			if !due(r).Before(dueBefore) {
				t.Errorf("shard %d: row %s due %v, not before %v", s, r.Key, due(r), dueBefore)
			}
		}
	}
	return byKey, byShard
}

func runAttention(t *testing.T, setup setupFunc) {
	// populate writes n rows, one second apart, cycling through every
	// state, and returns the keys that need attention.
	populate := func(t *testing.T, b *bundle, n int) map[string]bool {
		t.Helper()
		need := map[string]bool{}
		for i := range n {
			b.clock.Advance(time.Second)
			e := NewEntry(Key(fmt.Sprintf("attention-%d", i)))
			c, err := b.l.Claim(b.ctx, e, lease)
			if err != nil {
				t.Fatalf("Claim: %v", err)
			}
			switch i % 7 {
			case 0:
				// A first claim is not indexed.
			case 6:
				// A claim whose lease passed, taken over (a redelivery's
				// takeover).
				b.clock.Advance(lease)
				b.takeOver(t, e.Key)
				need[e.Key] = true
			case 1:
				b.mark(t, c, ledger.Outcome{State: ledger.StateUncertain, Reason: "timeout"})
				need[e.Key] = true
			case 2:
				b.release(t, c, "provider 503", time.Time{})
				need[e.Key] = true
			case 3:
				b.mark(t, c, ledger.Outcome{State: ledger.StateSent, ProviderMessageID: "msg"})
			case 4:
				b.mark(t, c, ledger.Outcome{State: ledger.StateFailed, Reason: "rejected"})
			case 5:
				// The reconciler abandons an uncertain row by taking it over.
				b.mark(t, c, ledger.Outcome{State: ledger.StateUncertain, Reason: "timeout"})
				c2 := b.takeOver(t, e.Key)
				b.mark(t, c2, ledger.Outcome{State: ledger.StateAbandoned, Reason: "policy"})
			}
		}
		return need
	}

	t.Run("OnlyRowsThatNeedAttention", func(t *testing.T) {
		b := setup(t)
		need := populate(t, b, 36)
		byKey, byShard := b.attentionAll(t, b.clock.Now().Add(24*time.Hour), 0)
		if len(byKey) != len(need) {
			t.Errorf("attention lists %d rows, want %d", len(byKey), len(need))
		}
		for k := range need {
			if _, ok := byKey[k]; !ok {
				t.Errorf("row %s needs attention but is not listed", k)
			}
		}
		for k, r := range byKey {
			if !r.Indexed() {
				t.Errorf("row %s in state %s (attempts %d, released %t) is listed", k, r.State, r.Attempts, r.Released)
			}
			sameRecord(t, "listed row "+k, r, b.get(t, k))
		}
		used := 0
		for _, rows := range byShard {
			if len(rows) > 0 {
				used++
			}
		}
		if used < 2 {
			t.Errorf("rows spread over %d shards, want several", used)
		}
	})

	// The indexing rules (ledger package doc, Attention index): each
	// transition that leaves a row needing attention lists it, a first
	// claim does not, a final mark removes it.
	t.Run("Indexing", func(t *testing.T) {
		t.Parallel()
		listed := func(t *testing.T, b *bundle, key string) bool {
			t.Helper()
			byKey, _ := b.attentionAll(t, b.clock.Now().Add(48*time.Hour), 0)
			_, ok := byKey[key]
			return ok
		}
		// to brings a fresh first claim into the transition's row.
		for _, tc := range []struct {
			name string
			to   func(t *testing.T, b *bundle, e ledger.Entry, c ledger.Claim) ledger.Claim
		}{
			{"TakeOverAfterStaleLease", func(t *testing.T, b *bundle, e ledger.Entry, c ledger.Claim) ledger.Claim {
				b.clock.Advance(lease)
				return b.takeOver(t, e.Key)
			}},
			{"Release", func(t *testing.T, b *bundle, e ledger.Entry, c ledger.Claim) ledger.Claim {
				b.release(t, c, "provider 503", b.clock.Now().Add(time.Minute))
				return c
			}},
			{"ReleaseThenTakeOver", func(t *testing.T, b *bundle, e ledger.Entry, c ledger.Claim) ledger.Claim {
				b.release(t, c, "provider 503", time.Time{})
				return b.takeOver(t, e.Key)
			}},
			{"Uncertain", func(t *testing.T, b *bundle, e ledger.Entry, c ledger.Claim) ledger.Claim {
				b.mark(t, c, ledger.Outcome{State: ledger.StateUncertain, Reason: "timeout"})
				return b.takeOver(t, e.Key)
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				for _, st := range []ledger.State{ledger.StateSent, ledger.StateFailed} {
					t.Run(string(st), func(t *testing.T) {
						b := setup(t)
						e, c := b.claim(t)
						if listed(t, b, e.Key) {
							t.Fatalf("a first claim is listed")
						}
						if r := b.get(t, e.Key); r.Indexed() {
							t.Errorf("a first claim: Indexed() = true")
						}
						c = tc.to(t, b, e, c)
						if !listed(t, b, e.Key) {
							t.Fatalf("%s: row is not listed", tc.name)
						}
						if r := b.get(t, e.Key); !r.Indexed() {
							t.Errorf("%s: Indexed() = false", tc.name)
						}
						if tc.name == "Release" {
							// A released claim is taken over before anything
							// is marked.
							c = b.takeOver(t, e.Key)
						}
						b.mark(t, c, ledger.Outcome{State: st, ProviderMessageID: "msg", Reason: "r"})
						if listed(t, b, e.Key) {
							t.Errorf("%s then %s: row is still listed", tc.name, st)
						}
						if r := b.get(t, e.Key); r.Indexed() {
							t.Errorf("%s then %s: Indexed() = true", tc.name, st)
						}
					})
				}
			})
		}
		t.Run("FirstClaimMarkedFinal", func(t *testing.T) {
			b := setup(t)
			e, c := b.claim(t)
			b.mark(t, c, ledger.Outcome{State: ledger.StateSent, ProviderMessageID: "msg"})
			if listed(t, b, e.Key) {
				t.Errorf("a sent first claim is listed")
			}
		})
		t.Run("FirstClaimMarkedUncertain", func(t *testing.T) {
			b := setup(t)
			e, c := b.claim(t)
			b.mark(t, c, ledger.Outcome{State: ledger.StateUncertain, Reason: "timeout"})
			if !listed(t, b, e.Key) {
				t.Errorf("an uncertain row is not listed")
			}
		})
	})

	t.Run("LeavesOnFinalMark", func(t *testing.T) {
		b := setup(t)
		e, c := b.claim(t)
		b.mark(t, c, ledger.Outcome{State: ledger.StateUncertain, Reason: "timeout"})
		if byKey, _ := b.attentionAll(t, b.clock.Now().Add(time.Hour), 0); len(byKey) != 1 {
			t.Fatalf("attention lists %d rows, want 1 uncertain", len(byKey))
		}
		cur := b.get(t, e.Key)
		c2, err := b.l.TakeOver(b.ctx, cur, "", lease)
		if err != nil {
			t.Fatalf("TakeOver: %v", err)
		}
		b.mark(t, c2, ledger.Outcome{State: ledger.StateSent, ProviderMessageID: "msg"})
		if byKey, _ := b.attentionAll(t, b.clock.Now().Add(time.Hour), 0); len(byKey) != 0 {
			t.Fatalf("attention lists %d rows after SENT, want none", len(byKey))
		}
	})

	t.Run("DueBefore", func(t *testing.T) {
		b := setup(t)
		// A taken-over PENDING row, due t0+lease (a first claim is not
		// listed at all).
		pending, _ := b.claim(t)
		b.clock.Advance(lease)
		b.takeOver(t, pending.Key)
		t0 := b.clock.Now()
		b.clock.Advance(10 * time.Second)
		uncertain, c := b.claim(t) // due t0+10s
		b.mark(t, c, ledger.Outcome{State: ledger.StateUncertain, Reason: "timeout"})
		b.clock.Advance(10 * time.Second)
		released, c := b.claim(t) // due t0+20s
		b.release(t, c, "provider 503", time.Time{})
		for _, tc := range []struct {
			name      string
			dueBefore time.Time
			want      []string
		}{
			{"NoneDue", t0.Add(5 * time.Second), nil},
			{"ExactlyDueIsExcluded", t0.Add(10 * time.Second), nil},
			{"Uncertain", t0.Add(15 * time.Second), []string{uncertain.Key}},
			{"UncertainAndReleased", t0.Add(25 * time.Second), []string{uncertain.Key, released.Key}},
			{"All", t0.Add(lease + time.Second), []string{uncertain.Key, released.Key, pending.Key}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				byKey, _ := b.attentionAll(t, tc.dueBefore, 0)
				if len(byKey) != len(tc.want) {
					t.Errorf("listed %d rows, want %d", len(byKey), len(tc.want))
				}
				for _, k := range tc.want {
					if _, ok := byKey[k]; !ok {
						t.Errorf("row %s not listed", k)
					}
				}
			})
		}
		// DueFrom: only the rows due at or after it (the rows that
		// became due lately, behind an older backlog).
		for _, tc := range []struct {
			name    string
			dueFrom time.Time
			want    []string
		}{
			{"FromExactlyDueIsIncluded", t0.Add(10 * time.Second), []string{uncertain.Key, released.Key, pending.Key}},
			{"FromAfterTheUncertain", t0.Add(15 * time.Second), []string{released.Key, pending.Key}},
			{"FromAfterEvery", t0.Add(lease + 2*time.Second), nil},
		} {
			t.Run(tc.name, func(t *testing.T) {
				got := map[string]bool{}
				for s := range ledger.AttentionShards {
					q := ledger.AttentionQuery{Shard: s, DueBefore: t0.Add(lease + time.Second), DueFrom: tc.dueFrom, Limit: 1000}
					for {
						p, err := b.l.Attention(b.ctx, q)
						if err != nil {
							t.Fatalf("Attention(shard %d, from %v): %v", s, tc.dueFrom, err)
						}
						for _, r := range p.Records {
							got[r.Key] = true
						}
						if q.Cursor = p.Cursor; q.Cursor == "" {
							break
						}
					}
				}
				if len(got) != len(tc.want) {
					t.Errorf("listed %d rows, want %d", len(got), len(tc.want))
				}
				for _, k := range tc.want {
					if !got[k] {
						t.Errorf("row %s not listed", k)
					}
				}
			})
		}
	})

	t.Run("Paging", func(t *testing.T) {
		b := setup(t)
		populate(t, b, 60)
		dueBefore := b.clock.Now().Add(24 * time.Hour)
		_, whole := b.attentionAll(t, dueBefore, 0)
		maxPages := 0
		for _, limit := range []int{1, 2, 3} {
			for s := range ledger.AttentionShards {
				rows, pages := b.attention(t, s, dueBefore, limit)
				maxPages = max(maxPages, pages)
				if len(rows) != len(whole[s]) {
					t.Errorf("limit %d shard %d: %d rows, want %d", limit, s, len(rows), len(whole[s]))
					continue
				}
				for i := range rows {
					if rows[i].Key != whole[s][i].Key {
						t.Errorf("limit %d shard %d row %d: key %s, want %s", limit, s, i, rows[i].Key, whole[s][i].Key)
					}
				}
			}
		}
		if maxPages < 2 {
			t.Errorf("no shard needed a second page; the test does not exercise paging")
		}
	})

	// Rows past their expiry at the head of a shard may fill whole pages
	// (DynamoDB filters them after the limit): only an empty cursor ends
	// the shard, and a live row behind them is still listed.
	t.Run("ExpiredRowsAtTheHeadOfAShard", func(t *testing.T) {
		b := setup(t)
		const shard, expiredRows, limit = 3, 30, 25
		var old []string
		for i := 0; len(old) < expiredRows; i++ {
			k := Key(fmt.Sprintf("%s/head-%d", t.Name(), i))
			if ledger.Shard(k) != shard {
				continue
			}
			c, err := b.l.Claim(b.ctx, NewEntry(k), lease)
			if err != nil {
				t.Fatalf("Claim: %v", err)
			}
			b.mark(t, c, ledger.Outcome{State: ledger.StateUncertain, Reason: "timeout"})
			old = append(old, k)
		}
		oldRow := b.get(t, old[0])
		// The live row is claimed later and due later than every expired one.
		b.clock.Set(oldRow.ExpiresAt.Add(-time.Hour))
		var live string
		for i := 0; live == ""; i++ {
			if k := Key(fmt.Sprintf("%s/live-%d", t.Name(), i)); ledger.Shard(k) == shard {
				live = k
			}
		}
		c, err := b.l.Claim(b.ctx, NewEntry(live), lease)
		if err != nil {
			t.Fatalf("Claim: %v", err)
		}
		b.mark(t, c, ledger.Outcome{State: ledger.StateUncertain, Reason: "timeout"})
		b.expire(t, oldRow)
		rows, pages := b.attention(t, shard, b.clock.Now().Add(time.Hour), limit)
		if len(rows) != 1 || rows[0].Key != live {
			keys := make([]string, len(rows))
			for i, r := range rows {
				keys[i] = r.Key
			}
			t.Fatalf("attention over %d pages lists %v, want only the live row %s behind %d expired ones", pages, keys, live, expiredRows)
		}
		if pages < 2 {
			t.Errorf("attention took %d page for %d expired rows and a live one at limit %d, want at least 2: the limit applies before the expiry filter, as DynamoDB's does", pages, expiredRows, limit)
		}
	})

	t.Run("SkipsExpiredRows", func(t *testing.T) {
		b := setup(t)
		old, oc := b.claim(t)
		b.mark(t, oc, ledger.Outcome{State: ledger.StateUncertain, Reason: "timeout"})
		oldRow := b.get(t, old.Key)
		b.clock.Advance(100 * time.Hour)
		young, c := b.claim(t)
		b.mark(t, c, ledger.Outcome{State: ledger.StateUncertain, Reason: "timeout"})
		b.expire(t, oldRow)
		byKey, _ := b.attentionAll(t, b.clock.Now().Add(time.Hour), 0)
		if _, ok := byKey[old.Key]; ok {
			t.Errorf("expired row %s is listed", old.Key)
		}
		if _, ok := byKey[young.Key]; !ok {
			t.Errorf("live row %s is not listed", young.Key)
		}
	})

	t.Run("InvalidQuery", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			name string
			q    ledger.AttentionQuery
		}{
			{"NegativeShard", ledger.AttentionQuery{Shard: -1, DueBefore: testsupport.Start}},
			{"ShardTooHigh", ledger.AttentionQuery{Shard: ledger.AttentionShards, DueBefore: testsupport.Start}},
			{"NegativeLimit", ledger.AttentionQuery{Shard: 0, DueBefore: testsupport.Start, Limit: -1}},
			{"BadCursor", ledger.AttentionQuery{Shard: 0, DueBefore: testsupport.Start, Cursor: "not a cursor!"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				b := setup(t)
				if _, err := b.l.Attention(b.ctx, tc.q); err == nil {
					t.Fatalf("Attention(%+v): err = nil, want an input error", tc.q)
				}
			})
		}
	})
}

func runApplyDelivery(t *testing.T, setup setupFunc) {
	apply := func(t *testing.T, b *bundle, key string, d ledger.Delivery) bool {
		t.Helper()
		applied, err := b.l.ApplyDelivery(b.ctx, key, d)
		if err != nil {
			t.Fatalf("ApplyDelivery(%s, %s): %v", key, d.Status, err)
		}
		return applied
	}

	t.Run("RankOrder", func(t *testing.T) {
		b := setup(t)
		e, c := b.claim(t)
		b.mark(t, c, ledger.Outcome{State: ledger.StateSent, ProviderMessageID: "msg_1"})
		steps := []struct {
			d           ledger.Delivery
			wantApplied bool
			wantStatus  string
		}{
			{ledger.Delivery{Status: "sent", Rank: 1}, true, "sent"},
			{ledger.Delivery{Status: "delivered", Rank: 3}, true, "delivered"},
			{ledger.Delivery{Status: "undelivered", Rank: 2}, false, "delivered"},
			{ledger.Delivery{Status: "delivered", Rank: 3}, false, "delivered"},
			{ledger.Delivery{Status: "sent", Rank: 1}, false, "delivered"},
		}
		var at time.Time
		for i, s := range steps {
			now := b.clock.Advance(time.Second)
			s.d.At = now.Add(-500 * time.Millisecond)
			before := b.get(t, e.Key)
			if got := apply(t, b, e.Key, s.d); got != s.wantApplied {
				t.Errorf("step %d (%s rank %d): applied = %v, want %v", i, s.d.Status, s.d.Rank, got, s.wantApplied)
			}
			got := b.get(t, e.Key)
			if s.wantApplied {
				at = s.d.At
				want := before
				want.DeliveryStatus, want.DeliveryRank, want.DeliveryAt = s.d.Status, s.d.Rank, s.d.At
				want.ExpiresAt = got.ExpiresAt
				sameRecord(t, fmt.Sprintf("step %d row", i), got, want)
			} else {
				sameRecord(t, fmt.Sprintf("step %d row", i), got, before)
			}
			if got.DeliveryStatus != s.wantStatus {
				t.Errorf("step %d: DeliveryStatus = %q, want %q", i, got.DeliveryStatus, s.wantStatus)
			}
			sameTime(t, fmt.Sprintf("step %d DeliveryAt", i), got.DeliveryAt, at)
		}
	})

	t.Run("BeforeSent", func(t *testing.T) {
		b := setup(t)
		e, c := b.claim(t)
		at := b.clock.Now()
		if !apply(t, b, e.Key, ledger.Delivery{Status: "delivered", Rank: 3, At: at, ProviderMessageID: "msg_cb"}) {
			t.Fatalf("delivery on a PENDING row was not applied")
		}
		got := b.get(t, e.Key)
		if got.State != ledger.StatePending || got.ProviderMessageID != "msg_cb" || got.DeliveryStatus != "delivered" {
			t.Errorf("row %s/%q/%q, want PENDING/msg_cb/delivered", got.State, got.ProviderMessageID, got.DeliveryStatus)
		}
		b.clock.Advance(time.Second)
		b.mark(t, c, ledger.Outcome{State: ledger.StateSent, ProviderMessageID: "msg_cb"})
		got = b.get(t, e.Key)
		if got.State != ledger.StateSent || got.DeliveryStatus != "delivered" || got.DeliveryRank != 3 {
			t.Errorf("after Mark: row %s/%q/%d, want SENT/delivered/3", got.State, got.DeliveryStatus, got.DeliveryRank)
		}
		sameTime(t, "DeliveryAt", got.DeliveryAt, at)
	})

	t.Run("KeepsProviderMessageID", func(t *testing.T) {
		b := setup(t)
		e, c := b.claim(t)
		b.mark(t, c, ledger.Outcome{State: ledger.StateSent, ProviderMessageID: "msg_mine"})
		apply(t, b, e.Key, ledger.Delivery{Status: "delivered", Rank: 3, At: b.clock.Now(), ProviderMessageID: "msg_other"})
		if got := b.get(t, e.Key); got.ProviderMessageID != "msg_mine" || got.DeliveryStatus != "delivered" {
			t.Errorf("row %q/%q, want msg_mine/delivered", got.ProviderMessageID, got.DeliveryStatus)
		}
	})

	t.Run("NotFound/Absent", func(t *testing.T) {
		onAbsent(t, setup, "ApplyDelivery", ledger.ErrNotFound, func(b *bundle, key string) error {
			_, err := b.l.ApplyDelivery(b.ctx, key, ledger.Delivery{Status: "delivered", Rank: 3, At: b.clock.Now()})
			return err
		})
	})

	t.Run("NotFound/Expired", func(t *testing.T) {
		onExpired(t, setup, "ApplyDelivery", ledger.ErrNotFound, ledger.Outcome{State: ledger.StateSent, ProviderMessageID: "msg_1"}, func(b *bundle, c ledger.Claim, _ ledger.Record) error {
			_, err := b.l.ApplyDelivery(b.ctx, c.Key, ledger.Delivery{Status: "delivered", Rank: 3, At: b.clock.Now()})
			return err
		})
	})

	t.Run("InvalidDelivery", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			name string
			d    ledger.Delivery
		}{
			{"ZeroRank", ledger.Delivery{Status: "sent", Rank: 0, At: testsupport.Start}},
			{"NegativeRank", ledger.Delivery{Status: "sent", Rank: -2, At: testsupport.Start}},
			{"EmptyStatus", ledger.Delivery{Status: "", Rank: 1, At: testsupport.Start}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				b := setup(t)
				e, _ := b.claim(t)
				before := b.get(t, e.Key)
				_, err := b.l.ApplyDelivery(b.ctx, e.Key, tc.d)
				if err == nil || errors.Is(err, ledger.ErrNotFound) {
					t.Fatalf("ApplyDelivery: err = %v, want an input error", err)
				}
				sameRecord(t, "row", b.get(t, e.Key), before)
			})
		}
	})
}

// runOwnerIndex: a ledger that implements ledger.OwnerIndex returns the
// owner of each recorded id of a provider, in one call for many ids, and
// nothing for ids it does not hold or another provider's.
func runOwnerIndex(t *testing.T, setup setupFunc) {
	t.Run("Owners", func(t *testing.T) {
		b := setup(t)
		oi, ok := b.l.(ledger.OwnerIndex)
		if !ok {
			t.Skip("the ledger has no owner index")
		}
		for i := range 120 {
			if err := oi.RecordOwner(b.ctx, "twilio", fmt.Sprintf("SM%03d", i), Key(fmt.Sprint("evt-", i%3))); err != nil {
				t.Fatal(err)
			}
		}
		if err := oi.RecordOwner(b.ctx, "other", "SM999", Key("evt-x")); err != nil {
			t.Fatal(err)
		}
		ids := []string{"SM999", "SM404"}
		for i := range 120 {
			ids = append(ids, fmt.Sprintf("SM%03d", i))
		}
		got, err := oi.Owners(b.ctx, "twilio", ids)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 120 {
			t.Fatalf("Owners found %d ids, want the 120 recorded for twilio (not another provider's, not an unknown one)", len(got))
		}
		for i := range 120 {
			if id, want := fmt.Sprintf("SM%03d", i), Key(fmt.Sprint("evt-", i%3)); got[id] != want {
				t.Errorf("owner of %s = %q, want %q", id, got[id], want)
			}
		}
	})
}
