package reconcile

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/decide"
	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/metrics"
	"github.com/sendonce/sendonce/provider"
	"github.com/sendonce/sendonce/provider/providertest"
)

// uncertainUntil leaves a row UNCERTAIN whose message is valid until
// validUntil, as a sender whose provider call timed out does.
func (b *bundle) uncertainUntil(t *testing.T, key, class string, validUntil time.Time) {
	t.Helper()
	ctx := context.Background()
	c, err := b.ledger.Claim(ctx, ledger.Entry{Key: key, Tenant: "acme", Channel: "sms", Class: class, Provider: "fake",
		Address: "+15551234567", Body: "code 123456", ValidUntil: validUntil}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.ledger.Mark(ctx, c, ledger.Outcome{State: ledger.StateUncertain, Reason: "timeout"}); err != nil {
		t.Fatal(err)
	}
}

// TestExpiredOTPNeverResent: an OTP whose attempt was ambiguous, through a
// provider that can neither look it up nor drop a repeat, is resent by
// its class policy, but only while it is valid. Past its validity the
// reconciler abandons it with the reason "expired" and counts it as
// Expired; the provider is never called.
func TestExpiredOTPNeverResent(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		validFor   time.Duration // from the reconciler's run
		wantState  ledger.State
		wantAction Action
		wantSends  int
	}{
		{"Valid", time.Minute, ledger.StateSent, ActionResent, 1},
		{"Expired", -time.Second, ledger.StateAbandoned, ActionExpired, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			p := &providertest.Fake{}
			run := b.clock.Now().Add(time.Minute)
			b.uncertainUntil(t, "v1_otp", "otp", run.Add(tc.validFor))
			b.clock.Set(run)
			rep, err := b.reconciler(t, p, nil).Run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if rep.Actions[tc.wantAction] != 1 {
				t.Errorf("actions = %v, want one %s", rep.Actions, tc.wantAction)
			}
			r := b.state(t, "v1_otp")
			if r.State != tc.wantState || p.Calls() != tc.wantSends {
				t.Fatalf("row %s (%s) after %d sends, want %s after %d", r.State, r.Reason, p.Calls(), tc.wantState, tc.wantSends)
			}
			expired := tc.wantAction == ActionExpired
			if decide.IsExpired(r.Reason) != expired || (b.metrics.Get(metrics.Expired) == 1) != expired {
				t.Errorf("reason %q, Expired = %d; want expired = %v", r.Reason, b.metrics.Get(metrics.Expired), expired)
			}
			if expired && (b.metrics.Get(metrics.Abandoned) != 0 || b.metrics.Get(metrics.Resent) != 0) {
				t.Errorf("an expired row counted as Abandoned (%d) or Resent (%d)", b.metrics.Get(metrics.Abandoned), b.metrics.Get(metrics.Resent))
			}
			// A later run leaves the final row alone.
			if _, err := b.reconciler(t, p, nil).Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			if p.Calls() != tc.wantSends {
				t.Errorf("a later run sent: %d sends", p.Calls())
			}
		})
	}
}

// TestExpiredAmbiguousAttemptStillLookedUp: an expired message whose
// earlier attempt was ambiguous is never resent, but a provider that can
// be asked still is, so the ledger records what happened: SENT when the
// provider has it, FAILED when it rejected it, FAILED (expired) when it
// settled with no record, and left UNCERTAIN (asked again later) before
// the settle time or while the lookup fails.
func TestExpiredAmbiguousAttemptStillLookedUp(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		result    provider.LookupResult
		lookupErr bool
		wait      time.Duration
		idem      bool
		wantState ledger.State
		expired   bool
	}{
		{"AcceptedBecomesSent", provider.LookupResult{Status: provider.LookupAccepted, MessageID: "msg_9"}, false, 0, false, ledger.StateSent, false},
		{"RejectedBecomesFailed", provider.LookupResult{Status: provider.LookupRejected, Reason: "undeliverable"}, false, 0, false, ledger.StateFailed, false},
		{"NoRecordAfterSettleExpires", provider.LookupResult{Status: provider.LookupNotFound}, false, 3 * time.Minute, false, ledger.StateFailed, true},
		{"NoRecordAfterSettleExpiresEvenIfIdempotent", provider.LookupResult{Status: provider.LookupNotFound}, false, 3 * time.Minute, true, ledger.StateFailed, true},
		{"NoRecordBeforeSettleWaits", provider.LookupResult{Status: provider.LookupNotFound}, false, 30 * time.Second, false, ledger.StateUncertain, false},
		{"LookupFailedWaitsEvenIfIdempotent", provider.LookupResult{}, true, 3 * time.Minute, true, ledger.StateUncertain, false},
		{"UnprovenAbandons", provider.LookupResult{Status: provider.LookupUnproven}, false, 3 * time.Minute, false, ledger.StateAbandoned, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			asked := 0
			p := providertest.Looking{
				Fake: &providertest.Fake{Caps: provider.Capabilities{LookupByReference: true, IdempotentSends: tc.idem}},
				LookupFunc: func(context.Context, provider.Message) (provider.LookupResult, error) {
					asked++
					if tc.lookupErr {
						return provider.LookupResult{}, &provider.Error{Kind: provider.Transient, Reason: "503"}
					}
					return tc.result, nil
				},
			}
			b.uncertainUntil(t, "v1_otp", "otp", b.clock.Now().Add(time.Second))
			b.clock.Advance(tc.wait + 2*time.Second)
			if _, err := b.reconciler(t, p, nil).Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			r := b.state(t, "v1_otp")
			if asked != 1 {
				t.Errorf("the provider was asked %d times, want 1", asked)
			}
			if p.Calls() != 0 {
				t.Errorf("an expired message was sent %d times", p.Calls())
			}
			if r.State != tc.wantState || decide.IsExpired(r.Reason) != tc.expired {
				t.Errorf("row %s (%q), want %s with expired reason = %v", r.State, r.Reason, tc.wantState, tc.expired)
			}
			if got := b.metrics.Get(metrics.Expired); (got == 1) != tc.expired {
				t.Errorf("Expired = %d, want expired = %v", got, tc.expired)
			}
		})
	}
}

