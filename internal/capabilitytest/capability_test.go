package capabilitytest_test

// Each test sends through the real sender (and, where the path needs it,
// the real reconciler) with a real adapter talking to a real or faithful
// provider, and asserts the provider's ground truth exactly: a regression
// that sends twice, or never, fails here.

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/mail"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/smithy-go"

	"github.com/sendonce/sendonce/internal/dispatch"
	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/ledger/dynamoledger"
	"github.com/sendonce/sendonce/internal/provider/httpprovider"
	"github.com/sendonce/sendonce/internal/provider/simulator"
	"github.com/sendonce/sendonce/internal/provider/smtpprovider"
	"github.com/sendonce/sendonce/internal/provider/smtpprovider/smtptest"
	"github.com/sendonce/sendonce/internal/provider/snsprovider"
	"github.com/sendonce/sendonce/internal/provider/twilio"
	"github.com/sendonce/sendonce/internal/provider/twilio/twiliotest"
	"github.com/sendonce/sendonce/internal/reconcile"
	"github.com/sendonce/sendonce/internal/render/rendertest"
	"github.com/sendonce/sendonce/internal/sender"
	"github.com/sendonce/sendonce/internal/testenv"
	"github.com/sendonce/sendonce/internal/testsupport"
	"github.com/sendonce/sendonce/notify"
	"github.com/sendonce/sendonce/provider"
)

const (
	// adapterTimeout is each adapter's own call timeout: the stalled
	// providers below never answer, so every ambiguous case costs this.
	adapterTimeout = 400 * time.Millisecond
	// providerTimeout is the sender's and reconciler's bound on one call.
	providerTimeout = time.Second
	settle          = time.Minute
	phone           = "+15551234567"
	emailAddr       = "ana@example.com"
	smtpFrom        = "notify@sendonce.example"
	smtpDomain      = "sendonce.example"
)

var quiet = slog.New(slog.DiscardHandler)

// bundle is one test's ledger (a fresh table on DynamoDB Local) and the
// clock the ledger, sender and reconciler share.
type bundle struct {
	ledger *dynamoledger.Ledger
	clock  *testsupport.Clock
}

func setup(t *testing.T) *bundle {
	t.Helper()
	b := &bundle{clock: testsupport.NewClock(time.Now().UTC())}
	db := testenv.DynamoDB(t)
	var err error
	if b.ledger, err = dynamoledger.New(db, testenv.NewTable(t, db), dynamoledger.Config{Now: b.clock.Now}); err != nil {
		t.Fatal(err)
	}
	return b
}

func (b *bundle) sender(t *testing.T, channel string, p provider.Adapter) *sender.Sender {
	t.Helper()
	return b.senderWithTimeout(t, channel, p, providerTimeout)
}

