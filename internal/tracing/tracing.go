// Package tracing follows one message across the stack with OpenTelemetry:
// one trace per message, from the producer (Enqueue, the HTTP API) through
// the notification queue to the sender's claim, render, provider call and
// mark, with X-Ray's trace ids and header format so that the traces join
// Lambda's own segments in X-Ray.
//
// The context crosses SQS in the message's AWSTraceHeader system
// attribute (the X-Ray header, "Root=1-…;Parent=…;Sampled=1"): the
// producer sets it (Header), the sender reads it (FromHeader) and starts
// the message's span in that trace, linked to the producer's span.
//
// The code records spans through the global tracer provider
// (otel.GetTracerProvider), which is a no-op until a program installs one:
// tests record nothing unless they install an in-memory exporter, and the
// Lambda functions install one only when an exporter is configured
// (package export). No span attribute carries an address: the provider span
// carries the provider's name and the outcome's kind.
package tracing

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.opentelemetry.io/contrib/propagators/aws/xray"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Name is the instrumentation scope of sendonce's spans.
const Name = "github.com/sendonce/sendonce"

// HeaderAttribute is the SQS system attribute that carries the X-Ray
// trace header across the queue.
const HeaderAttribute = "AWSTraceHeader"

// Span names: one per step of a message.
const (
	SpanEnqueue   = "sendonce.enqueue"
	SpanProcess   = "sendonce.process"
	SpanClaim     = "sendonce.claim"
	SpanRender    = "sendonce.render"
	SpanProvider  = "sendonce.provider"
	SpanMark      = "sendonce.mark"
	SpanReconcile = "sendonce.reconcile"
	SpanAPI       = "sendonce.api"
)

// Attribute keys. None carries an address.
const (
	AttrKey      = attribute.Key("sendonce.key")
	AttrChannel  = attribute.Key("sendonce.channel")
	AttrProvider = attribute.Key("sendonce.provider")
	AttrOutcome  = attribute.Key("sendonce.outcome")
	AttrState    = attribute.Key("sendonce.state")
)

// Tracer returns sendonce's tracer from the global provider.
func Tracer() trace.Tracer { return otel.GetTracerProvider().Tracer(Name) }

// Start starts span name as a child of ctx's span.
func Start(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	return Tracer().Start(ctx, name, trace.WithAttributes(attrs...))
}

// End ends span, marking it an error when err is not nil.
func End(span trace.Span, err error) {
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

var propagator = xray.Propagator{}

// Header returns the X-Ray trace header of ctx's span, for a message's
// AWSTraceHeader; "" when ctx has no valid span.
func Header(ctx context.Context) string {
	c := propagation.MapCarrier{}
	propagator.Inject(ctx, c)
	return c.Get("X-Amzn-Trace-Id")
}

// FromHeader returns the span context an X-Ray trace header names
// (invalid when h is empty or malformed).
func FromHeader(h string) trace.SpanContext {
	if h == "" {
		return trace.SpanContext{}
	}
	ctx := propagator.Extract(context.Background(), propagation.MapCarrier{"X-Amzn-Trace-Id": h})
	return trace.SpanContextFromContext(ctx)
}

// StartMessage starts the span of one message received with trace header
// h (its AWSTraceHeader, or a row's recorded header): in the producer's
// trace, as a child of and linked to the producer's span, so that one
// message is one trace whichever function handles it. Without a valid
// header it is a child of ctx's span.
func StartMessage(ctx context.Context, name, h string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	opts := []trace.SpanStartOption{trace.WithAttributes(attrs...), trace.WithSpanKind(trace.SpanKindConsumer)}
	if sc := FromHeader(h); sc.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
		ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	return Tracer().Start(ctx, name, opts...)
}

// StartProducer starts span name of a step that puts a message on a queue
// (SpanKindProducer), as a child of ctx's span.
func StartProducer(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	return Tracer().Start(ctx, name, trace.WithAttributes(attrs...), trace.WithSpanKind(trace.SpanKindProducer))
}

// SetHeader sets in's AWSTraceHeader system attribute to ctx's span's
// X-Ray header, when ctx has a recording span's context.
func SetHeader(ctx context.Context, in *sqs.SendMessageInput) {
	h := Header(ctx)
	if h == "" {
		return
	}
	if in.MessageSystemAttributes == nil {
		in.MessageSystemAttributes = map[string]sqstypes.MessageSystemAttributeValue{}
	}
	in.MessageSystemAttributes[HeaderAttribute] = sqstypes.MessageSystemAttributeValue{DataType: aws.String("String"), StringValue: aws.String(h)}
}
