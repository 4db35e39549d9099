package dispatch_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/decide"
	"github.com/sendonce/sendonce/internal/dispatch"
	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/ledger/memledger"
	"github.com/sendonce/sendonce/internal/pace"
	"github.com/sendonce/sendonce/internal/testsupport"
	"github.com/sendonce/sendonce/provider"
	"github.com/sendonce/sendonce/provider/providertest"
)

// writes counts a ledger's writes (each a conditional write).
type writes struct {
	ledger.Ledger
	n atomic.Int64
}

func (w *writes) Claim(ctx context.Context, e ledger.Entry, lease time.Duration) (ledger.Claim, error) {
	w.n.Add(1)
	return w.Ledger.Claim(ctx, e, lease)
}

func (w *writes) TakeOver(ctx context.Context, cur ledger.Record, p string, lease time.Duration) (ledger.Claim, error) {
	w.n.Add(1)
	return w.Ledger.TakeOver(ctx, cur, p, lease)
}

func (w *writes) Mark(ctx context.Context, c ledger.Claim, o ledger.Outcome) error {
	w.n.Add(1)
	return w.Ledger.Mark(ctx, c, o)
}

func (w *writes) Release(ctx context.Context, c ledger.Claim, reason string, retryAt time.Time) error {
	w.n.Add(1)
	return w.Ledger.Release(ctx, c, reason, retryAt)
}

// outage is a dispatcher over a counting in-memory ledger whose channel
// sms is served by p.
type outage struct {
	clock *testsupport.Clock
	led   *writes
	d     *dispatch.Dispatcher
}

