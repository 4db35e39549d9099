package sender

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sendonce/sendonce/internal/metrics"
	"github.com/sendonce/sendonce/notify"
	"github.com/sendonce/sendonce/provider"
	"github.com/sendonce/sendonce/provider/providertest"
)

func record(t *testing.T, id string, req notify.Request) events.SQSMessage {
	t.Helper()
	b, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return events.SQSMessage{MessageId: id, Body: string(b), EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:notifications"}
}

func failed(resp events.SQSEventResponse) []string {
	var ids []string
	for _, f := range resp.BatchItemFailures {
		ids = append(ids, f.ItemIdentifier)
	}
	slices.Sort(ids)
	return ids
}

func TestHandleSQSInvalidGoesToDLQ(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ev := events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "bad-json", Body: "{not json"},
		{MessageId: "no-tenant", Body: `{"event_id":"e","channel":"sms","template":"t","recipient":{"id":"r","phone":"+15551234567"}}`},
		record(t, "good", request("e1")),
	}}
	resp, err := b.sender.HandleSQS(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	if got := failed(resp); len(got) != 0 {
		t.Errorf("failures = %v, want none (invalid requests are dead-lettered, not retried)", got)
	}
	if len(b.dlq.got) != 2 || b.metrics.Get(metrics.InvalidRequests) != 2 {
		t.Fatalf("dead-lettered %d, InvalidRequests %d; want 2, 2", len(b.dlq.got), b.metrics.Get(metrics.InvalidRequests))
	}
	fields := []string{b.dlq.got[0].Field, b.dlq.got[1].Field}
	slices.Sort(fields)
	if !slices.Equal(fields, []string{"", "tenant_id"}) {
		t.Errorf("dead-letter fields = %q", fields)
	}
	if b.prov.Calls() != 1 {
		t.Errorf("provider calls = %d, want 1 (the valid record)", b.prov.Calls())
	}
}

func TestHandleSQSDeadLetterFailureIsNotLost(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.dlq.fail = errors.New("queue unavailable")
	resp, _ := b.sender.HandleSQS(context.Background(), events.SQSEvent{Records: []events.SQSMessage{{MessageId: "bad", Body: "x"}}})
	if got := failed(resp); !slices.Equal(got, []string{"bad"}) {
		t.Errorf("failures = %v, want [bad]", got)
	}
}

// TestHandleSQSRunsRecordsConcurrently proves a batch does not run one
// provider call after another: every call waits until all ten are in
// flight at once.
func TestHandleSQSRunsRecordsConcurrently(t *testing.T) {
	t.Parallel()
	var inFlight, peak atomic.Int64
	all := make(chan struct{})
	var once sync.Once
	p := &providertest.Fake{}
	p.SendFunc = func(ctx context.Context, m provider.Message) (provider.Receipt, error) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			old := peak.Load()
			if n <= old || peak.CompareAndSwap(old, n) {
				break
			}
		}
		if n == 10 {
			once.Do(func() { close(all) })
		}
		select {
		case <-all:
			return provider.Receipt{MessageID: m.Key}, nil
		case <-time.After(10 * time.Second):
			return provider.Receipt{}, &provider.Error{Kind: provider.Transient, Provider: "fake", Op: "send", Reason: "batch ran sequentially"}
		}
	}
	b := setup(t, p)
	var recs []events.SQSMessage
	for i := range 10 {
		recs = append(recs, record(t, fmt.Sprint(i), request(fmt.Sprint("e", i))))
	}
	resp, _ := b.sender.HandleSQS(context.Background(), events.SQSEvent{Records: recs})
	if got := failed(resp); len(got) != 0 {
		t.Fatalf("failures = %v", got)
	}
	if peak.Load() != 10 {
		t.Errorf("peak concurrent provider calls = %d, want 10", peak.Load())
	}
}

func TestHandleSQSFIFOGroupOrder(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var order []string
	p := &providertest.Fake{}
	p.SendFunc = func(_ context.Context, m provider.Message) (provider.Receipt, error) {
		mu.Lock()
		defer mu.Unlock()
		order = append(order, m.Body)
		if m.Body == "Your order g1-2 has shipped." {
			return provider.Receipt{}, &provider.Error{Kind: provider.Transient, Provider: "fake", Op: "send", Code: "429"}
		}
		return provider.Receipt{MessageID: m.Key}, nil
	}
	b := setup(t, p)
	var recs []events.SQSMessage
	for _, g := range []string{"g1", "g2"} {
		for i := 1; i <= 3; i++ {
			req := request(fmt.Sprintf("%s-%d", g, i))
			req.Data = map[string]any{"order_id": fmt.Sprintf("%s-%d", g, i)}
			rec := record(t, fmt.Sprintf("%s-%d", g, i), req)
			rec.EventSourceARN = "arn:aws:sqs:us-east-1:123456789012:notifications.fifo"
			rec.Attributes = map[string]string{"MessageGroupId": g}
			recs = append(recs, rec)
		}
	}
	resp, _ := b.sender.HandleSQS(context.Background(), events.SQSEvent{Records: recs})
	if got, want := failed(resp), []string{"g1-2", "g1-3"}; !slices.Equal(got, want) {
		t.Errorf("failures = %v, want %v (the failed record and the rest of its group)", got, want)
	}
	var g1, g2 []string
	for _, body := range order {
		if body[len("Your order "):][:2] == "g1" {
			g1 = append(g1, body)
		} else {
			g2 = append(g2, body)
		}
	}
	if want := []string{"Your order g1-1 has shipped.", "Your order g1-2 has shipped."}; !slices.Equal(g1, want) {
		t.Errorf("group g1 sent %v, want %v (g1-3 must not start after g1-2 failed)", g1, want)
	}
	if want := []string{"Your order g2-1 has shipped.", "Your order g2-2 has shipped.", "Your order g2-3 has shipped."}; !slices.Equal(g2, want) {
		t.Errorf("group g2 sent %v, want %v in order", g2, want)
	}
}
