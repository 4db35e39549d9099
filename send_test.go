package sendonce_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sendonce/sendonce"
	"github.com/sendonce/sendonce/internal/redact"
	"github.com/sendonce/sendonce/notify"
	"github.com/sendonce/sendonce/provider"
	"github.com/sendonce/sendonce/provider/providertest"
)

// captured is DeadLetters that keeps what HandleSQS put aside.
type captured struct {
	mu  sync.Mutex
	got []*notify.InvalidError
}

func (c *captured) Put(_ context.Context, _ events.SQSMessage, invalid *notify.InvalidError) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = append(c.got, invalid)
	return nil
}

// outcome is what one path did with one request, in terms both paths
// share: acknowledged or not, the invalid field, the provider's calls and
// the row's state.
type outcome struct {
	Acknowledged bool
	Invalid      string // the field, "-" for a valid request
	Calls        int
	State        sendonce.State // "" when no row
	Reason       string         // the row's reason, up to its first ':'
}

func rowOutcome(t *testing.T, l *sendonce.Ledger, key string, o outcome) outcome {
	t.Helper()
	row, err := l.Get(context.Background(), key)
	switch {
	case errors.Is(err, sendonce.ErrNotFound):
	case err != nil:
		t.Fatalf("Get: %v", err)
	default:
		o.State = row.State
		o.Reason, _, _ = strings.Cut(row.Reason, ":")
	}
	return o
}

func agreementSender(t *testing.T, dl sendonce.DeadLetters) (*sendonce.Sender, *sendonce.Ledger, *providertest.Fake) {
	t.Helper()
	l := sendonce.NewMemoryLedger()
	p := &providertest.Fake{ProviderName: "gw"}
	s, err := sendonce.NewSender(sendonce.SenderConfig{
		Ledger:      l,
		Routes:      sendonce.Routes{notify.ChannelSMS: {p}, notify.ChannelEmail: {p}},
		DeadLetters: dl,
		Validity:    map[notify.Class]time.Duration{notify.ClassOTP: 10 * time.Minute},
	})
	if err != nil {
		t.Fatal(err)
	}
	return s, l, p
}

// TestSendAgreesWithHandleSQS runs the same requests through HandleSQS
// (as a queue record's body, enqueued when the row says) and through Send
// (with the same enqueue time): both validate alike, name the same
// field, count validity from the same instant, call the provider as often
// and leave the same row.
func TestSendAgreesWithHandleSQS(t *testing.T) {
	valid := func(change func(r *notify.Request)) notify.Request {
		r := notify.Request{
			TenantID:  "acme",
			EventID:   "order-1-shipped",
			Channel:   notify.ChannelSMS,
			Template:  "order_shipped",
			Recipient: notify.Recipient{ID: "user-42", Phone: "+15551234567"},
			Content:   &notify.Content{Text: "Your order has shipped."},
		}
		if change != nil {
			change(&r)
		}
		return r
	}
	now := time.Now()
	for _, tc := range []struct {
		name     string
		req      notify.Request
		enqueued time.Time
		want     outcome
	}{
		{"Valid", valid(nil), now, outcome{true, "-", 1, sendonce.StateSent, ""}},
		{"EmptyTenant", valid(func(r *notify.Request) { r.TenantID = "" }), now, outcome{true, "tenant_id", 0, "", ""}},
		{"UnknownClass", valid(func(r *notify.Request) { r.Class = "urgent" }), now, outcome{true, "class", 0, "", ""}},
		{"ShortPhone", valid(func(r *notify.Request) { r.Recipient.Phone = "12345" }), now, outcome{true, "recipient.phone", 0, "", ""}},
		{"SubjectOnSMS", valid(func(r *notify.Request) { r.Content.Subject = "Hi" }), now, outcome{true, "content.subject", 0, "", ""}},
		{"NoEventID", valid(func(r *notify.Request) { r.EventID = "" }), now, outcome{true, "event_id", 0, "", ""}},
		{"BadExpiresAt", valid(func(r *notify.Request) { r.ExpiresAt = "tomorrow" }), now, outcome{true, "expires_at", 0, "", ""}},
		{"EmailWithoutAddress", valid(func(r *notify.Request) { r.Channel, r.Content.Subject = notify.ChannelEmail, "Shipped" }), now, outcome{true, "recipient.email", 0, "", ""}},
		{"OTPEnqueuedAnHourAgo", valid(func(r *notify.Request) { r.Class = notify.ClassOTP }), now.Add(-time.Hour), outcome{true, "-", 0, sendonce.StateFailed, "expired"}},
		{"OTPEnqueuedAMinuteAgo", valid(func(r *notify.Request) { r.Class = notify.ClassOTP }), now.Add(-time.Minute), outcome{true, "-", 1, sendonce.StateSent, ""}},
		{"ExpiresAtPassed", valid(func(r *notify.Request) { r.ExpiresAt = now.Add(-time.Minute).UTC().Format(time.RFC3339) }), now, outcome{true, "-", 0, sendonce.StateFailed, "expired"}},
		{"NoRoute", valid(func(r *notify.Request) {
			r.Channel, r.Recipient.PushTarget, r.Recipient.Phone = notify.ChannelPush, "arn:aws:sns:us-east-1:1:endpoint/GCM/app/1", ""
		}), now, outcome{false, "-", 0, sendonce.StatePending, "config"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			body, err := json.Marshal(tc.req) // not Body(): it refuses what is invalid
			if err != nil {
				t.Fatal(err)
			}

			dl := &captured{}
			s, l, p := agreementSender(t, dl)
			resp, _ := s.HandleSQS(ctx, events.SQSEvent{Records: []events.SQSMessage{{
				MessageId: "m1", Body: string(body),
				Attributes: map[string]string{"SentTimestamp": strconv.FormatInt(tc.enqueued.UnixMilli(), 10)},
			}}})
			viaSQS := outcome{Acknowledged: len(resp.BatchItemFailures) == 0, Invalid: "-", Calls: p.Calls()}
			if len(dl.got) > 0 {
				viaSQS.Invalid = dl.got[0].Field
			}
			viaSQS = rowOutcome(t, l, tc.req.Key(), viaSQS)

			s, l, p = agreementSender(t, nil)
			res := s.Send(ctx, tc.req, tc.enqueued)
			viaSend := outcome{Acknowledged: res.Disposition != sendonce.Retry, Invalid: "-", Calls: p.Calls()}
			if res.Disposition == sendonce.Invalid {
				if res.Invalid == nil {
					t.Fatalf("Send: %+v: Invalid without Result.Invalid", res)
				}
				viaSend.Invalid = res.Invalid.Field
				if !strings.Contains(res.Reason, res.Invalid.Reason) {
					t.Errorf("Send: Reason %q does not say Invalid.Reason %q", res.Reason, res.Invalid.Reason)
				}
			}
			viaSend = rowOutcome(t, l, tc.req.Key(), viaSend)

			if viaSQS != viaSend {
				t.Errorf("HandleSQS and Send disagree:\n HandleSQS %+v\n Send      %+v (%s: %s)", viaSQS, viaSend, res.Disposition, res.Reason)
			}
			if viaSend != tc.want {
				t.Errorf("Send: %+v, want %+v (%s: %s)", viaSend, tc.want, res.Disposition, res.Reason)
			}
		})
	}
}

