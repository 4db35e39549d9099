package reconcile

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/opstate"
	"github.com/sendonce/sendonce/internal/pace"
	"github.com/sendonce/sendonce/provider/providertest"
)

// TestBacklogFirstAfterAnOutage: the provider answered again at U, and
// its lane holds the outage's backlog (a transactional message, a login
// code and a marketing message, each enqueued before U) and messages
// enqueued since (a login code 9 minutes from its deadline, a marketing
// message, and a message due within a minute). The hand-out gives the
// urgent message first, then the backlog earliest deadline first, then
// the new messages: the new login code after the backlog's transactional
// message, though its deadline is nearer (before, earliest deadline first
// put it ahead, and new traffic delayed the backlog's drain). The unit's
// hold carries U, so that new sends yield to it, and its cut is the
// latest order handed out. An UNCERTAIN row that is not urgent goes after
// every row to send (its worker looks it up, which spends none of the
// provider's rate; before, at 15,000/s in make sim-outage, such rows
// took the workers' time ahead of the backlog's last rows).
func TestBacklogFirstAfterAnOutage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	p := &providertest.Fake{}
	limiter, err := pace.New(&pace.MemStore{}, map[string]int{p.Name(): 10}, pace.Options{Now: b.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	status := &opstate.Memory{}
	r := b.reconciler(t, pace.Wrap(p, limiter, 0), func(c *Config) { c.Status = status })
	t0 := b.clock.Now()
	claim := func(key, class string, at time.Time, validUntil time.Time) ledger.Claim {
		t.Helper()
		b.clock.Set(at)
		c, err := b.ledger.Claim(ctx, ledger.Entry{Key: key, Channel: "sms", Class: class, Provider: p.Name(), Address: "+15551234567", Body: "b", ValidUntil: validUntil}, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	release := func(key, class string, at time.Time, validUntil time.Time) {
		t.Helper()
		if err := b.ledger.Release(ctx, claim(key, class, at, validUntil), "paced", time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	up := t0.Add(55 * time.Minute)
	release("v1_backlog_marketing", "marketing", t0, time.Time{})
	release("v1_backlog_transactional", "transactional", t0.Add(10*time.Minute), t0.Add(70*time.Minute))
	release("v1_backlog_otp", "otp", t0.Add(52*time.Minute), t0.Add(62*time.Minute))
	release("v1_new_otp", "otp", t0.Add(56*time.Minute), t0.Add(66*time.Minute))
	release("v1_new_marketing", "marketing", t0.Add(56*time.Minute), time.Time{})
	release("v1_new_urgent", "otp", t0.Add(56*time.Minute), t0.Add(58*time.Minute))
	// An attempt of the recovery that timed out: its worker looks it up
	// first, which takes no send of the provider's rate.
	if err := b.ledger.Mark(ctx, claim("v1_backlog_uncertain", "otp", t0.Add(54*time.Minute), t0.Add(64*time.Minute)), ledger.Outcome{State: ledger.StateUncertain, Reason: "timeout"}); err != nil {
		t.Fatal(err)
	}
	if err := status.ProviderState(ctx, p.Name(), opstate.Down, up); err != nil {
		t.Fatal(err)
	}
	if err := status.ProviderState(ctx, p.Name(), opstate.Up, up); err != nil {
		t.Fatal(err)
	}
	b.clock.Set(t0.Add(57 * time.Minute))
	q := &units{}
	if _, err := r.Find(ctx, q); err != nil {
		t.Fatal(err)
	}
	var got []string
	var hold *pace.Hold
	for _, u := range q.q {
		got = append(got, u.Keys...)
		hold = firstHold(hold, u.Hold)
	}
	want := []string{"v1_new_urgent", "v1_backlog_marketing", "v1_backlog_otp", "v1_backlog_transactional", "v1_new_otp", "v1_new_marketing", "v1_backlog_uncertain"}
	if !slices.Equal(got, want) {
		t.Errorf("hand-out order\n got %v\nwant %v", got, want)
	}
	if hold == nil {
		t.Fatal("the paced lane's units carry no hold")
	}
	if !hold.Backlog.Equal(up) {
		t.Errorf("the hold's Backlog = %s, want the recovery %s", hold.Backlog, up)
	}
	if want := (pace.Order{Since: t0.Add(56 * time.Minute)}); hold.Cut.Rank() != want.Rank() {
		t.Errorf("the hold's cut ranks at %s, want the latest handed out, %s (the new marketing message)", hold.Cut.Rank(), want.Rank())
	}
	// The backlog sent, only newer rows are left: the hold no longer
	// carries the recovery, and new messages yield by its cut alone
	// (before, every later hold made each new message yield, for good).
	for _, key := range []string{"v1_backlog_marketing", "v1_backlog_otp", "v1_backlog_transactional"} {
		c, err := b.ledger.TakeOver(ctx, b.state(t, key), p.Name(), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.ledger.Mark(ctx, c, ledger.Outcome{State: ledger.StateSent, ProviderMessageID: "m"}); err != nil {
			t.Fatal(err)
		}
	}
	q.q = nil
	b.clock.Advance(time.Minute)
	if _, err := r.Find(ctx, q); err != nil || len(q.q) == 0 {
		t.Fatalf("Find after the backlog: %v, %d units", err, len(q.q))
	}
	if h := q.q[0].Hold; h == nil || !h.Backlog.IsZero() {
		t.Errorf("the hold once the backlog is sent: %+v, want one without Backlog", h)
	}
}

// firstHold returns the first non-nil hold.
func firstHold(a, b *pace.Hold) *pace.Hold {
	if a != nil {
		return a
	}
	return b
}
