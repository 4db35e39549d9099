package lambdaprovider_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sendonce/sendonce/internal/dispatch"
	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/ledger/dynamoledger"
	"github.com/sendonce/sendonce/internal/provider/lambdaprovider"
	"github.com/sendonce/sendonce/internal/provider/simulator"
	"github.com/sendonce/sendonce/internal/reconcile"
	"github.com/sendonce/sendonce/internal/render/rendertest"
	"github.com/sendonce/sendonce/internal/rie"
	"github.com/sendonce/sendonce/internal/sender"
	"github.com/sendonce/sendonce/internal/templates"
	"github.com/sendonce/sendonce/internal/templates/dynamotemplates"
	"github.com/sendonce/sendonce/internal/testenv"
	"github.com/sendonce/sendonce/internal/testsupport"
	"github.com/sendonce/sendonce/notify"
	"github.com/sendonce/sendonce/provider"
)

// The end-to-end tests run the example function (examples/lambda-provider)
// as a real bootstrap under the Lambda Runtime Interface Emulator, as the
// provider of a channel of the real sender and reconciler, over a ledger
// on DynamoDB Local. The function forwards to the provider simulator,
// whose deliveries are the ground truth.

const (
	example  = "./examples/lambda-provider"
	simToken = "e2e-token"
	settle   = time.Minute
)

var quiet = slog.New(slog.DiscardHandler)

// stack is one case's world: the simulator, the example function under
// the emulator (behind the serialising proxy), a fresh ledger table and a
// clock the ledger, sender and reconciler share.
type stack struct {
	sim    *simulator.Simulator
	fn     *emulated
	table  string
	ledger *dynamoledger.Ledger
	clock  *testsupport.Clock
}

func newStack(t *testing.T) *stack {
	t.Helper()
	s := &stack{clock: testsupport.NewClock(time.Now().UTC())}
	var simURL string
	s.sim, simURL = testsupport.Simulator(t, simulator.Options{Token: simToken})
	s.fn = startFunction(t, example, map[string]string{
		"HTTP_PROVIDER_URL": simURL, "HTTP_PROVIDER_TOKEN": simToken, "AWS_LAMBDA_FUNCTION_TIMEOUT": "5",
	})
	db := testenv.DynamoDB(t)
	s.table = testenv.NewTable(t, db)
	var err error
	if s.ledger, err = dynamoledger.New(db, s.table, dynamoledger.Config{Now: s.clock.Now}); err != nil {
		t.Fatal(err)
	}
	return s
}

// adapter returns the lambda adapter of the example function with the
// declared capabilities and call timeout.
func (s *stack) adapter(t *testing.T, caps provider.Capabilities, timeout time.Duration) provider.Adapter {
	t.Helper()
	return setup(t, s.fn.URL, lambdaprovider.Config{Function: emulatorName, Idempotent: caps.IdempotentSends,
		Lookup: caps.LookupByReference, Timeout: timeout}).p
}

func (s *stack) sender(t *testing.T, channel string, p provider.Adapter) *sender.Sender {
	t.Helper()
	snd, err := sender.New(sender.Config{
		Dispatcher: testsupport.Dispatcher(t, dispatch.Dispatcher{
			Ledger:          s.ledger,
			Providers:       map[string]provider.Adapter{channel: p},
			Renderer:        rendertest.Examples(t, "acme"),
			Logger:          quiet,
			ProviderTimeout: 20 * time.Second,
			ClaimTimeout:    time.Minute,
			Settle:          settle,
			Now:             s.clock.Now,
		}),
		DeadLetters: noDeadLetters{t},
	})
	if err != nil {
		t.Fatal(err)
	}
	return snd
}