// blocking is a provider that accepts a message and then loses the
// caller: it cancels the caller's context while it still holds the call,
// then answers (accepted) or, when lost is set, waits for the context
// and reports the answer lost (ambiguous: it may have gone out).
type blocking struct {
	cancel context.CancelFunc
	lost   bool
	calls  int
}

func (b *blocking) Name() string                        { return "blocking" }
func (b *blocking) Capabilities() provider.Capabilities { return provider.Capabilities{} }
func (b *blocking) Send(ctx context.Context, m provider.Message) (provider.Receipt, error) {
	b.calls++
	b.cancel() // the worker is told to stop while the provider holds the message
	if !b.lost {
		return provider.Receipt{MessageID: "gw-1"}, nil
	}
	<-ctx.Done()
	return provider.Receipt{}, &provider.Error{Kind: provider.Ambiguous, Provider: "blocking", Op: "send", Reason: "answer lost: " + ctx.Err().Error()}
}

// TestSendRecordsOutcomeAfterCancel: the caller's context is cancelled
// while the provider holds the message. The outcome is recorded anyway:
// the row is SENT (the answer came) or UNCERTAIN (it did not), never
// PENDING, held until its lease passes.
func TestSendRecordsOutcomeAfterCancel(t *testing.T) {
	for _, tc := range []struct {
		name  string
		lost  bool
		want  sendonce.Disposition
		state sendonce.State
	}{
		{"AcceptedThenCancelled", false, sendonce.Sent, sendonce.StateSent},
		{"CancelledDuringTheCall", true, sendonce.Uncertain, sendonce.StateUncertain},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			p := &blocking{cancel: cancel, lost: tc.lost}
			l := sendonce.NewMemoryLedger()
			s, err := sendonce.NewSender(sendonce.SenderConfig{Ledger: l, Routes: sendonce.Routes{notify.ChannelSMS: {p}}})
			if err != nil {
				t.Fatal(err)
			}
			req := orderShipped()
			res := s.Send(ctx, req, time.Time{})
			if res.Disposition != tc.want || res.Provider != "blocking" {
				t.Errorf("Send = %+v, want %s through blocking", res, tc.want)
			}
			row, err := l.Get(context.Background(), req.Key())
			if err != nil {
				t.Fatal(err)
			}
			if row.State != tc.state {
				t.Errorf("row %s (%s), want %s: the outcome of a call that reached the provider is lost", row.State, row.Reason, tc.state)
			}
			if p.calls != 1 {
				t.Errorf("provider called %d times, want 1", p.calls)
			}
		})
	}
}

