package sender_test

// Regression tests of issue 21: exactly-once while the world changes. An
// operator puts a new template version, two messages carry the same text,
// the channel's provider is switched, and a redelivery cannot settle a
// dead worker's attempt. Each runs the real sender (and reconciler) over
// the in-memory ledger and the real adapters against their fakes, and
// counts what each provider received.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/dispatch"
	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/ledger/ledgertest"
	"github.com/sendonce/sendonce/internal/ledger/memledger"
	"github.com/sendonce/sendonce/internal/metrics"
	"github.com/sendonce/sendonce/internal/provider/httpprovider"
	"github.com/sendonce/sendonce/internal/provider/simulator"
	"github.com/sendonce/sendonce/internal/provider/twilio"
	"github.com/sendonce/sendonce/internal/provider/twilio/twiliotest"
	"github.com/sendonce/sendonce/internal/reconcile"
	"github.com/sendonce/sendonce/internal/render"
	"github.com/sendonce/sendonce/internal/sender"
	"github.com/sendonce/sendonce/internal/templates"
	"github.com/sendonce/sendonce/internal/templates/memtemplates"
	"github.com/sendonce/sendonce/internal/testsupport"
	"github.com/sendonce/sendonce/notify"
	"github.com/sendonce/sendonce/provider"
)

const settleTime = 2 * time.Minute

// world is one deployment's stores, its providers' fakes, and the clock.
type world struct {
	clock  *testsupport.Clock
	mem    *memledger.Ledger
	store  *memtemplates.Store
	render *render.Renderer
	tally  *metrics.Tally
	twilio *twiliotest.Server
	tw     *twilio.Provider
	sim    *simulator.Simulator
	http   provider.Adapter
}

