package reconcile_test

// Reconciler tests against real components: the DynamoDB ledger on
// DynamoDB Local and the HTTP provider adapter talking to the provider
// simulator, whose per-reference delivery count is the ground truth.

import (
	"context"
	"fmt"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/dispatch"
	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/ledger/dynamoledger"
	"github.com/sendonce/sendonce/internal/provider/httpprovider"
	"github.com/sendonce/sendonce/internal/provider/simulator"
	"github.com/sendonce/sendonce/internal/reconcile"
	"github.com/sendonce/sendonce/internal/sendkey"
	"github.com/sendonce/sendonce/internal/testenv"
	"github.com/sendonce/sendonce/internal/testsupport"
	"github.com/sendonce/sendonce/provider"
	"github.com/sendonce/sendonce/provider/providertest"
)

type env struct {
	sim    *simulator.Simulator
	url    string
	prov   *httpprovider.Provider
	ledger *dynamoledger.Ledger
	now    atomic.Pointer[time.Time]
}

func setup(t *testing.T, simOpts simulator.Options) *env {
	t.Helper()
	e := &env{}
	start := time.Now()
	e.now.Store(&start)
	simOpts.Token = "tok"
	e.sim = simulator.New(simOpts)
	srv := httptest.NewServer(e.sim.Handler())
	t.Cleanup(func() { srv.Close(); e.sim.Close() })
	e.url = srv.URL
	var err error
	if e.prov, err = httpprovider.New(httpprovider.Config{BaseURL: srv.URL, Token: "tok", Timeout: testProviderTimeout}); err != nil {
		t.Fatal(err)
	}
	db := testenv.DynamoDB(t)
	if e.ledger, err = dynamoledger.New(db, testenv.NewTable(t, db), dynamoledger.Config{Now: e.clock}); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) clock() time.Time { return *e.now.Load() }

func (e *env) advance(d time.Duration) {
	t := e.clock().Add(d)
	e.now.Store(&t)
}

func key(i int) string {
	return sendkey.Derive(sendkey.Parts{Tenant: "acme", EventID: fmt.Sprint("evt_", i), RecipientID: "user-1", Channel: "sms", Template: "otp"})
}

