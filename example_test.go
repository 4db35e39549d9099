package sendonce_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

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
