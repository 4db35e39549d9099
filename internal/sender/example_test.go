package sender_test

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sendonce/sendonce/internal/dispatch"
	"github.com/sendonce/sendonce/internal/ledger/memledger"
	"github.com/sendonce/sendonce/internal/render/rendertest"
	"github.com/sendonce/sendonce/internal/sender"
	"github.com/sendonce/sendonce/notify"
	"github.com/sendonce/sendonce/provider"
	"github.com/sendonce/sendonce/provider/providertest"
)

// printDLQ stands in for the dead-letter queue: it prints what it is given.
type printDLQ struct{}

func (printDLQ) Put(_ context.Context, rec events.SQSMessage, invalid *notify.InvalidError) error {
	fmt.Printf("dead letter %s: field %q: %s\n", rec.MessageId, invalid.Field, invalid.Reason)
	return nil
}

// One SQS batch through the whole path: each record's body is parsed into
// a request, keyed, claimed in the ledger, sent with its key, marked, and
// the batch response lists the records SQS must deliver again. Here the
// ledger is memledger and the provider a fake that fails for one recipient.
func ExampleSender_HandleSQS() {
	ctx := context.Background()
	l := memledger.New(memledger.Config{})
	sms := &providertest.Fake{SendFunc: func(_ context.Context, m provider.Message) (provider.Receipt, error) {
		if m.To == "+15550000000" {
			return provider.Receipt{}, providertest.Error(provider.Transient, "busy")
		}
		return provider.Receipt{MessageID: "msg-1"}, nil
	}}
	renderer, err := rendertest.New("acme") // the example templates
	if err != nil {
		fmt.Println(err)
		return
	}
	d, err := dispatch.New(dispatch.Dispatcher{
		Ledger:          l,
		Providers:       map[string]provider.Adapter{"sms": sms},
		Renderer:        renderer,
		ProviderTimeout: 5 * time.Second,
		ClaimTimeout:    time.Minute,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	s, err := sender.New(sender.Config{Dispatcher: d, DeadLetters: printDLQ{}})
	if err != nil {
		fmt.Println(err)
		return
	}
	body := func(event, phone string) string {
		return `{"tenant_id":"acme","event_id":"` + event + `","channel":"sms","template":"order_shipped",` +
			`"recipient":{"id":"user-42","phone":"` + phone + `"},"data":{"order_id":"A-1001"}}`
	}
	batch := events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "m1", Body: body("evt_01J9Z3", "+15551234567")}, // sent
		{MessageId: "m2", Body: `{"tenant_id":"acme"`},              // not JSON: to the DLQ
		{MessageId: "m3", Body: body("evt_2", "+15550000000")},      // provider busy: retry
	}}
	resp, err := s.HandleSQS(ctx, batch)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("retry:", retried(resp))

	// SQS delivers m1 again: its key is held by a SENT row, so the record is
	// acknowledged without a second send.
	resp, _ = s.HandleSQS(ctx, events.SQSEvent{Records: batch.Records[:1]})
	fmt.Println("retry:", retried(resp))
	fmt.Println("provider calls:", sms.Calls())

	req, _ := notify.Parse([]byte(batch.Records[0].Body))
	rec, _ := l.Get(ctx, req.Key())
	fmt.Println("m1:", rec.State, rec.ProviderMessageID)
	req, _ = notify.Parse([]byte(batch.Records[2].Body))
	rec, _ = l.Get(ctx, req.Key())
	fmt.Println("m3:", rec.State, "released:", rec.Released, "reason:", rec.Reason)
	// Output:
	// dead letter m2: field "": body is not JSON (it ends early)
	// retry: [m3]
	// retry: []
	// provider calls: 2
	// m1: SENT msg-1
	// m3: PENDING released: true reason: transient: busy: transient failure
}

// retried lists the message ids a batch response asks SQS to deliver again.
func retried(resp events.SQSEventResponse) []string {
	ids := []string{}
	for _, f := range resp.BatchItemFailures {
		ids = append(ids, f.ItemIdentifier)
	}
	return ids
}