func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{clock: testsupport.NewClock(time.Now().UTC().Truncate(time.Millisecond)), tally: metrics.NewTally()}
	w.mem = memledger.New(memledger.Config{Now: w.clock.Now})
	w.store = memtemplates.New(memtemplates.Config{})
	if _, err := templates.ImportExamples(context.Background(), w.store, "acme"); err != nil {
		t.Fatal(err)
	}
	w.render = render.New(w.store, render.Config{CacheTTL: -1})
	w.twilio = twiliotest.New(t)
	w.twilio.SetNow(w.clock.Now)
	var err error
	w.tw, err = twilio.New(twilio.Config{BaseURL: w.twilio.URL, AccountSID: w.twilio.AccountSID, AuthToken: w.twilio.AuthToken,
		From: "+15550001111", Timeout: time.Second, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	var url string
	w.sim, url = testsupport.Simulator(t, simulator.Options{Token: "tok"})
	if w.http, err = httpprovider.New(httpprovider.Config{BaseURL: url, Token: "tok", Timeout: time.Second, Logger: quiet}); err != nil {
		t.Fatal(err)
	}
	return w
}

// sender builds the sender of a deployment whose SMS provider is p (as a
// redeploy with another provider would).
func (w *world) sender(t *testing.T, p provider.Adapter) *sender.Sender {
	t.Helper()
	s, err := sender.New(sender.Config{
		Dispatcher: testsupport.Dispatcher(t, dispatch.Dispatcher{
			Ledger:          w.mem,
			Providers:       map[string]provider.Adapter{"sms": p},
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

func (w *world) reconciler(t *testing.T, p provider.Adapter) *reconcile.Reconciler {
	t.Helper()
	r, err := reconcile.New(reconcile.Config{
		Dispatcher: testsupport.Dispatcher(t, dispatch.Dispatcher{
			Ledger:          w.mem,
			Renderer:        w.render,
			Providers:       map[string]provider.Adapter{"sms": p},
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
	return r
}

func (w *world) row(t *testing.T, key string) ledger.Record {
	t.Helper()
	return ledgertest.Row(t, w.mem, key)
}

func (w *world) run(t *testing.T, r *reconcile.Reconciler) reconcile.Report {
	t.Helper()
	rep, err := r.Run(context.Background())
	if err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	return rep
}

// text is the SMS the example template version 1 renders for r.
func (w *world) text(t *testing.T, r notify.Request) string {
	t.Helper()
	m, err := w.render.RenderRequest(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	return m.Body
}

// deadClaim plays a worker that renders and claims r through provider
// name, then dies before its provider call: nothing was sent.
func (w *world) deadClaim(t *testing.T, r notify.Request, name string) ledger.Entry {
	t.Helper()
	m, err := w.render.RenderRequest(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	e := ledger.Entry{Key: r.Key(), Tenant: r.TenantID, Channel: "sms", Class: string(r.Class), Provider: name,
		Template: r.Template, RecipientID: r.Recipient.ID, Address: r.Address(),
		TemplateVersion: m.TemplateVersion, Data: `{"order_id":"` + r.Data["order_id"].(string) + `"}`}
	if _, err := w.mem.Claim(context.Background(), e, time.Minute); err != nil {
		t.Fatal(err)
	}
	return e
}

// statusCallback records what the webhook records from a Twilio status
// callback whose URL carries key: the message's SID.
func (w *world) statusCallback(t *testing.T, key, sid string) {
	t.Helper()
	if _, err := w.mem.ApplyDelivery(context.Background(), key, ledger.Delivery{Status: "sent", Rank: 2, At: w.clock.Now(), ProviderMessageID: sid}); err != nil {
		t.Fatal(err)
	}
}

func processWant(t *testing.T, s *sender.Sender, r notify.Request, want dispatch.Disposition) {
	t.Helper()
	if res := s.Process(context.Background(), r); res.Disposition != want {
		t.Fatalf("Process = %s (%s), want %s", res.Disposition, res.Reason, want)
	}
}

// TestNewTemplateVersionKeepsThePinnedMessage (defect 1): a message whose
// first attempt sent nothing is resent after the tenant put a version 2
// that cannot render its data. The row pins version 1, which still
// renders: the resend must send version 1's text, never turn the message
// FAILED. Three ways to such a resend: a released claim, a settled "no
// record" lookup, a provider that drops repeats.
func TestNewTemplateVersionKeepsThePinnedMessage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// first plays the first attempt; it returns the provider of the
		// redelivery and how many messages that provider holds.
		first func(t *testing.T, w *world, r notify.Request) (provider.Adapter, func() int)
	}{
		{"Released", func(t *testing.T, w *world, r notify.Request) (provider.Adapter, func() int) {
			w.twilio.Fail(twiliotest.Fault{Status: 429, Code: 20429, Message: "Too Many Requests"})
			processWant(t, w.sender(t, w.tw), r, dispatch.Retry)
			if row := w.row(t, r.Key()); !row.Released {
				t.Fatalf("after a 429 the row is %s, released %v; want released", row.State, row.Released)
			}
			text := w.text(t, r)
			return w.tw, func() int { return w.twilio.Count(r.Address(), text) }
		}},
		{"SettledNoRecord", func(t *testing.T, w *world, r notify.Request) (provider.Adapter, func() int) {
			w.deadClaim(t, r, "twilio")
			w.clock.Advance(time.Minute + settleTime)
			text := w.text(t, r)
			return w.tw, func() int { return w.twilio.Count(r.Address(), text) }
		}},
		{"DropsRepeats", func(t *testing.T, w *world, r notify.Request) (provider.Adapter, func() int) {
			w.deadClaim(t, r, "http")
			w.clock.Advance(2 * time.Minute)
			return w.http, func() int { return w.sim.Delivered(r.Key()) }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			r := req("evt-v2-" + tc.name)
			v1 := w.text(t, r)
			p, count := tc.first(t, w, r)
			// Version 2 needs a parameter this message's data lacks.
			if _, err := w.store.Put(context.Background(), templates.Template{
				ID:   templates.ID{Tenant: "acme", Name: "order_shipped", Channel: "sms"},
				Text: "Order {{.order_id}} left with {{.carrier}}.",
			}); err != nil {
				t.Fatal(err)
			}
			if _, err := w.render.RenderRequest(context.Background(), r); err == nil {
				t.Fatal("version 2 renders the request: the test no longer covers an unrenderable latest version")
			}
			processWant(t, w.sender(t, p), r, dispatch.Sent)
			if row := w.row(t, r.Key()); row.State != ledger.StateSent || row.TemplateVersion != 1 {
				t.Errorf("row %s, version %d; want SENT with version 1", row.State, row.TemplateVersion)
			}
			if n := count(); n != 1 {
				t.Errorf("the provider holds %d messages with version 1's text %q, want 1", n, v1)
			}
		})
	}
}

// TestIdenticalTextIsNeverTakenForAnotherMessage (defect 2; issue 34's
// proof by exclusion): two logical messages with the same text to one
// recipient through Twilio. A's worker died before it reached Twilio (an
// ambiguous attempt); B was sent, and the ledger recorded B's SID as B's
// (ledger.OwnerIndex). A's takeover finds B's message by content. It must
// never take it for A's (SENT with B's SID, or FAILED once B is
// undelivered): the content match alone proves nothing. But every
// message with that text is another key's, so none is A's: the lookup's
// answer is "not found" (proof by exclusion), and after the settle time
// A is sent through Twilio. Both end delivered once; neither is
// abandoned.
func TestIdenticalTextIsNeverTakenForAnotherMessage(t *testing.T) {
	t.Parallel()
	for _, undelivered := range []bool{false, true} {
		name := map[bool]string{false: "BSent", true: "BUndelivered"}[undelivered]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			a, b := req("evt-a"), req("evt-b")
			b.Data = a.Data // the same order: the same text
			text := w.text(t, a)
			if text != w.text(t, b) {
				t.Fatal("A and B render differently")
			}
			w.deadClaim(t, a, "twilio")
			s := w.sender(t, w.tw)
			processWant(t, s, b, dispatch.Sent)
			sidB := w.row(t, b.Key()).ProviderMessageID
			if undelivered {
				w.twilio.SetStatus(sidB, "undelivered", 30007)
			}
			w.clock.Advance(time.Minute + settleTime)
			processWant(t, s, a, dispatch.Sent)
			row := w.row(t, a.Key())
			if row.State != ledger.StateSent || row.ProviderMessageID == "" || row.ProviderMessageID == sidB {
				t.Fatalf("A: %s with provider id %q; want SENT with its own SID, never B's %s", row.State, row.ProviderMessageID, sidB)
			}
			if n := w.twilio.Count(a.Address(), text); n != 2 {
				t.Errorf("twilio holds %d messages with the text, want 2 (A's and B's, each once)", n)
			}
			if row := w.row(t, b.Key()); row.State != ledger.StateSent {
				t.Errorf("B: %s, want SENT", row.State)
			}
		})
	}
}

// TestIdenticalTextOfAnUnknownOwnerStaysUnproven: as above, but the other
// message with the same text was sent outside sendonce (the ledger
// records no owner for its SID): nothing excludes that it is A's, so the
// lookup stays unproven and the class policy decides A (transactional:
// abandon, counted), never a resend.
func TestIdenticalTextOfAnUnknownOwnerStaysUnproven(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	a := req("evt-a")
	text := w.text(t, a)
	w.deadClaim(t, a, "twilio")
	if _, err := w.tw.Send(context.Background(), provider.Message{Key: "v1_elsewhere", Channel: "sms", To: a.Address(), Body: text}); err != nil {
		t.Fatal(err)
	}
	w.clock.Advance(time.Minute + settleTime)
	processWant(t, w.sender(t, w.tw), a, dispatch.Uncertain)
	w.run(t, w.reconciler(t, w.tw))
	if row := w.row(t, a.Key()); row.State != ledger.StateAbandoned {
		t.Errorf("A after reconciliation: %s (%s); want ABANDONED by the transactional policy", row.State, row.Reason)
	}
	if n := w.twilio.Count(a.Address(), text); n != 1 {
		t.Errorf("twilio holds %d messages with the text, want 1 (the other sender's)", n)
	}
}

// TestProviderSwitchResolvesAgainstTheAttemptsProvider (defect 3): an SMS
// accepted by Twilio whose answer was lost is UNCERTAIN. The operator
// switches SMS to the http provider, which drops repeats and has no
// record of it. The reconciler must not ask http and resend: the row
// waits, counted as a configuration error. Switched back, the row is
// settled by Twilio's lookup (a status callback proves the SID).
func TestProviderSwitchResolvesAgainstTheAttemptsProvider(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	r := req("evt-switch")
	w.twilio.Fail(twiliotest.Fault{AcceptThenHang: true})
	processWant(t, w.sender(t, w.tw), r, dispatch.Uncertain)
	sid := w.twilio.Messages()[0].SID
	w.statusCallback(t, r.Key(), sid)

	// The deployment now sends SMS through http.
	w.clock.Advance(time.Minute + settleTime)
	processWant(t, w.sender(t, w.http), r, dispatch.OwnedByReconciler)
	before := w.tally.Get(metrics.ConfigErrors)
	rep := w.run(t, w.reconciler(t, w.http))
	if rep.Actions[reconcile.ActionWaiting] != 1 {
		t.Errorf("reconcile actions %v, want the row waiting", rep.Actions)
	}
	if got := w.sim.Delivered(r.Key()); got != 0 {
		t.Fatalf("http delivered %d copies of a message Twilio has: sent twice", got)
	}
	if w.tally.Get(metrics.ConfigErrors) <= before {
		t.Error("the waiting row was not counted as ConfigErrors")
	}
	if row := w.row(t, r.Key()); row.State != ledger.StateUncertain || row.Provider != "twilio" {
		t.Errorf("row %s through %q, want UNCERTAIN through twilio", row.State, row.Provider)
	}

	// Back on Twilio: the lookup proves the message.
	w.run(t, w.reconciler(t, w.tw))
	if row := w.row(t, r.Key()); row.State != ledger.StateSent || row.ProviderMessageID != sid {
		t.Errorf("row %s %q, want SENT with %s", row.State, row.ProviderMessageID, sid)
	}
	if n := len(w.twilio.Messages()); n != 1 {
		t.Errorf("twilio holds %d messages, want 1", n)
	}
}

// TestProviderSwitchSendsAReleasedMessageThroughTheNewProvider: a row
// whose every attempt was released sent nothing, so after a switch the
// new provider sends it, and the row records that provider.
func TestProviderSwitchSendsAReleasedMessageThroughTheNewProvider(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	r := req("evt-switch-released")
	w.twilio.Fail(twiliotest.Fault{Status: 429, Code: 20429, Message: "Too Many Requests"})
	processWant(t, w.sender(t, w.tw), r, dispatch.Retry)
	processWant(t, w.sender(t, w.http), r, dispatch.Sent)
	if row := w.row(t, r.Key()); row.State != ledger.StateSent || row.Provider != "http" {
		t.Errorf("row %s through %q, want SENT through http", row.State, row.Provider)
	}
	if n, d := len(w.twilio.Messages()), w.sim.Delivered(r.Key()); n != 0 || d != 1 {
		t.Errorf("twilio holds %d, http delivered %d; want 0 and 1", n, d)
	}
}

// failingLookups is Twilio whose message list cannot be read.
type failingLookups struct{ *twilio.Provider }

func (failingLookups) Lookup(context.Context, provider.Message) (provider.LookupResult, error) {
	return provider.LookupResult{}, &provider.Error{Kind: provider.Transient, Provider: twilio.Name, Op: "lookup", Reason: "list unavailable"}
}

// TestStaleFirstClaimThatMustWaitIsIndexed (defect 4): a redelivery finds
// a dead worker's first claim and cannot settle it (the lookup fails).
// Left waiting, the row would stay out of the attention index and reach
// the dead-letter queue with the SQS message's last receive: the sender
// marks it UNCERTAIN, so the reconciler owns it.
func TestStaleFirstClaimThatMustWaitIsIndexed(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	r := req("evt-stranded")
	w.deadClaim(t, r, "twilio")
	w.clock.Advance(2 * time.Minute)
	if row := w.row(t, r.Key()); row.Indexed() {
		t.Fatal("a first claim is indexed: the test no longer covers the unindexed row")
	}
	res := w.sender(t, failingLookups{w.tw}).Process(context.Background(), r)
	row := w.row(t, r.Key())
	if row.State != ledger.StateUncertain || !row.Indexed() {
		t.Fatalf("after the redelivery (%s: %s) the row is %s, indexed %v; want UNCERTAIN in the attention index", res.Disposition, res.Reason, row.State, row.Indexed())
	}
	if errors.Is(res.Err, ledger.ErrFencingLost) || len(w.twilio.Messages()) != 0 {
		t.Errorf("result %+v, twilio holds %d; want nothing sent", res, len(w.twilio.Messages()))
	}
}

// TestProviderSwitchAfterAnAmbiguousAttemptThroughAProviderThatDropsRepeats:
// the http provider accepted the message and the answer was lost. A
// repeat through http is harmless, so the attempt used to be released;
// but a release says nothing was sent, and after a switch to Twilio the
// redelivery sent the message again through Twilio. The attempt is
// UNCERTAIN instead, and it is settled only through http.
func TestProviderSwitchAfterAnAmbiguousAttemptThroughAProviderThatDropsRepeats(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	r := req("evt-switch-idempotent")
	w.sim.AddFault(simulator.Fault{Kind: simulator.FaultTimeoutAfterAccept, Count: 1})
	w.sender(t, w.http).Process(context.Background(), r)
	if w.sim.Delivered(r.Key()) != 1 {
		t.Fatal("the simulator did not accept the first attempt")
	}
	// The deployment now sends SMS through Twilio.
	w.clock.Advance(time.Minute + settleTime)
	w.sender(t, w.tw).Process(context.Background(), r)
	w.run(t, w.reconciler(t, w.tw))
	if n := len(w.twilio.Messages()); n != 0 {
		t.Fatalf("twilio holds %d messages of one http already accepted: sent twice", n)
	}
	// Back on http: settled by its lookup.
	w.run(t, w.reconciler(t, w.http))
	if row := w.row(t, r.Key()); row.State != ledger.StateSent || w.sim.Delivered(r.Key()) != 1 {
		t.Errorf("row %s, http delivered %d; want SENT, delivered once", row.State, w.sim.Delivered(r.Key()))
	}
}