// TestSendAlreadyCancelled: a context done before Send claims nothing,
// calls no provider, and logs no error (it is not one: the message is
// delivered again).
func TestSendAlreadyCancelled(t *testing.T) {
	var logs bytes.Buffer
	l := sendonce.NewMemoryLedger()
	p := &providertest.Fake{}
	s, err := sendonce.NewSender(sendonce.SenderConfig{Ledger: l, Routes: sendonce.Routes{notify.ChannelSMS: {p}},
		Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req := orderShipped()
	if res := s.Send(ctx, req, time.Time{}); res.Disposition != sendonce.Retry {
		t.Errorf("Send with a cancelled context = %+v, want retry", res)
	}
	if n := strings.Count(logs.String(), `"level":"ERROR"`); n != 0 {
		t.Errorf("%d ERROR lines for a cancelled context:\n%s", n, logs.String())
	}
	if _, err := l.Get(context.Background(), req.Key()); !errors.Is(err, sendonce.ErrNotFound) {
		t.Errorf("Get after a cancelled Send: %v, want no row", err)
	}
	if p.Calls() != 0 {
		t.Errorf("provider called %d times", p.Calls())
	}
}

// TestSendBudget: a deadline shorter than a step's longest path is
// refused by NewSender rather than answered Retry forever; with a ledger
// margin that fits, a 3 s deadline sends.
func TestSendBudget(t *testing.T) {
	p := &providertest.Fake{}
	routes := sendonce.Routes{notify.ChannelSMS: {p}}
	_, err := sendonce.NewSender(sendonce.SenderConfig{Ledger: sendonce.NewMemoryLedger(), Routes: routes, SendTimeout: 3 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "SendTimeout 3s") {
		t.Errorf("NewSender with a 3s SendTimeout and the default timings: %v, want it refused", err)
	}
	s, err := sendonce.NewSender(sendonce.SenderConfig{Ledger: sendonce.NewMemoryLedger(), Routes: routes,
		ProviderTimeout: time.Second, LedgerMargin: 500 * time.Millisecond, SendTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if res := s.Send(ctx, orderShipped(), time.Time{}); res.Disposition != sendonce.Sent {
		t.Errorf("Send with a 3s deadline, 1s provider timeout and 500ms margin = %+v, want sent", res)
	}
}

// TestSendDuplicateSaysWhatTheFirstRecorded: a Duplicate carries the
// first delivery's provider, its id, and the row.
func TestSendDuplicateSaysWhatTheFirstRecorded(t *testing.T) {
	s, l, _ := agreementSender(t, nil)
	ctx := context.Background()
	req := orderShipped()
	first := s.Send(ctx, req, time.Time{})
	again := s.Send(ctx, req, time.Time{})
	if first.Disposition != sendonce.Sent || again.Disposition != sendonce.Duplicate {
		t.Fatalf("Send twice = %s, %s", first.Disposition, again.Disposition)
	}
	if again.Provider != "gw" || again.ProviderMessageID != first.ProviderMessageID || again.Previous == nil || again.Previous.State != sendonce.StateSent {
		t.Errorf("Duplicate = %+v, want the first delivery's provider gw, id %q and its SENT row", again, first.ProviderMessageID)
	}
	row, err := l.Get(ctx, req.Key())
	if err != nil {
		t.Fatal(err)
	}
	if len(row.Attempts) != 1 || row.Attempts[0].Provider != "gw" || row.Attempts[0].Ended != "sent" {
		t.Errorf("row attempts = %+v, want one through gw, sent", row.Attempts)
	}
}

// TestRedactionKeyAndLoggerInConfig: a Sender's log lines go to its own
// logger, and the address tokens in them are made under its own key, not
// the process's default.
func TestRedactionKeyAndLoggerInConfig(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef-deployment")
	var logs bytes.Buffer
	s, err := sendonce.NewSender(sendonce.SenderConfig{Ledger: sendonce.NewMemoryLedger(),
		Routes: sendonce.Routes{notify.ChannelSMS: {&providertest.Fake{}}}, RedactionKey: key,
		Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	req := orderShipped()
	if res := s.Send(context.Background(), req, time.Time{}); res.Disposition != sendonce.Sent {
		t.Fatalf("Send = %+v", res)
	}
	r, err := redact.New(key)
	if err != nil {
		t.Fatal(err)
	}
	if want := r.Address(req.Recipient.Phone); !strings.Contains(logs.String(), want) {
		t.Errorf("no token %s made under the configured key in:\n%s", want, logs.String())
	}
	if strings.Contains(logs.String(), req.Recipient.Phone) || strings.Contains(logs.String(), redact.Address(req.Recipient.Phone)) {
		t.Errorf("the raw address or the process default's token in:\n%s", logs.String())
	}
	if _, err := sendonce.NewSender(sendonce.SenderConfig{Ledger: sendonce.NewMemoryLedger(), RedactionKey: []byte("short")}); err == nil {
		t.Error("NewSender accepted a 5-byte redaction key")
	}
}
