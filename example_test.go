package sendonce_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sendonce/sendonce"
	"github.com/sendonce/sendonce/notify"
	"github.com/sendonce/sendonce/provider"
)

// gateway is a provider of your own: an adapter for an in-house SMS
// gateway, here one that keeps what it accepted in memory.
type gateway struct {
	mu       sync.Mutex
	accepted map[string]int // key → messages accepted
}

func (g *gateway) Name() string { return "gateway" }

func (g *gateway) Capabilities() provider.Capabilities { return provider.Capabilities{} }

func (g *gateway) Send(ctx context.Context, m provider.Message) (provider.Receipt, error) {
	if err := ctx.Err(); err != nil {
		return provider.Receipt{}, &provider.Error{Kind: provider.Transient, Provider: "gateway", Op: "send", Reason: "not sent: " + err.Error()}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.accepted[m.Key]++
	return provider.Receipt{MessageID: fmt.Sprintf("gw-%d", len(g.accepted))}, nil
}

func orderShipped() notify.Request {
	return notify.Request{
		TenantID:  "acme",
		EventID:   "order-A-1001-shipped",
		Channel:   notify.ChannelSMS,
		Template:  "order_shipped",
		Recipient: notify.Recipient{ID: "user-42", Phone: "+15551234567"},
		Content:   &notify.Content{Text: "Your order A-1001 has shipped."},
	}
}

// A sender with a provider of your own, called once per message by a
// worker that takes requests from anywhere: the same request delivered
// twice is sent once.
func ExampleSender_Send() {
	gw := &gateway{accepted: map[string]int{}}
	s, err := sendonce.NewSender(sendonce.SenderConfig{
		Ledger: sendonce.NewMemoryLedger(),
		Routes: sendonce.Routes{notify.ChannelSMS: {gw}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := orderShipped()
	for range 2 { // an at-least-once queue delivered it twice
		out := s.Send(ctx, req, time.Time{}) // never queued: its validity counts from now
		fmt.Println(out.Key == req.Key(), out.Disposition)
	}
	fmt.Println("the gateway accepted", gw.accepted[req.Key()])
	// Output:
	// true sent
	// true duplicate
	// the gateway accepted 1
}

// The SQS handler of a Lambda function of your own: a record that cannot
// be decided now is reported for redelivery, an invalid one goes to the
// dead-letter queue.
func ExampleSender_HandleSQS() {
	gw := &gateway{accepted: map[string]int{}}
	s, err := sendonce.NewSender(sendonce.SenderConfig{
		Ledger: sendonce.NewMemoryLedger(),
		Routes: sendonce.Routes{notify.ChannelSMS: {gw}},
		// One record at a time, so that the duplicate finds the first
		// copy's outcome rather than its live claim (which would be
		// reported for redelivery: in flight elsewhere).
		Concurrency: 1,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	req := orderShipped()
	body, _ := req.Body()
	ev := events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "m1", Body: string(body)},
		{MessageId: "m2", Body: string(body)}, // a duplicate
		{MessageId: "m3", Body: `{"tenant_id":"acme"}`},
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, _ := s.HandleSQS(ctx, ev)
	for _, f := range resp.BatchItemFailures {
		// No DeadLetters configured: the invalid record is reported
		// failed, and SQS's redrive policy moves it to the dead-letter
		// queue once its receives run out.
		fmt.Println("redeliver", f.ItemIdentifier)
	}
	fmt.Println("the gateway accepted", gw.accepted[req.Key()])
	// Output:
	// redeliver m3
	// the gateway accepted 1
}

// A reconciler run over a ledger with nothing left to settle.
func ExampleReconciler_Run() {
	r, err := sendonce.NewReconciler(sendonce.ReconcilerConfig{
		Ledger:   sendonce.NewMemoryLedger(),
		Routes:   sendonce.Routes{notify.ChannelSMS: {&gateway{accepted: map[string]int{}}}},
		Policies: map[notify.Class]sendonce.Policy{notify.ClassMarketing: sendonce.Abandon},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	rep, err := r.Run(context.Background())
	fmt.Println(rep.Examined, rep.Truncated, err)
	// Output:
	// 0 false <nil>
}

// A route: Twilio first, the in-house gateway when Twilio refuses before
// accepting anything. The same provider twice is refused.
func ExampleRoutes() {
	gw := &gateway{accepted: map[string]int{}}
	_, err := sendonce.NewSender(sendonce.SenderConfig{
		Ledger: sendonce.NewMemoryLedger(),
		Routes: sendonce.Routes{notify.ChannelSMS: {gw, gw}},
	})
	fmt.Println(err)
	// Output:
	// sendonce: new sender: channel sms: provider gateway twice in its route
}

// Reading a message's row: where it is, and how each attempt ended. A
// row never holds the address.
func ExampleLedger_Get() {
	l := sendonce.NewMemoryLedger()
	s, err := sendonce.NewSender(sendonce.SenderConfig{Ledger: l, Routes: sendonce.Routes{notify.ChannelSMS: {&gateway{accepted: map[string]int{}}}}})
	if err != nil {
		fmt.Println(err)
		return
	}
	req := orderShipped()
	s.Send(context.Background(), req, time.Time{})
	row, err := l.Get(context.Background(), req.Key())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(row.State, row.Provider, row.ProviderMessageID)
	for _, a := range row.Attempts {
		fmt.Println(a.Number, a.Provider, a.Ended)
	}
	_, err = l.Get(context.Background(), "v1_unknown")
	fmt.Println(errors.Is(err, sendonce.ErrNotFound))
	// Output:
	// SENT gateway gw-1
	// 1 gateway sent
	// true
}

// A message received from SQS: its validity counts from when it was
// first enqueued, not from when it is sent. An OTP (valid 10 minutes)
// that waited an hour is never sent.
func ExampleEnqueuedAt() {
	gw := &gateway{accepted: map[string]int{}}
	s, err := sendonce.NewSender(sendonce.SenderConfig{
		Ledger:   sendonce.NewMemoryLedger(),
		Routes:   sendonce.Routes{notify.ChannelSMS: {gw}},
		Validity: map[notify.Class]time.Duration{notify.ClassOTP: 10 * time.Minute},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	req := orderShipped()
	req.Class = notify.ClassOTP
	// As ReceiveMessage returns it when asked for SentTimestamp.
	m := sqstypes.Message{Attributes: map[string]string{"SentTimestamp": strconv.FormatInt(time.Now().Add(-time.Hour).UnixMilli(), 10)}}
	out := s.Send(context.Background(), req, sendonce.EnqueuedAt(m))
	fmt.Println(out.Disposition, strings.HasPrefix(out.Reason, "expired"))
	fmt.Println("the gateway accepted", len(gw.accepted))
	// Output:
	// failed true
	// the gateway accepted 0
}

// tally is a Metrics of your own: here it only counts.
type tally struct {
	mu     sync.Mutex
	counts map[string]int
}

func (t *tally) Count(name string, n int, dims ...sendonce.Dim) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.counts[name] += n
}

func (t *tally) Latency(string, time.Duration, ...sendonce.Dim) {}

// Metrics to a backend of your own: the sender counts what it did.
func ExampleMetrics() {
	m := &tally{counts: map[string]int{}}
	s, err := sendonce.NewSender(sendonce.SenderConfig{
		Ledger:  sendonce.NewMemoryLedger(),
		Routes:  sendonce.Routes{notify.ChannelSMS: {&gateway{accepted: map[string]int{}}}},
		Metrics: m,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for range 2 {
		s.Send(context.Background(), orderShipped(), time.Time{})
	}
	fmt.Println(m.counts["Sent"], m.counts["DuplicatesPrevented"])
	// Output:
	// 1 1
}

// CloudWatch's embedded metric format: one JSON line per flush.
func ExampleNewEMF() {
	var out strings.Builder
	m := sendonce.NewEMF(&out, "worker")
	m.Count("Sent", 1, sendonce.Dim{Name: "channel", Value: "sms"})
	if err := m.Flush(); err != nil {
		fmt.Println(err)
	}
	fmt.Println(strings.Contains(out.String(), `"Sent":1`))
	// Output:
	// true
}

// Templates through the public API: put a version, render a request with
// it, send it. The row records the version that rendered the message.
func ExampleLedger_PutTemplate() {
	ctx := context.Background()
	l := sendonce.NewMemoryLedger()
	t, err := l.PutTemplate(ctx, sendonce.Template{
		TemplateID: sendonce.TemplateID{Tenant: "acme", Name: "order_shipped", Channel: notify.ChannelSMS},
		Text:       "Your order {{.order_id}} has shipped.",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	req := orderShipped()
	req.Content, req.Data = nil, map[string]any{"order_id": "A-1001"}
	r, err := l.Render(ctx, req)
	fmt.Println(t.Version, r.Text, err)

	s, err := sendonce.NewSender(sendonce.SenderConfig{Ledger: l, Routes: sendonce.Routes{notify.ChannelSMS: {&gateway{accepted: map[string]int{}}}}})
	if err != nil {
		fmt.Println(err)
		return
	}
	s.Send(ctx, req, time.Time{})
	row, _ := l.Get(ctx, req.Key())
	fmt.Println(row.State, row.TemplateVersion)

	req.Template = "order_cancelled" // not stored: retried, never FAILED
	out := s.Send(ctx, req, time.Time{})
	fmt.Println(out.Disposition, out.Reason)
	// Output:
	// 1 Your order A-1001 has shipped. <nil>
	// SENT 1
	// retry config: render order_cancelled for sms: unknown template
}