// uncertain writes n UNCERTAIN rows of class, as senders whose provider
// calls timed out would leave them.
func (e *env) uncertain(t *testing.T, n int, class string) []string {
	t.Helper()
	ctx := context.Background()
	keys := make([]string, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 16)
	for i := range n {
		keys[i] = key(i)
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			c, err := e.ledger.Claim(ctx, ledger.Entry{Key: keys[i], Tenant: "acme", Channel: "sms", Class: class, Provider: "http",
				Template: "otp", RecipientID: "user-1", Address: "+15551230000", Body: "code " + fmt.Sprint(i)}, time.Minute)
			if err == nil {
				err = e.ledger.Mark(ctx, c, ledger.Outcome{State: ledger.StateUncertain, Reason: "timeout"})
			}
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return keys
}

// testProviderTimeout bounds the simulator's answers. No test here plans
// a slow answer, so it is generous: at 2 s, a loaded machine (load
// average 30 on 2 cores) let a resend's answer arrive after it, an
// ambiguous attempt that the OTP policy resent, and
// TestTwoConcurrentReconcilersNeverSendTwice counted that policy's
// duplicate as the reconcilers'.
const testProviderTimeout = 15 * time.Second

func (e *env) reconciler(t *testing.T, p provider.Adapter) *reconcile.Reconciler {
	t.Helper()
	r, err := reconcile.New(reconcile.Config{
		Dispatcher: testsupport.Dispatcher(t, dispatch.Dispatcher{
			Ledger:          e.ledger,
			Providers:       map[string]provider.Adapter{"sms": p},
			ProviderTimeout: testProviderTimeout,
			ClaimTimeout:    time.Minute,
			Settle:          time.Minute,
			Now:             e.clock,
		}),
		MaxRows:     10000,
		Concurrency: 8,
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestTwoConcurrentReconcilersNeverSendTwice(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		wrap func(*httpprovider.Provider) provider.Adapter
	}{
		{"NoCapabilitiesOTPPolicy", func(p *httpprovider.Provider) provider.Adapter { return providertest.NoCapabilities(p) }},
		{"LookupOnly", func(p *httpprovider.Provider) provider.Adapter { return providertest.LookupOnly(p) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, simulator.Options{IdempotencyDisabled: true})
			keys := e.uncertain(t, 500, "otp")
			e.advance(2 * time.Minute)
			p := tc.wrap(e.prov)
			var wg sync.WaitGroup
			reports := make([]reconcile.Report, 2)
			for i := range reports {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rep, err := e.reconciler(t, p).Run(context.Background())
					if err != nil {
						t.Error(err)
					}
					reports[i] = rep
				}()
			}
			wg.Wait()
			resent := reports[0].Actions[reconcile.ActionResent] + reports[1].Actions[reconcile.ActionResent]
			if resent != 500 {
				t.Errorf("resent %d (%v / %v), want 500 between the two", resent, reports[0].Actions, reports[1].Actions)
			}
			for _, k := range keys {
				if n := e.sim.Delivered(k); n != 1 {
					t.Fatalf("reference %s delivered %d times, want 1", k, n)
				}
			}
			if d := e.sim.Duplicates(); len(d) != 0 {
				t.Errorf("duplicates: %v", d)
			}
			for _, k := range keys[:10] {
				r, err := e.ledger.Get(context.Background(), k)
				if err != nil || r.State != ledger.StateSent {
					t.Errorf("row %s = %s, %v; want SENT", k, r.State, err)
				}
			}
		})
	}
}

func TestLookupAgainstSimulator(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("AcceptedEarlierBecomesSentWithoutResend", func(t *testing.T) {
		t.Parallel()
		e := setup(t, simulator.Options{})
		keys := e.uncertain(t, 1, "marketing")
		// The provider did accept the first attempt; only its answer was lost.
		if _, err := e.prov.Send(ctx, provider.Message{Key: keys[0], Channel: "sms", To: "+15551230000", Body: "code 0"}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.reconciler(t, e.prov).Run(ctx); err != nil {
			t.Fatal(err)
		}
		r, _ := e.ledger.Get(ctx, keys[0])
		if r.State != ledger.StateSent || r.ProviderMessageID == "" {
			t.Errorf("row = %s %q, want SENT with the provider id", r.State, r.ProviderMessageID)
		}
		if n := e.sim.Delivered(keys[0]); n != 1 {
			t.Errorf("delivered %d, want 1", n)
		}
	})

	t.Run("RejectedBecomesFailed", func(t *testing.T) {
		t.Parallel()
		e := setup(t, simulator.Options{})
		keys := e.uncertain(t, 1, "marketing")
		e.sim.AddFault(simulator.Fault{Kind: simulator.FaultUndeliverable, Count: 1})
		if _, err := e.prov.Send(ctx, provider.Message{Key: keys[0], Channel: "sms", To: "+15551230000", Body: "code 0"}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.reconciler(t, e.prov).Run(ctx); err != nil {
			t.Fatal(err)
		}
		if r, _ := e.ledger.Get(ctx, keys[0]); r.State != ledger.StateFailed {
			t.Errorf("row = %s, want FAILED", r.State)
		}
	})

	t.Run("NothingBeforeSettleWaitsThenResends", func(t *testing.T) {
		t.Parallel()
		e := setup(t, simulator.Options{})
		keys := e.uncertain(t, 1, "marketing")
		r := e.reconciler(t, providertest.LookupOnly(e.prov))
		rep, err := r.Run(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Actions[reconcile.ActionWaiting] != 1 || e.sim.Delivered(keys[0]) != 0 {
			t.Fatalf("before settle: %v, delivered %d; want waiting and nothing sent", rep.Actions, e.sim.Delivered(keys[0]))
		}
		e.advance(2 * time.Minute)
		if rep, err = r.Run(ctx); err != nil || rep.Actions[reconcile.ActionResent] != 1 {
			t.Fatalf("after settle: %v, %v; want resent", rep.Actions, err)
		}
		if n := e.sim.Delivered(keys[0]); n != 1 {
			t.Errorf("delivered %d, want 1", n)
		}
	})
}

// TestOutageOfALookupProviderIsNotAbandoned (chaos seed 1, http lane,
// email through a provider that can be asked but ignores the key): every
// resend during a 5xx outage is ambiguous and the row goes back to
// UNCERTAIN. Each run's lookup after the settle time finds no record, so
// none of those attempts was sent: they must not spend the attempt limit
// (3 here). The row stays unresolved through the outage and is delivered
// once after it.
func TestOutageOfALookupProviderIsNotAbandoned(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t, simulator.Options{IdempotencyDisabled: true})
	prov, err := httpprovider.New(httpprovider.Config{BaseURL: e.url, Token: "tok", Timeout: 2 * time.Second, DisableIdempotency: true})
	if err != nil {
		t.Fatal(err)
	}
	keys := e.uncertain(t, 1, "transactional")
	const outage = 6
	e.sim.AddFault(simulator.Fault{Kind: simulator.FaultStatus, Status: 503, Count: outage})
	r, err := reconcile.New(reconcile.Config{
		Dispatcher: testsupport.Dispatcher(t, dispatch.Dispatcher{
			Ledger:          e.ledger,
			Providers:       map[string]provider.Adapter{"sms": prov},
			ProviderTimeout: 2 * time.Second,
			ClaimTimeout:    time.Minute,
			Settle:          time.Minute,
			Now:             e.clock,
		}),
		MaxAttempts: 3,
	})
	if err != nil {
		t.Fatal(err)
	}
	for run := 1; run <= outage+1; run++ {
		e.advance(2 * time.Minute)
		if _, err := r.Run(ctx); err != nil {
			t.Fatal(err)
		}
		row, err := e.ledger.Get(ctx, keys[0])
		if err != nil {
			t.Fatal(err)
		}
		if row.State == ledger.StateAbandoned {
			t.Fatalf("run %d: ABANDONED (%s) after %d attempts, though every lookup after the settle time found no record", run, row.Reason, row.Attempts)
		}
	}
	row, _ := e.ledger.Get(ctx, keys[0])
	if row.State != ledger.StateSent || e.sim.Delivered(keys[0]) != 1 {
		t.Fatalf("after the outage: row %s (%s), delivered %d; want SENT, delivered once", row.State, row.Reason, e.sim.Delivered(keys[0]))
	}
}