// TestExpiredReleasedRowFailsWithoutSending: a released row (nothing was
// sent) past its validity ends FAILED (expired) at once, even if its
// channel has no provider any more.
func TestExpiredReleasedRowFailsWithoutSending(t *testing.T) {
	t.Parallel()
	for _, configured := range []bool{true, false} {
		b := setup(t)
		ctx := context.Background()
		c, err := b.ledger.Claim(ctx, ledger.Entry{Key: "v1_r", Tenant: "acme", Channel: "sms", Class: "otp", Provider: "fake",
			Address: "+15551234567", Body: "code", ValidUntil: b.clock.Now().Add(time.Minute)}, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.ledger.Release(ctx, c, "transient: 503", b.clock.Now().Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(2 * time.Minute)
		p := &providertest.Fake{}
		var adapter provider.Adapter = p
		if !configured {
			adapter = nil
		}
		rep, err := b.reconciler(t, adapter, nil).Run(ctx)
		if err != nil {
			t.Fatal(err)
		}
		r := b.state(t, "v1_r")
		if r.State != ledger.StateFailed || !decide.IsExpired(r.Reason) || p.Calls() != 0 || rep.Actions[ActionExpired] != 1 {
			t.Errorf("configured=%v: row %s (%q), %d sends, actions %v; want FAILED expired, no send", configured, r.State, r.Reason, p.Calls(), rep.Actions)
		}
		if b.metrics.Get(metrics.Expired) != 1 || b.metrics.Get(metrics.ReconciledFailed) != 0 || b.metrics.Get(metrics.Failed) != 0 {
			t.Errorf("configured=%v: metrics %v, want Expired 1 only", configured, b.metrics.Snapshot())
		}
	}
}

// TestExpiredRowsDoNotFillTheRead: 30 released rows whose validity has
// passed, due before 5 valid ones, and a hand-out of 10 rows (MaxRows;
// the provider is not paced). Find hands out the 5 valid rows, and 10
// of the expired ones in units of their own (Unit.Expired). Before, the
// expired rows, oldest due, filled the lane's 10 and the valid rows
// were not handed out at all: after an outage, when the expired rows of
// the outage sat at the head of the attention index, Find's read held
// few rows that could still be sent.
func TestExpiredRowsDoNotFillTheRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	r := b.reconciler(t, &providertest.Fake{}, func(c *Config) { c.MaxRows = 10 })
	release := func(key string, validUntil time.Time) {
		c, err := b.ledger.Claim(ctx, ledger.Entry{Key: key, Channel: "sms", Class: "otp", Provider: "fake", Address: "+15551234567", Body: "b", ValidUntil: validUntil}, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.ledger.Release(ctx, c, "transient: 503", time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 30 {
		release(fmt.Sprintf("v1_expired_%02d", i), b.clock.Now().Add(time.Minute))
	}
	b.clock.Advance(time.Second)
	for i := range 5 {
		release(fmt.Sprintf("v1_valid_%d", i), b.clock.Now().Add(time.Hour))
	}
	b.clock.Advance(2 * time.Minute)
	q := &units{}
	if _, err := r.Find(ctx, q); err != nil {
		t.Fatal(err)
	}
	var valid, expired int
	for _, u := range q.q {
		for _, k := range u.Keys {
			switch {
			case strings.HasPrefix(k, "v1_valid") && !u.Expired:
				valid++
			case strings.HasPrefix(k, "v1_expired") && u.Expired:
				expired++
			default:
				t.Errorf("row %s in a unit whose Expired is %t", k, u.Expired)
			}
		}
	}
	if valid != 5 || expired != 10 {
		t.Errorf("handed out %d valid rows and %d expired ones, want the 5 valid and 10 expired (MaxRows) in units of their own", valid, expired)
	}
}
