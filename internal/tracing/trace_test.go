package tracing_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.opentelemetry.io/contrib/propagators/aws/xray"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/sendonce/sendonce/internal/api"
	"github.com/sendonce/sendonce/internal/api/idempotency/memidempotency"
	"github.com/sendonce/sendonce/internal/api/ratelimit/memratelimit"
	"github.com/sendonce/sendonce/internal/apikey"
	"github.com/sendonce/sendonce/internal/apikey/memapikey"
	"github.com/sendonce/sendonce/internal/dispatch"
	"github.com/sendonce/sendonce/internal/ledger/dynamoledger"
	"github.com/sendonce/sendonce/internal/provider/httpprovider"
	"github.com/sendonce/sendonce/internal/provider/simulator"
	"github.com/sendonce/sendonce/internal/render"
	"github.com/sendonce/sendonce/internal/sender"
	"github.com/sendonce/sendonce/internal/templates/memtemplates"
	"github.com/sendonce/sendonce/internal/testenv"
	"github.com/sendonce/sendonce/internal/testsupport"
	"github.com/sendonce/sendonce/internal/tracing"
	"github.com/sendonce/sendonce/notify"
	"github.com/sendonce/sendonce/provider"
)

const phone = "+15557654321"

type noDLQ struct{}

func (noDLQ) Put(context.Context, events.SQSMessage, *notify.InvalidError) error {
	return fmt.Errorf("no dead-letter queue")
}

// TestOneMessageOneTrace follows one message, in process, through the
// HTTP API's handler, moto's SQS queue and the sender's handler against
// DynamoDB Local and the provider simulator, with an in-memory exporter:
// every span is in one trace (the AWSTraceHeader crossed the queue), the
// sender's span links to the producer's, the steps are named, the
// provider span carries the provider and the outcome and no span carries
// the address; the row records the trace for the reconciler.
func TestOneMessageOneTrace(t *testing.T) {
	ctx := context.Background()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithIDGenerator(xray.NewIDGenerator()))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { otel.SetTracerProvider(prev) })

	db := testenv.DynamoDB(t)
	table := testenv.NewTable(t, db)
	led, err := dynamoledger.New(db, table, dynamoledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	q := testenv.SQSAt(testenv.MotoEndpoint(t))
	created, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("sendonce-trace-" + testenv.RandomID())})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = q.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: created.QueueUrl}) })

	keys := apikey.New(memapikey.New(), apikey.Config{})
	_, secret, err := keys.Create(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	h, err := api.New(api.Config{Keys: keys, Ledger: led, Queue: q, QueueURL: aws.ToString(created.QueueUrl),
		Idempotency: memidempotency.New(), RateWindows: memratelimit.New()})
	if err != nil {
		t.Fatal(err)
	}
	body := `{"event_id":"evt-trace","channel":"sms","template":"otp","recipient":{"id":"u-trace","phone":"` + phone + `"},"content":{"text":"Your code is 123456"}}`
	resp, err := h.Handle(ctx, events.APIGatewayV2HTTPRequest{
		Version: "2.0", RouteKey: "$default", RawPath: "/v1/notifications", Body: body,
		Headers: map[string]string{"content-type": "application/json", "authorization": "Bearer " + secret, "idempotency-key": "idem-trace"},
		RequestContext: events.APIGatewayV2HTTPRequestContext{Stage: "$default", RequestID: "req-trace",
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: http.MethodPost, Path: "/v1/notifications"}},
	})
	if err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("API: %d %s, %v; want 202", resp.StatusCode, resp.Body, err)
	}

	got, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: created.QueueUrl, WaitTimeSeconds: 1,
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll}})
	if err != nil || len(got.Messages) != 1 {
		t.Fatalf("queue: %d messages, %v; want 1", len(got.Messages), err)
	}
	m := got.Messages[0]
	if m.Attributes[tracing.HeaderAttribute] == "" {
		t.Fatalf("the message has no %s: attributes %v", tracing.HeaderAttribute, m.Attributes)
	}

	sim, simURL := testsupport.Simulator(t, simulator.Options{Token: "tok"})
	hp, err := httpprovider.New(httpprovider.Config{BaseURL: simURL, Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := sender.New(sender.Config{
		Dispatcher: testsupport.Dispatcher(t, dispatch.Dispatcher{Ledger: led, Providers: map[string]provider.Adapter{"sms": hp},
			Renderer: render.New(memtemplates.New(memtemplates.Config{}), render.Config{}), ProviderTimeout: 2 * time.Second, ClaimTimeout: time.Minute}),
		DeadLetters: noDLQ{},
	})
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.HandleSQS(ctx, events.SQSEvent{Records: []events.SQSMessage{{MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle),
		Body: aws.ToString(m.Body), Attributes: m.Attributes, EventSource: "aws:sqs"}}})
	if err != nil || len(out.BatchItemFailures) != 0 {
		t.Fatalf("sender: %+v, %v; want the record done", out, err)
	}
	req, _ := notify.Parse([]byte(aws.ToString(m.Body)))
	if d := sim.Delivered(req.Key()); d != 1 {
		t.Fatalf("delivered %d times, want 1", d)
	}

	spans := exp.GetSpans()
	byName := map[string]tracetest.SpanStub{}
	var names []string
	for _, sp := range spans {
		names = append(names, sp.Name)
		byName[sp.Name] = sp
		if sp.SpanContext.TraceID() != spans[0].SpanContext.TraceID() {
			t.Errorf("span %s is in trace %s, not %s: want one trace", sp.Name, sp.SpanContext.TraceID(), spans[0].SpanContext.TraceID())
		}
		text := fmt.Sprint(sp.Name, sp.Attributes, sp.Status, sp.Events)
		if strings.Contains(text, phone) || strings.Contains(text, strings.TrimPrefix(phone, "+")) {
			t.Errorf("span %s carries the address: %s", sp.Name, text)
		}
	}
	for _, want := range []string{tracing.SpanEnqueue, tracing.SpanProcess, tracing.SpanRender, tracing.SpanClaim, tracing.SpanProvider, tracing.SpanMark} {
		if !slices.Contains(names, want) {
			t.Errorf("spans %q: no %s", names, want)
		}
	}
	enq, proc, prov := byName[tracing.SpanEnqueue], byName[tracing.SpanProcess], byName[tracing.SpanProvider]
	if len(proc.Links) != 1 || proc.Links[0].SpanContext.SpanID() != enq.SpanContext.SpanID() || proc.Parent.SpanID() != enq.SpanContext.SpanID() {
		t.Errorf("the sender's span has links %+v and parent %s, want the producer's span %s", proc.Links, proc.Parent.SpanID(), enq.SpanContext.SpanID())
	}
	attrs := map[string]string{}
	for _, kv := range prov.Attributes {
		attrs[string(kv.Key)] = kv.Value.Emit()
	}
	if attrs[string(tracing.AttrProvider)] != "http" || attrs[string(tracing.AttrOutcome)] == "" {
		t.Errorf("provider span attributes %v, want the provider (http) and the outcome", attrs)
	}
	row, err := led.Get(ctx, req.Key())
	if err != nil {
		t.Fatal(err)
	}
	if sc := tracing.FromHeader(row.Trace); sc.TraceID() != enq.SpanContext.TraceID() {
		t.Errorf("the row records trace %q, want the message's %s (the reconciler joins it)", row.Trace, enq.SpanContext.TraceID())
	}
	t.Logf("spans: %q, provider outcome %s", names, attrs[string(tracing.AttrOutcome)])
}
