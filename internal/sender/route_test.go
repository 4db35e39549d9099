package sender_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/dispatch"
	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/metrics"
	"github.com/sendonce/sendonce/internal/provider/twilio/twiliotest"
	"github.com/sendonce/sendonce/internal/reconcile"
	"github.com/sendonce/sendonce/internal/sender"
	"github.com/sendonce/sendonce/internal/testsupport"
	"github.com/sendonce/sendonce/provider"
)

// routeSender builds a sender whose SMS route is primary, then fallbacks.
func (w *world) routeSender(t *testing.T, primary provider.Adapter, fallbacks ...provider.Adapter) *sender.Sender {
	t.Helper()
	s, err := sender.New(sender.Config{
		Dispatcher: testsupport.Dispatcher(t, dispatch.Dispatcher{
			Ledger:          w.mem,
			Providers:       map[string]provider.Adapter{"sms": primary},
			Fallbacks:       map[string][]provider.Adapter{"sms": fallbacks},
			Renderer:        w.render,
			Metrics:         w.tally,
			Logger:          quiet,
			ProviderTimeout: time.Second,
			ClaimTimeout:    time.Minute,
			Settle:          settleTime,
			Now:             w.clock.Now,
		}),
		DeadLetters: discardDLQ{},
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestRouteFailsOverAfterARefusal: Twilio refuses before accepting (a
// 429, then its account suspended), so the attempt provably sent
// nothing; the same delivery fails over to the next provider, which
// sends. The row records the provider that sent, and the failover is
// counted.
func TestRouteFailsOverAfterARefusal(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		fault twiliotest.Fault
	}{
		{"Throttled", twiliotest.Fault{Status: 429, Code: 20429, Message: "Too Many Requests"}},
		{"AccountSuspended", twiliotest.Fault{Status: 401, Code: 20005, Message: "Account not active"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			r := req("evt-failover-" + tc.name)
			w.twilio.Fail(tc.fault)
			processWant(t, w.routeSender(t, w.tw, w.http), r, dispatch.Sent)
			row := w.row(t, r.Key())
			if row.State != ledger.StateSent || row.Provider != "http" || row.Attempts != 2 {
				t.Errorf("row %s through %q after %d attempts, want SENT through http after 2", row.State, row.Provider, row.Attempts)
			}
			if len(row.History) != 1 || !strings.HasPrefix(row.History[0], "1 twilio released: ") {
				t.Errorf("History = %q, want the first attempt released by twilio", row.History)
			}
			if n, d := len(w.twilio.Messages()), w.sim.Delivered(r.Key()); n != 0 || d != 1 {
				t.Errorf("twilio holds %d, http delivered %d; want 0 and 1", n, d)
			}
			if got := w.tally.Get(metrics.Failovers); got != 1 {
				t.Errorf("Failovers = %d, want 1", got)
			}
		})
	}
}

// TestRouteNeverFailsOverAfterAnAmbiguousAttempt: Twilio accepted and the
// answer was lost. The message may be out, so the next provider must not
// send it: the row is UNCERTAIN, and the reconciler (with the same route)
// settles it against Twilio, its attempt's provider.
func TestRouteNeverFailsOverAfterAnAmbiguousAttempt(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	r := req("evt-failover-ambiguous")
	w.twilio.Fail(twiliotest.Fault{AcceptThenHang: true})
	processWant(t, w.routeSender(t, w.tw, w.http), r, dispatch.Uncertain)
	w.statusCallback(t, r.Key(), w.twilio.Messages()[0].SID)
	w.clock.Advance(time.Minute + settleTime)
	rec, err := reconcile.New(reconcile.Config{
		Dispatcher: testsupport.Dispatcher(t, dispatch.Dispatcher{
			Ledger:          w.mem,
			Renderer:        w.render,
			Providers:       map[string]provider.Adapter{"sms": w.http},
			Fallbacks:       map[string][]provider.Adapter{"sms": {w.tw}},
			Metrics:         w.tally,
			Logger:          quiet,
			ProviderTimeout: time.Second,
			ClaimTimeout:    time.Minute,
			Settle:          settleTime,
			Now:             w.clock.Now,
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	w.run(t, rec)
	if row := w.row(t, r.Key()); row.State != ledger.StateSent || row.Provider != "twilio" {
		t.Errorf("row %s through %q, want SENT through twilio (by its lookup)", row.State, row.Provider)
	}
	if n, d := len(w.twilio.Messages()), w.sim.Delivered(r.Key()); n != 1 || d != 0 {
		t.Errorf("twilio holds %d, http delivered %d; want 1 and 0", n, d)
	}
	if got := w.tally.Get(metrics.Failovers); got != 0 {
		t.Errorf("Failovers = %d, want 0", got)
	}
}

// TestRouteRecipientRejectionIsFinal: an invalid number is the
// recipient's fault: FAILED on every route, no failover.
func TestRouteRecipientRejectionIsFinal(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	r := req("evt-failover-invalid")
	w.twilio.Fail(twiliotest.Fault{Status: 400, Code: 21211, Message: "Invalid 'To' Phone Number"})
	processWant(t, w.routeSender(t, w.tw, w.http), r, dispatch.Failed)
	if d := w.sim.Delivered(r.Key()); d != 0 {
		t.Errorf("http delivered %d, want 0", d)
	}
}

// TestRouteSkipsAFailingProvider: once Twilio has refused three times in
// a row, new messages go to the next provider first, without a doomed
// call to Twilio, until its cool-down passes.
func TestRouteSkipsAFailingProvider(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.twilio.SetDecide(func(string) twiliotest.Fault {
		return twiliotest.Fault{Status: 429, Code: 20429, Message: "Too Many Requests"}
	})
	s := w.routeSender(t, w.tw, w.http)
	for i := range dispatch.DefaultHealthThreshold {
		processWant(t, s, req("evt-health-"+string(rune('a'+i))), dispatch.Sent)
	}
	creates, _ := w.twilio.Requests()
	skip := req("evt-health-skip")
	processWant(t, s, skip, dispatch.Sent)
	if after, _ := w.twilio.Requests(); after != creates {
		t.Errorf("twilio got %d more requests, want none while it cools down", after-creates)
	}
	if row := w.row(t, skip.Key()); row.Provider != "http" || row.Attempts != 1 {
		t.Errorf("row through %q after %d attempts, want http after 1", row.Provider, row.Attempts)
	}
	// Every message went out through http, the route's second: each
	// refused one failed over within its delivery, and the skipped one
	// went there first. Each is a failover.
	if got, want := w.tally.Get(metrics.Failovers), dispatch.DefaultHealthThreshold+1; got != want {
		t.Errorf("Failovers = %d, want %d (one per send through http, the skipped one included)", got, want)
	}
	// After the cool-down Twilio is tried again.
	w.twilio.SetDecide(nil)
	w.clock.Advance(dispatch.DefaultHealthCooldown)
	back := req("evt-health-back")
	processWant(t, s, back, dispatch.Sent)
	if row := w.row(t, back.Key()); row.Provider != "twilio" {
		t.Errorf("row through %q, want twilio after its cool-down", row.Provider)
	}
}

// TestRouteReleasedRowSentThroughTheNext: Twilio refused a message while
// it was the channel's only provider, so its row is released; after a
// redeploy that adds http to the route, a later delivery, or the
// reconciler, starts after the provider that refused and sends through
// http. Each such send is a failover, counted once.
func TestRouteReleasedRowSentThroughTheNext(t *testing.T) {
	t.Parallel()
	for _, by := range []string{"LaterDelivery", "Reconciler"} {
		t.Run(by, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			r := req("evt-released-" + by)
			w.twilio.Fail(twiliotest.Fault{Status: 429, Code: 20429, Message: "Too Many Requests"})
			processWant(t, w.routeSender(t, w.tw), r, dispatch.Retry)
			if got := w.tally.Get(metrics.Failovers); got != 0 {
				t.Fatalf("Failovers = %d after a send through the only provider, want 0", got)
			}
			w.clock.Advance(10 * time.Minute) // past the release's backoff
			switch by {
			case "LaterDelivery":
				processWant(t, w.routeSender(t, w.tw, w.http), r, dispatch.Sent)
			case "Reconciler":
				rec, err := reconcile.New(reconcile.Config{
					Dispatcher: testsupport.Dispatcher(t, dispatch.Dispatcher{
						Ledger:          w.mem,
						Renderer:        w.render,
						Providers:       map[string]provider.Adapter{"sms": w.tw},
						Fallbacks:       map[string][]provider.Adapter{"sms": {w.http}},
						Metrics:         w.tally,
						Logger:          quiet,
						ProviderTimeout: time.Second,
						ClaimTimeout:    time.Minute,
						Settle:          settleTime,
						Now:             w.clock.Now,
					}),
				})
				if err != nil {
					t.Fatal(err)
				}
				w.run(t, rec)
			}
			if row := w.row(t, r.Key()); row.State != ledger.StateSent || row.Provider != "http" {
				t.Fatalf("row %s through %q, want SENT through http", row.State, row.Provider)
			}
			if n, d := len(w.twilio.Messages()), w.sim.Delivered(r.Key()); n != 0 || d != 1 {
				t.Errorf("twilio holds %d, http delivered %d; want 0 and 1", n, d)
			}
			if got := w.tally.Get(metrics.Failovers); got != 1 {
				t.Errorf("Failovers = %d, want 1: the released row went out through the route's second provider", got)
			}
		})
	}
}

// statusLog records what a dispatcher tells its StatusRecorder.
type statusLog struct {
	mu  sync.Mutex
	got []string
}

func (s *statusLog) ProviderState(_ context.Context, provider, state string, until time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, provider+" "+state+" "+until.Format(time.RFC3339))
	return nil
}

// TestRouteRecordsAProviderDown: once Twilio has refused three sends in a
// row it is known down, and the dispatcher records that once (for
// `sendonce status`, package opstate), until the end of its cool-down;
// the sends that meet it down record nothing more.
func TestRouteRecordsAProviderDown(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.twilio.SetDecide(func(string) twiliotest.Fault {
		return twiliotest.Fault{Status: 429, Code: 20429, Message: "Too Many Requests"}
	})
	status := &statusLog{}
	s, err := sender.New(sender.Config{
		Dispatcher: testsupport.Dispatcher(t, dispatch.Dispatcher{
			Ledger: w.mem, Providers: map[string]provider.Adapter{"sms": w.tw}, Renderer: w.render, Metrics: w.tally, Logger: quiet,
			ProviderTimeout: time.Second, ClaimTimeout: time.Minute, Settle: settleTime, Now: w.clock.Now, Status: status,
		}),
		DeadLetters: discardDLQ{},
	})
	if err != nil {
		t.Fatal(err)
	}
	until := w.clock.Now().Add(dispatch.DefaultHealthCooldown)
	for i := range dispatch.DefaultHealthThreshold + 2 {
		processWant(t, s, req("evt-down-"+string(rune('a'+i))), dispatch.Retry)
	}
	if want := []string{"twilio down " + until.Format(time.RFC3339)}; !slices.Equal(status.got, want) {
		t.Errorf("recorded %q, want %q", status.got, want)
	}
}
