package reconcile

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/dispatch"
	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/opstate"
	"github.com/sendonce/sendonce/internal/testsupport"
	"github.com/sendonce/sendonce/provider"
	"github.com/sendonce/sendonce/provider/providertest"
)

// TestRecoveryHandsOutAtOnce: a provider is down; the reconcile
// worker's sends are refused until its container knows it down (the
// "down" state recorded), and the unit's other rows are deferred. The
// provider comes back, and a sender's send through it succeeds: it
// records "up". The scheduled run's watch (Recovery, Watch) then hands
// the rows out at once, each unit carrying when the provider came back
// (Unit.ProviderUp), and the worker, whose container still knows the
// provider down (its cool-down runs 10 minutes), sends them: each row
// sent once. Before, the rows waited for the next scheduled run and for
// the worker's cool-down.
func TestRecoveryHandsOutAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	down := true
	p := downWhile(&down)
	status := &opstate.Memory{}
	workerHealth := &dispatch.Health{Cooldown: 10 * time.Minute, Now: b.clock.Now}
	r := b.reconciler(t, p, func(c *Config) {
		c.Dispatcher.Health, c.Dispatcher.Status, c.Status = workerHealth, status, status
		c.Concurrency = 1
	})
	var keys []string
	for i := range 6 {
		key := fmt.Sprintf("v1_recover_%d", i)
		c, err := b.ledger.Claim(ctx, ledger.Entry{Key: key, Channel: "sms", Class: "transactional", Provider: p.Name(), Address: "+15551234567", Body: "b"}, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.ledger.Release(ctx, c, "transient: 503", time.Time{}); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, key)
	}
	b.clock.Advance(time.Second)
	q := &units{}
	if _, err := r.Find(ctx, q); err != nil || len(q.q) != 1 {
		t.Fatalf("Find: %v, %d units; want 1", err, len(q.q))
	}
	rep, _ := r.Work(ctx, q.q[0])
	q.q = nil
	if rep.Actions[ActionProviderDown]+rep.Actions[ActionDeferred] == 0 || !workerHealth.Down(p.Name()) {
		t.Fatalf("Work while the provider is down: %+v; want the worker to learn it down and defer the rest", rep)
	}
	if watch, recovered, err := r.Recovery(ctx, b.clock.Now()); err != nil || !watch || recovered {
		t.Fatalf("Recovery while down: watch %t, recovered %t, %v; want a watch, no recovery", watch, recovered, err)
	}
	// A later scheduled run's Find (the refused rows' backoff has
	// passed), then its watch: the provider comes back and a sender's
	// send succeeds.
	b.clock.Advance(3 * time.Minute)
	since := b.clock.Now()
	frep, err := r.Find(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	q.q = nil // deferred by the workers: the provider is still down
	down = false
	refused := len(p.Sent()) // the calls the provider refused
	b.clock.Advance(2 * time.Second)
	senderHealth := &dispatch.Health{Now: b.clock.Now}
	for range dispatch.DefaultHealthThreshold {
		senderHealth.Observe(p.Name(), providertest.Error(provider.Transient, "503"))
	}
	sd := testsupport.Dispatcher(t, dispatch.Dispatcher{Ledger: b.ledger, Providers: map[string]provider.Adapter{"sms": p}, Health: senderHealth, Status: status,
		ProviderTimeout: 5 * time.Second, ClaimTimeout: time.Minute, Now: b.clock.Now})
	e := ledger.Entry{Key: "v1_recover_new", Channel: "sms", Class: "otp", Provider: p.Name(), Address: "+15551234567", Body: "new"}
	c, err := sd.Claim(ctx, e, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if res := sd.Send(ctx, c, e, p); res.Disposition != dispatch.Sent {
		t.Fatalf("the sender's send after recovery: %+v, want sent", res)
	}
	fr, finds, err := r.Watch(ctx, q, since, frep, since.Add(DefaultSchedule-WatchMargin))
	if err != nil || finds != 1 || fr.Found != len(keys) {
		t.Fatalf("Watch after the recovery: %+v in %d hand-outs, %v; want the %d rows handed out at once", fr, finds, err, len(keys))
	}
	if !workerHealth.Down(p.Name()) {
		t.Fatal("the worker's container forgot the outage by itself: the test needs its cool-down running")
	}
	for _, u := range q.q {
		if u.ProviderUp.IsZero() {
			t.Errorf("unit %v carries no ProviderUp", u.Keys)
		}
		if rep, done := r.Work(ctx, u); !done || rep.Actions[ActionResent] != len(u.Keys) {
			t.Fatalf("Work on the unit handed out at the recovery: done %t, %+v; want every row resent", done, rep)
		}
	}
	sends := map[string]int{}
	for _, m := range p.Sent()[refused:] {
		sends[m.Key]++
	}
	for _, key := range keys {
		if row := b.state(t, key); row.State != ledger.StateSent || sends[key] != 1 {
			t.Errorf("row %s: %s after %d sends since the recovery, want SENT after 1", key, row.State, sends[key])
		}
	}
	// Up again: nothing left to watch.
	if watch, _, err := r.Recovery(ctx, b.clock.Now()); err != nil || watch {
		t.Errorf("Recovery once the provider is up: watch %t, %v; want none", watch, err)
	}
}

// TestWatchWithoutAnOutageReturnsAtOnce: with no provider recorded down
// and no backlog left by its Find, the scheduled run does not stay alive.
func TestWatchWithoutAnOutageReturnsAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.reconciler(t, &providertest.Fake{}, func(c *Config) { c.Status = &opstate.Memory{} })
	start := time.Now()
	if _, finds, err := r.Watch(context.Background(), &units{}, b.clock.Now(), FindReport{}, b.clock.Now().Add(time.Minute)); finds != 0 || err != nil || time.Since(start) > time.Second {
		t.Errorf("Watch with nothing down and no backlog: %d hand-outs, %v, after %s; want none, at once", finds, err, time.Since(start))
	}
}