func newOutage(t *testing.T, clock *testsupport.Clock, p provider.Adapter) *outage {
	t.Helper()
	led := &writes{Ledger: memledger.New(memledger.Config{Now: clock.Now})}
	d, err := dispatch.New(dispatch.Dispatcher{Ledger: led, Providers: map[string]provider.Adapter{"sms": p},
		Health:          &dispatch.Health{Cooldown: 5 * time.Minute, Now: clock.Now},
		ProviderTimeout: 5 * time.Second, ClaimTimeout: time.Minute, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	return &outage{clock: clock, led: led, d: d}
}

func (o *outage) get(t *testing.T, key string) ledger.Record {
	t.Helper()
	r, err := o.led.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// decide is the reconciler's decision about key's row (dispatch.Decide).
func (o *outage) decide(t *testing.T, key string) (decide.Decision, ledger.Record, []provider.Adapter) {
	t.Helper()
	rec := o.get(t, key)
	picked := o.d.Pick(rec, o.d.Route(rec.Channel))
	dec, _, rec, err := o.d.Decide(context.Background(), decide.Input{Caller: decide.Reconciler, Row: rec, Now: o.d.Now(), Settle: time.Minute}, picked)
	if err != nil {
		t.Fatal(err)
	}
	return dec, rec, picked
}

func entry(key string) ledger.Entry {
	return ledger.Entry{Key: key, Tenant: "acme", Channel: "sms", Class: "transactional", Address: "+15551234567", Body: "hello " + key}
}

// TestProviderDownLeavesRowsUntouched: once the provider refused
// Threshold sends in a row, a released row due for a send is left as it
// is (a Wait with CauseProviderDown, no ledger write; it stays due in the
// attention index), and a release while it is down does not grow the
// row's backoff (decide.RetryDelay). A new message is still claimed. After
// the cool-down the row is taken over and sent, once.
func TestProviderDownLeavesRowsUntouched(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := testsupport.NewClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	down := true
	p := &providertest.Fake{SendFunc: func(context.Context, provider.Message) (provider.Receipt, error) {
		if down {
			return provider.Receipt{}, providertest.Error(provider.Transient, "503")
		}
		return provider.Receipt{MessageID: "m1"}, nil
	}}
	o := newOutage(t, clock, p)
	// Row a: its first attempt and two takeovers, each refused; the third
	// refusal makes the provider known down.
	c, err := o.d.Claim(ctx, entry("a"), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if r := o.d.Send(ctx, c, entry("a"), p); !r.Released {
		t.Fatalf("a refused first attempt: %+v, want released", r)
	}
	for range dispatch.DefaultHealthThreshold - 1 {
		if o.d.Health.Down(p.Name()) {
			t.Fatal("the provider is known down before the threshold")
		}
		clock.Set(ledger.Due(o.get(t, "a"))) // backed off: due then
		dec, rec, picked := o.decide(t, "a")
		if dec.Action != decide.Send {
			t.Fatalf("a released row, provider up: %s (%s), want send", dec.Action, dec.Reason)
		}
		if r := o.d.Resolve(ctx, rec, dec, picked, provider.LookupResult{}, time.Minute); !r.Released {
			t.Fatalf("a refused takeover: %+v, want released", r)
		}
	}
	if !o.d.Health.Down(p.Name()) {
		t.Fatalf("the provider refused %d sends in a row and is not known down", dispatch.DefaultHealthThreshold)
	}
	row := o.get(t, "a")
	if want := clock.Now().Add(decide.RetryBase); !row.RetryAt.Equal(want) || row.Attempts != 3 {
		t.Errorf("row released while the provider is down: attempt %d due %s, want attempt 3 due after the base %s (not backing off further)",
			row.Attempts, row.RetryAt, want)
	}
	// Due again, the provider still down (its cool-down here is 5
	// minutes): left as it is.
	clock.Advance(decide.RetryBase)
	before, writes, calls := o.get(t, "a"), o.led.n.Load(), p.Calls()
	if !o.d.Health.Down(p.Name()) {
		t.Fatal("the provider is not known down within its cool-down")
	}
	if ledger.Due(before).After(clock.Now()) {
		t.Fatalf("row a is not due (due %s, now %s)", ledger.Due(before), clock.Now())
	}
	dec, _, _ := o.decide(t, "a")
	if dec.Action != decide.Wait || dec.Cause != decide.CauseProviderDown {
		t.Fatalf("a due released row, provider known down: %s/%s (%s), want wait/provider_down", dec.Action, dec.Cause, dec.Reason)
	}
	if after := o.get(t, "a"); o.led.n.Load() != writes || p.Calls() != calls || after.ClaimID != before.ClaimID || after.Attempts != before.Attempts {
		t.Fatalf("the wait wrote %d times and called the provider %d times (claim %s → %s)", o.led.n.Load()-writes, p.Calls()-calls, before.ClaimID, after.ClaimID)
	}
	if after := o.get(t, "a"); !after.Indexed() || ledger.Due(after).After(clock.Now()) {
		t.Fatal("the row left as it is is not due in the attention index")
	}
	// A new message is still claimed (and its send probes the provider).
	c2, err := o.d.Claim(ctx, entry("b"), time.Minute)
	if err != nil {
		t.Fatalf("a new message while the provider is down: %v, want it claimed", err)
	}
	// Recovery: after the cool-down the row is taken over and sent once.
	down = false
	clock.Advance(5 * time.Minute)
	dec, rec, picked := o.decide(t, "a")
	if dec.Action != decide.Send {
		t.Fatalf("after recovery: %s (%s), want send", dec.Action, dec.Reason)
	}
	if r := o.d.Resolve(ctx, rec, dec, picked, provider.LookupResult{}, time.Minute); r.Disposition != dispatch.Sent {
		t.Fatalf("after recovery: %+v, want sent", r)
	}
	if r := o.d.Send(ctx, c2, entry("b"), p); r.Disposition != dispatch.Sent {
		t.Fatalf("the new message after recovery: %+v, want sent", r)
	}
	if got := o.get(t, "a"); got.State != ledger.StateSent {
		t.Errorf("row a is %s, want SENT", got.State)
	}
}

// TestPacedRowIsLeftUntouched: a released row due for a send when the
// provider's rate is spent is left as it is (a Wait with CausePaced, no
// ledger write, no provider call); the next second its token is taken
// before the takeover, and the send spends that token, not another.
func TestPacedRowIsLeftUntouched(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := testsupport.NewClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	store := &pace.MemStore{}
	l, err := pace.New(store, map[string]int{"fake": 1}, pace.Options{Now: clock.Now, Block: 1})
	if err != nil {
		t.Fatal(err)
	}
	f := &providertest.Fake{}
	p := pace.Wrap(f, l, 0)
	o := newOutage(t, clock, p)
	c, err := o.d.Claim(ctx, entry("a"), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.d.Release(ctx, c, "transient: 503", time.Time{}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	// The second's one token goes to another message.
	if _, err := p.Send(ctx, provider.Message{Key: "other"}); err != nil {
		t.Fatal(err)
	}
	before, writes := o.get(t, "a"), o.led.n.Load()
	dec, _, _ := o.decide(t, "a")
	if dec.Action != decide.Wait || dec.Cause != decide.CausePaced {
		t.Fatalf("a due released row, the rate spent: %s/%s (%s), want wait/paced", dec.Action, dec.Cause, dec.Reason)
	}
	if after := o.get(t, "a"); o.led.n.Load() != writes || f.Calls() != 1 || after.ClaimID != before.ClaimID {
		t.Fatalf("the paced wait wrote %d times, %d provider calls (want 0 writes, 1 call: the other message's)", o.led.n.Load()-writes, f.Calls())
	}
	if o.d.Health.Down(p.Name()) {
		t.Error("a paced wait made the provider known down")
	}
	clock.Advance(time.Second)
	dec, rec, picked := o.decide(t, "a")
	if dec.Action != decide.Send {
		t.Fatalf("the next second: %s (%s), want send", dec.Action, dec.Reason)
	}
	takes := store.Writes()
	if r := o.d.Resolve(ctx, rec, dec, picked, provider.LookupResult{}, time.Minute); r.Disposition != dispatch.Sent {
		t.Fatalf("the next second: %+v, want sent (the send spends the token Decide took)", r)
	}
	if store.Writes() != takes {
		t.Errorf("the send took another token (%d store takes), want it to spend the one Decide took", store.Writes()-takes)
	}
	if f.Calls() != 2 {
		t.Errorf("%d provider calls, want 2", f.Calls())
	}
}

// TestHealthDown: a provider is known down after Threshold refusals in a
// row (transient or configuration), for its cool-down; an ambiguous
// outcome neither counts nor clears (a provider answering a share of its
// calls with a timeout is not down), and an answer clears it.
func TestHealthDown(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	h := &dispatch.Health{Now: func() time.Time { return now }}
	refuse, timeout := providertest.Error(provider.Transient, "503"), providertest.Error(provider.Ambiguous, "timeout")
	h.Observe("a", refuse)
	h.Observe("a", timeout)
	h.Observe("a", refuse)
	if h.Down("a") {
		t.Fatal("down after two refusals")
	}
	h.Observe("a", refuse)
	if !h.Down("a") {
		t.Fatal("not down after three refusals in a row (a timeout between them)")
	}
	for range 5 {
		h.Observe("b", timeout)
	}
	if h.Down("b") {
		t.Error("timeouts alone made a provider known down")
	}
	now = now.Add(dispatch.DefaultHealthCooldown)
	if h.Down("a") {
		t.Error("still down after the cool-down")
	}
	h.Observe("a", refuse) // the probe is refused: down again at once
	if !h.Down("a") {
		t.Error("a refused probe did not make it down again")
	}
	h.Observe("a", nil)
	if h.Down("a") {
		t.Error("an accepted send did not clear it")
	}
	var none *dispatch.Health
	none.Observe("a", refuse)
	if none.Down("a") {
		t.Error("a nil Health knows a provider down")
	}
}