// senderWithTimeout is sender with another provider timeout, for a path
// whose only provider call must not time out on a loaded machine.
func (b *bundle) senderWithTimeout(t *testing.T, channel string, p provider.Adapter, timeout time.Duration) *sender.Sender {
	t.Helper()
	s, err := sender.New(sender.Config{
		Dispatcher: testsupport.Dispatcher(t, dispatch.Dispatcher{
			Ledger:          b.ledger,
			Providers:       map[string]provider.Adapter{channel: p},
			Renderer:        rendertest.Examples(t, "acme"),
			Logger:          quiet,
			ProviderTimeout: timeout,
			ClaimTimeout:    time.Minute,
			Settle:          settle,
			Now:             b.clock.Now,
		}),
		DeadLetters: noDeadLetters{t},
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (b *bundle) reconciler(t *testing.T, channel string, p provider.Adapter) *reconcile.Reconciler {
	t.Helper()
	r, err := reconcile.New(reconcile.Config{
		Dispatcher: testsupport.Dispatcher(t, dispatch.Dispatcher{
			Ledger:          b.ledger,
			Renderer:        rendertest.Examples(t, "acme"),
			Providers:       map[string]provider.Adapter{channel: p},
			Logger:          quiet,
			ProviderTimeout: providerTimeout,
			ClaimTimeout:    time.Minute,
			Settle:          settle,
			Now:             b.clock.Now,
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// run runs the reconciler once and checks it examined exactly one row and
// took want on it.
func (b *bundle) run(t *testing.T, r *reconcile.Reconciler, want reconcile.Action) {
	t.Helper()
	rep, err := r.Run(context.Background())
	if err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	if rep.Examined != 1 || rep.Actions[want] != 1 {
		t.Fatalf("reconcile examined %d rows with actions %v, want 1 row and action %s", rep.Examined, rep.Actions, want)
	}
}

func (b *bundle) row(t *testing.T, key string) ledger.Record {
	t.Helper()
	r, err := b.ledger.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("ledger get %s: %v", key, err)
	}
	return r
}

func (b *bundle) wantState(t *testing.T, key string, want ledger.State) ledger.Record {
	t.Helper()
	r := b.row(t, key)
	if r.State != want {
		t.Fatalf("row state = %s (reason %q), want %s", r.State, r.Reason, want)
	}
	return r
}

// noDeadLetters fails the test if a valid request is dead-lettered.
type noDeadLetters struct{ t *testing.T }

func (d noDeadLetters) Put(_ context.Context, _ events.SQSMessage, err *notify.InvalidError) error {
	d.t.Errorf("request dead-lettered: %v", err)
	return nil
}

func request(channel notify.Channel, class notify.Class) notify.Request {
	id := testenv.RandomID()
	return notify.Request{
		TenantID: "acme", EventID: "evt_" + id, Channel: channel, Template: "order_shipped",
		Recipient: notify.Recipient{ID: "user-42", Phone: phone, Email: emailAddr},
		Class:     class, Data: map[string]any{"order_id": "A-" + id},
	}
}

func process(t *testing.T, s *sender.Sender, r notify.Request, want dispatch.Disposition) {
	t.Helper()
	if res := s.Process(context.Background(), r); res.Disposition != want {
		t.Fatalf("Process = %s (%s), want %s", res.Disposition, res.Reason, want)
	}
}

// TestIdempotentSends: the simulator accepts, then never answers. The
// attempt is ambiguous, so the row is UNCERTAIN (never released: only a
// repeat through this provider is harmless). The reconciler cannot look
// it up (the lookup fails), but the adapter promises idempotent sends, so
// it repeats the send with the same Idempotency-Key, which the provider
// answers with the original message.
func TestIdempotentSends(t *testing.T) {
	t.Parallel()
	b := setup(t)
	sim, url := testsupport.Simulator(t, simulator.Options{Token: "tok"})
	p, err := httpprovider.New(httpprovider.Config{BaseURL: url, Token: "tok", Timeout: adapterTimeout, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if !p.Capabilities().IdempotentSends {
		t.Fatal("the http adapter no longer promises idempotent sends: this test no longer covers that path")
	}
	s := b.sender(t, "sms", p)
	r := request(notify.ChannelSMS, notify.ClassTransactional)
	key := r.Key()
	sim.AddFault(simulator.Fault{Kind: simulator.FaultTimeoutAfterAccept, Reference: key, Count: 1})

	process(t, s, r, dispatch.Uncertain)
	row := b.wantState(t, key, ledger.StateUncertain)
	if row.Released || row.Attempts != 1 {
		t.Errorf("after the timeout: released %v, attempts %d; want not released after 1 attempt", row.Released, row.Attempts)
	}
	if got := sim.Delivered(key); got != 1 {
		t.Fatalf("after the timeout the simulator delivered %d, want 1 (it accepted before hanging)", got)
	}

	sim.AddFault(simulator.Fault{Kind: simulator.FaultStatus, Op: simulator.OpLookup, Status: 503, Count: 1})
	b.run(t, b.reconciler(t, "sms", p), reconcile.ActionResent)
	msgs := sim.Messages()
	if len(msgs) != 1 {
		t.Fatalf("simulator accepted %d messages, want 1", len(msgs))
	}
	row = b.wantState(t, key, ledger.StateSent)
	if row.ProviderMessageID != msgs[0].ID || row.Attempts != 2 {
		t.Errorf("row: provider id %q after %d attempts, want %q after 2", row.ProviderMessageID, row.Attempts, msgs[0].ID)
	}
	if got := sim.Delivered(key); got != 1 {
		t.Errorf("delivered %d, want 1", got)
	}
	if msgs[0].IdempotencyKey != key || msgs[0].Reference != key {
		t.Errorf("message carried Idempotency-Key %q, reference %q; want the key %s", msgs[0].IdempotencyKey, msgs[0].Reference, key)
	}
	st := sim.Stats()
	if st.Sends != 2 || st.Accepted != 1 || st.DuplicatesSuppressed != 1 || st.Faults[simulator.FaultTimeoutAfterAccept] != 1 {
		t.Errorf("stats: %d sends, %d accepted, %d duplicates suppressed, %d timeouts after accept; want 2, 1, 1, 1",
			st.Sends, st.Accepted, st.DuplicatesSuppressed, st.Faults[simulator.FaultTimeoutAfterAccept])
	}
}

// TestLookupByReference: Twilio takes no key, so a timeout is UNCERTAIN;
// the reconciler lists Twilio's messages (recipient, body, time) before it
// decides, and resends only what Twilio never accepted, once settled.
func TestLookupByReference(t *testing.T) {
	t.Parallel()
	type run struct {
		advance time.Duration
		want    reconcile.Action
		state   ledger.State
		count   int
	}
	tests := []struct {
		name  string
		fault twiliotest.Fault
		// callback: Twilio's status callback (its URL carries the key)
		// reached the webhook, which recorded the SID in the row.
		callback bool
		// accepted is how many messages Twilio holds after the sender.
		accepted int
		runs     []run
		creates  int
	}{
		{
			name: "AcceptedThenTimedOut", fault: twiliotest.Fault{AcceptThenHang: true}, callback: true, accepted: 1,
			runs:    []run{{settle + time.Second, reconcile.ActionReconciledSent, ledger.StateSent, 1}},
			creates: 1,
		},
		{
			// Without a callback the listed message may be another one with
			// the same text: unproven, so the class policy decides
			// (transactional: abandon).
			name: "AcceptedThenTimedOutNoCallback", fault: twiliotest.Fault{AcceptThenHang: true}, accepted: 1,
			runs:    []run{{settle + time.Second, reconcile.ActionAbandoned, ledger.StateAbandoned, 1}},
			creates: 1,
		},
		{
			name: "TimedOutBeforeAccepting", fault: twiliotest.Fault{HangBeforeAccept: true}, accepted: 0,
			runs: []run{
				// "No record" is not trusted before settle: nothing is resent.
				{time.Second, reconcile.ActionWaiting, ledger.StateUncertain, 0},
				{settle, reconcile.ActionResent, ledger.StateSent, 1},
			},
			creates: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			fake := twiliotest.New(t)
			fake.SetNow(b.clock.Now)
			p, err := twilio.New(twilio.Config{BaseURL: fake.URL, AccountSID: fake.AccountSID, AuthToken: fake.AuthToken,
				From: "+15550001111", Timeout: adapterTimeout, Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			if c := p.Capabilities(); c.IdempotentSends || !c.LookupByReference {
				t.Fatalf("twilio capabilities = %+v: this test covers lookup without idempotent sends", c)
			}
			s := b.sender(t, "sms", p)
			r := request(notify.ChannelSMS, notify.ClassTransactional)
			key := r.Key()
			fake.Fail(tt.fault)

			process(t, s, r, dispatch.Uncertain)
			b.wantState(t, key, ledger.StateUncertain)
			body := renderSMS(t, r) // the row holds the render inputs
			if got := fake.Count(phone, body); got != tt.accepted {
				t.Fatalf("after the send twilio holds %d copies, want %d", got, tt.accepted)
			}
			process(t, s, r, dispatch.OwnedByReconciler)
			if tt.callback {
				sid := fake.Messages()[0].SID
				if _, err := b.ledger.ApplyDelivery(context.Background(), key, ledger.Delivery{Status: "sent", Rank: 2, At: b.clock.Now(), ProviderMessageID: sid}); err != nil {
					t.Fatal(err)
				}
			}

			rec := b.reconciler(t, "sms", p)
			for i, rn := range tt.runs {
				b.clock.Advance(rn.advance)
				b.run(t, rec, rn.want)
				row := b.wantState(t, key, rn.state)
				if got := fake.Count(phone, body); got != rn.count {
					t.Fatalf("run %d: twilio holds %d copies of the message, want %d", i+1, got, rn.count)
				}
				if rn.state == ledger.StateSent {
					msgs := fake.Messages()
					if row.ProviderMessageID != msgs[len(msgs)-1].SID {
						t.Errorf("row provider id = %q, want Twilio's SID %q", row.ProviderMessageID, msgs[len(msgs)-1].SID)
					}
				}
			}
			if creates, _ := fake.Requests(); creates != tt.creates {
				t.Errorf("twilio got %d create requests, want %d", creates, tt.creates)
			}
		})
	}
}

// wantHeaders checks that every received message carries the key's
// Message-ID and key header.
func wantHeaders(t *testing.T, msgs []smtptest.Message, key string) {
	t.Helper()
	for i, msg := range msgs {
		m, err := mail.ReadMessage(bytes.NewReader(msg.Data))
		if err != nil {
			t.Fatalf("message %d: %v", i+1, err)
		}
		if got, want := m.Header.Get("Message-ID"), "<"+key+"@"+smtpDomain+">"; got != want {
			t.Errorf("message %d: Message-ID = %q, want %q", i+1, got, want)
		}
		if got := m.Header.Get(smtpprovider.KeyHeader); got != key {
			t.Errorf("message %d: %s = %q, want %q", i+1, smtpprovider.KeyHeader, got, key)
		}
	}
}

// TestNeitherSMTP: the relay reads the whole message and never gives the
// final reply. SMTP takes no key and cannot be asked, so the sender marks
// UNCERTAIN (not FAILED, no blind resend) and the class decides.
func TestNeitherSMTP(t *testing.T) {
	t.Parallel()
	tests := []struct {
		class notify.Class
		want  reconcile.Action
		state ledger.State
		// received is how many copies the relay holds in the end.
		received int
	}{
		{notify.ClassMarketing, reconcile.ActionAbandoned, ledger.StateAbandoned, 1},
		// otp's documented policy: a duplicate code beats a missing one.
		// The copy carries the same Message-ID, so it is recognisable.
		{notify.ClassOTP, reconcile.ActionResent, ledger.StateSent, 2},
		{notify.ClassTransactional, reconcile.ActionAbandoned, ledger.StateAbandoned, 1},
	}
	for _, tt := range tests {
		t.Run(string(tt.class), func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			relay := smtptest.New(t, smtptest.Options{Stall: 1})
			p, err := smtpprovider.New(smtpprovider.Config{Host: "127.0.0.1", Port: relay.Port, TLS: smtpprovider.TLSNone,
				From: smtpFrom, Timeout: adapterTimeout, Now: b.clock.Now, Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			if c := p.Capabilities(); c.IdempotentSends || c.LookupByReference {
				t.Fatalf("smtp capabilities = %+v: this test covers neither", c)
			}
			if _, ok := provider.Adapter(p).(provider.Looker); ok {
				t.Fatal("the smtp adapter implements Looker: this test covers neither")
			}
			s := b.sender(t, "email", p)
			r := request(notify.ChannelEmail, tt.class)
			key := r.Key()

			process(t, s, r, dispatch.Uncertain)
			b.wantState(t, key, ledger.StateUncertain)
			if got := len(relay.Messages()); got != 1 {
				t.Fatalf("after the send the relay holds %d messages, want 1", got)
			}
			process(t, s, r, dispatch.OwnedByReconciler)
			if got := len(relay.Messages()); got != 1 {
				t.Fatalf("after the redelivery the relay holds %d messages, want 1", got)
			}

			b.clock.Advance(time.Second)
			b.run(t, b.reconciler(t, "email", p), tt.want)
			row := b.wantState(t, key, tt.state)
			msgs := relay.Messages()
			if len(msgs) != tt.received {
				t.Fatalf("in the end the relay holds %d messages, want %d", len(msgs), tt.received)
			}
			wantHeaders(t, msgs, key)
			if tt.state == ledger.StateSent && row.ProviderMessageID != key+"@"+smtpDomain {
				t.Errorf("row provider id = %q, want the Message-ID %s@%s", row.ProviderMessageID, key, smtpDomain)
			}
			// Nothing is left for a later run.
			b.clock.Advance(time.Second)
			if rep, err := b.reconciler(t, "email", p).Run(context.Background()); err != nil || rep.Examined != 0 {
				t.Errorf("second reconcile examined %d rows (%v), want 0", rep.Examined, err)
			}
		})
	}
}

// motoSMS is an SMS moto_server recorded.
type motoSMS struct {
	Message     string `json:"message"`
	PhoneNumber string `json:"phone_number"`
	MessageID   string `json:"message_id"`
}

// recordedSMS returns the SMS moto_server recorded with body.
func recordedSMS(t *testing.T, moto, body string) []motoSMS {
	t.Helper()
	resp, err := http.Get(moto + "/moto-api/data.json")
	if err != nil {
		t.Fatalf("read moto data: %v", err)
	}
	defer resp.Body.Close()
	var data struct {
		SNS struct {
			SMS []motoSMS `json:"SMS"`
		} `json:"sns"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&data); err != nil {
		t.Fatalf("decode moto data: %v", err)
	}
	var out []motoSMS
	for _, s := range data.SNS.SMS {
		if s.Message == body {
			out = append(out, s)
		}
	}
	return out
}

// acceptThenTimeout publishes through moto, then withholds the answer
// until the caller's deadline passes: the SMS went out, the caller cannot
// know.
type acceptThenTimeout struct{ next snsprovider.Publisher }

func (a acceptThenTimeout) Publish(ctx context.Context, in *sns.PublishInput, optFns ...func(*sns.Options)) (*sns.PublishOutput, error) {
	// The publish itself completes whatever the caller's deadline (a slow
	// moto on a loaded machine must not turn "accepted" into "never sent").
	if _, err := a.next.Publish(context.WithoutCancel(ctx), in, optFns...); err != nil {
		return nil, err
	}
	<-ctx.Done()
	return nil, &smithy.OperationError{ServiceID: "SNS", OperationName: "Publish", Err: ctx.Err()}
}

// TestNeitherSNS: SNS takes no key and cannot be asked. A normal send is
// SENT with moto's message id; an ambiguous one is UNCERTAIN with exactly
// the one SMS moto recorded, and is not sent again.
func TestNeitherSNS(t *testing.T) {
	t.Parallel()
	moto := testenv.MotoEndpoint(t)
	client := sns.NewFromConfig(testenv.Config(), func(o *sns.Options) { o.BaseEndpoint = aws.String(moto) })
	// moto's first SNS call loads the service (seen here: up to seconds on
	// a loaded machine), longer than the provider timeouts below: warm it.
	if _, err := client.ListTopics(context.Background(), &sns.ListTopicsInput{}); err != nil {
		t.Fatalf("warm moto SNS: %v", err)
	}

	t.Run("Accepted", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p, err := snsprovider.New(snsprovider.Config{Client: client, Timeout: 5 * time.Second, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		r := request(notify.ChannelSMS, notify.ClassTransactional)
		key := r.Key()
		s := b.senderWithTimeout(t, "sms", p, 10*time.Second)
		// A final row drops the rendered body: render it as the sender does.
		body := renderSMS(t, r)

		process(t, s, r, dispatch.Sent)
		row := b.wantState(t, key, ledger.StateSent)
		got := recordedSMS(t, moto, body)
		if len(got) != 1 {
			t.Fatalf("moto recorded %d SMS with the body, want 1", len(got))
		}
		if got[0].PhoneNumber != phone || got[0].MessageID == "" || got[0].MessageID != row.ProviderMessageID {
			t.Errorf("moto recorded %+v; want number %s and message id %q (the row's)", got[0], phone, row.ProviderMessageID)
		}
		process(t, s, r, dispatch.Duplicate)
		if got := recordedSMS(t, moto, body); len(got) != 1 {
			t.Errorf("after a redelivery moto recorded %d SMS, want 1", len(got))
		}
	})

	t.Run("AcceptedThenTimedOut", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p, err := snsprovider.New(snsprovider.Config{Client: acceptThenTimeout{client}, Timeout: adapterTimeout, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		if c := p.Capabilities(); c.IdempotentSends || c.LookupByReference {
			t.Fatalf("sns capabilities = %+v: this test covers neither", c)
		}
		r := request(notify.ChannelSMS, notify.ClassTransactional)
		key := r.Key()
		s := b.sender(t, "sms", p)

		process(t, s, r, dispatch.Uncertain)
		b.wantState(t, key, ledger.StateUncertain)
		body := renderSMS(t, r) // the row holds the render inputs
		if got := recordedSMS(t, moto, body); len(got) != 1 || got[0].PhoneNumber != phone {
			t.Fatalf("moto recorded %v, want exactly 1 SMS to %s", got, phone)
		}
		process(t, s, r, dispatch.OwnedByReconciler)
		// transactional through a provider that drops no repeats: abandon.
		b.clock.Advance(time.Second)
		b.run(t, b.reconciler(t, "sms", p), reconcile.ActionAbandoned)
		b.wantState(t, key, ledger.StateAbandoned)
		if got := recordedSMS(t, moto, body); len(got) != 1 {
			t.Errorf("in the end moto recorded %d SMS, want 1", len(got))
		}
	})
}

// renderSMS renders r's SMS text as the sender does.
func renderSMS(t *testing.T, r notify.Request) string {
	t.Helper()
	m, err := rendertest.Examples(t, r.TenantID).RenderRequest(t.Context(), r)
	if err != nil {
		t.Fatal(err)
	}
	return m.Body
}