func (s *stack) reconciler(t *testing.T, channel string, p provider.Adapter) *reconcile.Reconciler {
	t.Helper()
	r, err := reconcile.New(reconcile.Config{
		Dispatcher: testsupport.Dispatcher(t, dispatch.Dispatcher{
			Ledger:          s.ledger,
			Renderer:        rendertest.Examples(t, "acme"),
			Providers:       map[string]provider.Adapter{channel: p},
			Logger:          quiet,
			ProviderTimeout: 20 * time.Second,
			ClaimTimeout:    time.Minute,
			Settle:          settle,
			Now:             s.clock.Now,
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (s *stack) row(t *testing.T, key string) ledger.Record {
	t.Helper()
	r, err := s.ledger.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("ledger get: %v", err)
	}
	return r
}

type noDeadLetters struct{ t *testing.T }

func (d noDeadLetters) Put(_ context.Context, _ events.SQSMessage, err *notify.InvalidError) error {
	d.t.Errorf("request dead-lettered: %v", err)
	return nil
}

func notification(channel notify.Channel, class notify.Class) notify.Request {
	id := testenv.RandomID()
	return notify.Request{
		TenantID: "acme", EventID: "evt_" + id, Channel: channel, Template: "order_shipped",
		Recipient: notify.Recipient{ID: "user-42", Phone: phone, Email: "ana@example.com"},
		Class:     class, Data: map[string]any{"order_id": "A-" + id},
	}
}

// Declared capabilities.
var (
	idempotent = provider.Capabilities{IdempotentSends: true}
	both       = provider.Capabilities{IdempotentSends: true, LookupByReference: true}
	lookupOnly = provider.Capabilities{LookupByReference: true}
	neither    = provider.Capabilities{}
)

// TestEndToEnd: each fault, under each declaration of the function's
// capabilities. An ambiguous outcome is recorded UNCERTAIN whatever the
// declaration; then, where the function is declared to drop repeats, the
// reconciler repeats the send with the same key (the gateway drops it);
// where it is declared to look up, the reconciler asks it: either way the
// message is delivered exactly once. Where it is declared neither, the
// class decides (transactional: abandoned, never sent twice). A retry
// answer (nothing sent) is retried by the redelivery.
func TestEndToEnd(t *testing.T) {
	t.Parallel()
	hangAfterAccept := &simulator.Fault{Kind: simulator.FaultTimeoutAfterAccept, Hang: 2500 * time.Millisecond, Count: 1}
	tests := []struct {
		name  string
		caps  provider.Capabilities
		fault *simulator.Fault
		// timeout is the adapter's; the function itself answers later.
		timeout time.Duration
		// first is what the sender's first attempt ends in; then either
		// the redelivery (second) or the reconciler (recon) settles it.
		first  dispatch.Disposition
		second dispatch.Disposition
		recon  reconcile.Action
		final  ledger.State
		// sends is how many sends reached the gateway (a repeat of the key
		// among them is dropped there); delivered is how many messages
		// the simulator holds.
		sends     int
		delivered int
		reason    string
		// why is in the first attempt's reason: the fault as the adapter
		// saw it.
		why string
	}{
		{name: "Delivered", caps: neither, first: dispatch.Sent, final: ledger.StateSent, delivered: 1, sends: 1},

		// The function's call to the gateway breaks after the gateway took
		// the message: the function fails, the adapter reads a function
		// error: ambiguous. Through a provider that drops repeats the
		// redelivery settles it (the fast path: a repeat with the same
		// key, after a lookup where it can); otherwise the reconciler.
		{name: "FunctionError/Idempotent", caps: idempotent, fault: &simulator.Fault{Kind: simulator.FaultResetAfterAccept, Count: 1},
			first: dispatch.Uncertain, second: dispatch.Sent, final: ledger.StateSent, delivered: 1, why: "function error", sends: 2},
		{name: "FunctionError/IdempotentAndLookup", caps: both, fault: &simulator.Fault{Kind: simulator.FaultResetAfterAccept, Count: 1},
			first: dispatch.Uncertain, second: dispatch.Sent, final: ledger.StateSent, delivered: 1, why: "function error", sends: 1},
		{name: "FunctionError/LookupOnly", caps: lookupOnly, fault: &simulator.Fault{Kind: simulator.FaultResetAfterAccept, Count: 1},
			first: dispatch.Uncertain, recon: reconcile.ActionReconciledSent, final: ledger.StateSent, delivered: 1, why: "function error", sends: 1},
		{name: "FunctionError/Neither", caps: neither, fault: &simulator.Fault{Kind: simulator.FaultResetAfterAccept, Count: 1},
			first: dispatch.Uncertain, recon: reconcile.ActionAbandoned, final: ledger.StateAbandoned, delivered: 1, why: "function error", sends: 1},

		// The function takes longer than the adapter waits: the gateway
		// took the message and answers late.
		{name: "Timeout/Idempotent", caps: idempotent, fault: hangAfterAccept, timeout: time.Second,
			first: dispatch.Uncertain, second: dispatch.Sent, final: ledger.StateSent, delivered: 1, why: "within the timeout", sends: 2},
		{name: "Timeout/LookupOnly", caps: lookupOnly, fault: hangAfterAccept, timeout: time.Second,
			first: dispatch.Uncertain, recon: reconcile.ActionReconciledSent, final: ledger.StateSent, delivered: 1, why: "within the timeout", sends: 1},
		{name: "Timeout/Neither", caps: neither, fault: hangAfterAccept, timeout: time.Second,
			first: dispatch.Uncertain, recon: reconcile.ActionAbandoned, final: ledger.StateAbandoned, delivered: 1, why: "within the timeout", sends: 1},

		// The gateway refuses for now: the function answers retry (nothing
		// was sent), whatever the declaration.
		{name: "RetryAnswer/Neither", caps: neither, fault: &simulator.Fault{Kind: simulator.FaultStatus, Status: 503, Count: 1},
			first: dispatch.Retry, second: dispatch.Sent, final: ledger.StateSent, delivered: 1, why: "Service Unavailable", sends: 2},
		{name: "RetryAnswer/Idempotent", caps: idempotent, fault: &simulator.Fault{Kind: simulator.FaultStatus, Status: 429, Count: 1},
			first: dispatch.Retry, second: dispatch.Sent, final: ledger.StateSent, delivered: 1, why: "Too Many Requests", sends: 2},

		// The gateway refuses for good: the function answers rejected.
		{name: "Rejected", caps: idempotent, fault: &simulator.Fault{Kind: simulator.FaultStatus, Status: 422},
			first: dispatch.Failed, final: ledger.StateFailed, delivered: 0, reason: "422", sends: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newStack(t)
			timeout := tt.timeout
			if timeout == 0 {
				timeout = 10 * time.Second
			}
			p := s.adapter(t, tt.caps, timeout)
			snd := s.sender(t, "email", p)
			r := notification(notify.ChannelEmail, notify.ClassTransactional)
			key := r.Key()
			if tt.fault != nil {
				f := *tt.fault
				f.Reference = key
				s.sim.AddFault(f)
			}

			res := snd.Process(context.Background(), r)
			if res.Disposition != tt.first || !strings.Contains(res.Reason, tt.why) {
				t.Fatalf("first attempt: %s (%s), want %s with %q", res.Disposition, res.Reason, tt.first, tt.why)
			}
			if tt.first == dispatch.Uncertain || tt.first == dispatch.Retry {
				row := s.row(t, key)
				if want := map[dispatch.Disposition]ledger.State{dispatch.Uncertain: ledger.StateUncertain, dispatch.Retry: ledger.StatePending}[tt.first]; row.State != want {
					t.Fatalf("after the first attempt the row is %s, want %s", row.State, want)
				}
			}
			// A slow invocation still runs in the function: the next one
			// comes later, as a redelivery after the visibility timeout would.
			if !s.fn.idle(15 * time.Second) {
				t.Fatal("the function's invocation never ended")
			}
			if tt.second != 0 {
				if res := snd.Process(context.Background(), r); res.Disposition != tt.second {
					t.Fatalf("redelivery: %s (%s), want %s", res.Disposition, res.Reason, tt.second)
				}
			}
			if tt.recon != "" {
				if res := snd.Process(context.Background(), r); res.Disposition != dispatch.OwnedByReconciler {
					t.Fatalf("redelivery of an UNCERTAIN row: %s, want %s", res.Disposition, dispatch.OwnedByReconciler)
				}
				s.clock.Advance(settle + time.Second)
				rep, err := s.reconciler(t, "email", p).Run(context.Background())
				if err != nil || rep.Examined != 1 || rep.Actions[tt.recon] != 1 {
					t.Fatalf("reconcile: %+v, %v; want one row, action %s", rep, err, tt.recon)
				}
			}
			row := s.row(t, key)
			if row.State != tt.final || !strings.Contains(row.Reason, tt.reason) {
				t.Fatalf("row %s (reason %q), want %s with %q", row.State, row.Reason, tt.final, tt.reason)
			}
			if got := s.sim.Delivered(key); got != tt.delivered {
				t.Errorf("the simulator delivered the message %d times, want %d", got, tt.delivered)
			}
			if st := s.sim.Stats(); st.Sends != tt.sends {
				t.Errorf("the gateway got %d sends (%d repeats dropped), want %d", st.Sends, st.DuplicatesSuppressed, tt.sends)
			}
			if dups := s.sim.Duplicates(); len(dups) != 0 {
				t.Errorf("duplicates at the simulator: %v", dups)
			}
			if tt.final == ledger.StateSent {
				msgs := s.sim.Messages()
				if row.ProviderMessageID != msgs[0].ID {
					t.Errorf("row provider id %q, the simulator's %q", row.ProviderMessageID, msgs[0].ID)
				}
				if msgs[0].HTML == "" || !strings.Contains(msgs[0].HTML, "<strong>") || msgs[0].Subject == "" || msgs[0].Reference != key {
					t.Errorf("the simulator got %+v: want the email's subject and HTML part under the key", msgs[0])
				}
				// Yet another redelivery sends nothing.
				if res := snd.Process(context.Background(), r); res.Disposition != dispatch.Duplicate {
					t.Errorf("late redelivery: %s, want %s", res.Disposition, dispatch.Duplicate)
				}
				if got, st := s.sim.Delivered(key), s.sim.Stats(); got != 1 || st.Sends != tt.sends {
					t.Errorf("after a late redelivery the simulator delivered %d after %d sends, want 1 after %d", got, st.Sends, tt.sends)
				}
			}
		})
	}
}

// TestBootstraps: the real sender and reconciler bootstraps, configured
// only through their environment (SENDONCE_SMS_PROVIDER=lambda, the
// function and its declared capabilities, AWS_ENDPOINT_URL_LAMBDA at the
// emulator), send through the example function. The function fails after
// the gateway took the message: the sender records the attempt UNCERTAIN
// and, the function being declared idempotent, reports the record failed
// (the fast path); the redelivery repeats the send through the function
// with the same key, the gateway drops the repeat, and the row is SENT
// with the first message's id, with nothing left for the reconciler.
func TestBootstraps(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	if _, err := templates.ImportExamples(t.Context(), dynamotemplates.New(testenv.DynamoDB(t), s.table, dynamotemplates.Config{}), "acme"); err != nil {
		t.Fatal(err)
	}
	moto := testenv.MotoEndpoint(t)
	dlq, err := testenv.SQSAt(moto).CreateQueue(t.Context(), &sqs.CreateQueueInput{QueueName: aws.String("lambdaprov-dlq-" + testenv.RandomID())})
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"AWS_LAMBDA_FUNCTION_TIMEOUT":    "60",
		"SENDONCE_TABLE":                 s.table,
		"SENDONCE_SMS_PROVIDER":          "lambda",
		"SENDONCE_SMS_LAMBDA_ARN":        emulatorName,
		"SENDONCE_SMS_LAMBDA_IDEMPOTENT": "true",
		"SENDONCE_PROVIDER_TIMEOUT":      "15s",
		"AWS_ENDPOINT_URL_LAMBDA":        s.fn.URL,
		"AWS_ENDPOINT_URL_DYNAMODB":      testenv.DynamoDBEndpoint(t),
	}
	senderEnv := maps.Clone(env)
	senderEnv["SENDONCE_DLQ_URL"], senderEnv["AWS_ENDPOINT_URL_SQS"] = aws.ToString(dlq.QueueUrl), moto
	snd := rie.Start(t, rie.Build(t, "sender"), senderEnv)
	rec := rie.Start(t, rie.Build(t, "reconciler"), env)

	r := notification(notify.ChannelSMS, notify.ClassTransactional)
	key := r.Key()
	s.sim.AddFault(simulator.Fault{Kind: simulator.FaultResetAfterAccept, Reference: key, Count: 1})
	body, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	event, err := json.Marshal(events.SQSEvent{Records: []events.SQSMessage{{
		MessageId: "m-1", Body: string(body), EventSource: "aws:sqs", AWSRegion: testenv.Region,
		EventSourceARN: "arn:aws:sqs:" + testenv.Region + ":123456789012:notifications",
		Attributes:     map[string]string{"ApproximateReceiveCount": "1"},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	invoke := func(fn *rie.Instance, payload []byte) []byte {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		defer cancel()
		out, err := fn.Invoke(ctx, payload)
		if err != nil {
			t.Fatalf("invoke: %s, %v", out, err)
		}
		return out
	}
	deliver := func() events.SQSEventResponse {
		t.Helper()
		var resp events.SQSEventResponse
		if out := invoke(snd, event); json.Unmarshal(out, &resp) != nil {
			t.Fatalf("sender answered %s", out)
		}
		return resp
	}
	row := func() ledger.Record {
		t.Helper()
		rw, err := s.ledger.Get(t.Context(), key)
		if err != nil {
			t.Fatal(err)
		}
		return rw
	}

	// The function failed after the gateway took the message: UNCERTAIN,
	// pinned to lambda, which drops repeats: the fast path, the record is
	// reported failed for SQS to deliver again.
	if resp := deliver(); len(resp.BatchItemFailures) != 1 {
		t.Fatalf("first delivery: %+v, want the record reported failed (the next receive repeats it)", resp)
	}
	if rw := row(); rw.State != ledger.StateUncertain || rw.Provider != "lambda" {
		t.Fatalf("after the function error the row is %s through %q, want UNCERTAIN through lambda", rw.State, rw.Provider)
	}
	// The redelivery repeats it through the function with the same key:
	// the gateway drops the repeat and answers with the first message.
	if resp := deliver(); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("redelivery: %+v, want the record done", resp)
	}
	rw := row()
	msgs := s.sim.Messages()
	if rw.State != ledger.StateSent || len(msgs) != 1 || rw.ProviderMessageID != msgs[0].ID {
		t.Fatalf("row %s with provider id %q; the gateway holds %+v: want SENT with its one message's id", rw.State, rw.ProviderMessageID, msgs)
	}
	if st := s.sim.Stats(); st.Sends != 2 || st.DuplicatesSuppressed != 1 {
		t.Errorf("the gateway got %d sends, %d repeats dropped; want 2 and 1", st.Sends, st.DuplicatesSuppressed)
	}
	// The reconciler has nothing left to do.
	_, schedule := testsupport.StrictFile[events.EventBridgeEvent](t, "../../../events/schedule.json", "an EventBridge event")
	if sum := testsupport.Strict[reconcile.Summary](t, invoke(rec, schedule), "a run summary"); sum.Examined != 0 {
		t.Fatalf("reconciler run: %+v, want nothing to examine", sum)
	}
	if msgs[0].To != phone || msgs[0].Body == "" {
		t.Errorf("the gateway got %+v, want the rendered sms to %s", msgs[0], phone)
	}
}
