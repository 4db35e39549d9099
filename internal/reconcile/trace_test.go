package reconcile_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/contrib/propagators/aws/xray"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/provider/simulator"
	"github.com/sendonce/sendonce/internal/reconcile"
	"github.com/sendonce/sendonce/internal/tracing"
)

// TestWorkerJoinsTheMessagesTrace: a reconcile worker (Work on a unit),
// with no trace of its own, resolves an UNCERTAIN row on DynamoDB Local
// whose claim recorded the message's trace header (the row's `trace`
// attribute). Its sendonce.reconcile span is in the message's trace, a
// child of and linked to the span that claimed the row, and the steps it
// takes (the provider call, the mark) are its children in that trace.
func TestWorkerJoinsTheMessagesTrace(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithIDGenerator(xray.NewIDGenerator()))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { otel.SetTracerProvider(prev) })

	e := setup(t, simulator.Options{})
	k := key(35)

	// The message's delivery: a span of its own trace claims the row
	// (recording the header, as the sender does) and leaves it UNCERTAIN.
	ctx, msg := tracing.Start(context.Background(), tracing.SpanProcess)
	c, err := e.ledger.Claim(ctx, ledger.Entry{Key: k, Tenant: "acme", Channel: "sms", Class: "otp", Provider: "http",
		Template: "otp", RecipientID: "user-1", Address: "+15551230000", Body: "code 35", Trace: tracing.Header(ctx)}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.ledger.Mark(ctx, c, ledger.Outcome{State: ledger.StateUncertain, Reason: "timeout"}); err != nil {
		t.Fatal(err)
	}
	msg.End()
	want := msg.SpanContext()

	// The worker, later, in an invocation of its own (no span in ctx).
	e.advance(2 * time.Minute)
	rep, done := e.reconciler(t, e.prov).Work(context.Background(), reconcile.Unit{Keys: []string{k}})
	if !done || rep.Examined != 1 {
		t.Fatalf("Work: %+v, done %v; want the row examined", rep, done)
	}

	var rec tracetest.SpanStub
	var names []string
	for _, sp := range exp.GetSpans() {
		if sp.Name == tracing.SpanReconcile {
			rec = sp
		}
	}
	if rec.Name == "" {
		t.Fatalf("no %s span among %d", tracing.SpanReconcile, len(exp.GetSpans()))
	}
	if rec.SpanContext.TraceID() != want.TraceID() || rec.Parent.SpanID() != want.SpanID() {
		t.Errorf("%s is in trace %s with parent %s, want the message's trace %s and span %s",
			rec.Name, rec.SpanContext.TraceID(), rec.Parent.SpanID(), want.TraceID(), want.SpanID())
	}
	if len(rec.Links) != 1 || rec.Links[0].SpanContext.SpanID() != want.SpanID() || rec.Links[0].SpanContext.TraceID() != want.TraceID() {
		t.Errorf("%s links %+v, want one link to the message's span %s", rec.Name, rec.Links, want.SpanID())
	}
	for _, sp := range exp.GetSpans() {
		if sp.Parent.SpanID() == rec.SpanContext.SpanID() {
			names = append(names, sp.Name)
			if sp.SpanContext.TraceID() != want.TraceID() {
				t.Errorf("%s is in trace %s, want the message's %s", sp.Name, sp.SpanContext.TraceID(), want.TraceID())
			}
		}
	}
	if len(names) == 0 {
		t.Errorf("the worker's span has no children: want its steps (the provider call, the mark) in the message's trace")
	}
	t.Logf("actions %v; the worker's steps: %q", rep.Actions, names)
}
