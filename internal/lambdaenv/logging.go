package lambdaenv

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"

	"github.com/aws/aws-lambda-go/lambdacontext"
)

// The keys every function's log lines carry besides slog's own, named as
// Powertools for AWS Lambda names them where the meaning is the same
// (its Logger's "standard structured keys",
// https://docs.powertools.aws.dev/lambda/python/latest/core/logger/#standard-structured-keys,
// and the TypeScript Logger's), so that a team's saved Logs Insights
// queries work on sendonce's logs too.
const (
	// KeyMessage is the log line's message (slog's "msg").
	KeyMessage = "message"
	// KeyTimestamp is when the line was written (slog's "time").
	KeyTimestamp = "timestamp"
	// KeyService is the function's part of the application: "sender",
	// "api", ... (Start's service), the same value as the service
	// dimension of its metrics (Powertools' Metrics and Logger share
	// theirs too).
	KeyService = "service"
	// KeyFunctionName is the deployed function's name
	// (AWS_LAMBDA_FUNCTION_NAME), left out outside Lambda.
	KeyFunctionName = "function_name"
	// KeyFunctionMemorySize is the function's memory in MB
	// (AWS_LAMBDA_FUNCTION_MEMORY_SIZE), left out outside Lambda.
	KeyFunctionMemorySize = "function_memory_size"
	// KeyFunctionARN is the ARN the invocation was made through.
	KeyFunctionARN = "function_arn"
	// KeyFunctionRequestID is the Lambda request id of the invocation.
	KeyFunctionRequestID = "function_request_id"
	// KeyColdStart is true on the lines of a container's first
	// invocation and of its start-up, false on later ones.
	KeyColdStart = "cold_start"
	// KeyXRayTraceID is the X-Ray trace id of the invocation (the Root of
	// its trace header, "1-5759e988-bd862e3fe1be46a994272793"), left out
	// when the invocation has none.
	KeyXRayTraceID = "xray_trace_id"
	// KeyCorrelationID is the id of the request that caused the
	// invocation: API Gateway's request id (Powertools' correlation id
	// of an API Gateway event).
	KeyCorrelationID = "correlation_id"
)

// invocation is what the log lines of one invocation carry.
type invocation struct {
	requestID, arn, traceID string
	cold                    bool
}

// invocations tracks a container's invocations for its log lines: the
// current one, for the lines logged without the invocation's context
// (Lambda hands a container one invocation at a time), and the first one,
// which alone is a cold start.
type invocations struct {
	mu      sync.Mutex
	started bool
	first   string
	current *invocation
}

// begin records the invocation ctx carries as the current one and returns
// it.
func (s *invocations) begin(ctx context.Context) *invocation {
	inv := s.of(ctx)
	if inv == nil {
		return nil
	}
	s.mu.Lock()
	s.current = inv
	s.mu.Unlock()
	return inv
}

// of returns the invocation ctx carries (nil when none), a cold start
// when it is the container's first.
func (s *invocations) of(ctx context.Context) *invocation {
	if ctx == nil {
		return nil
	}
	lc, ok := lambdacontext.FromContext(ctx)
	if !ok {
		return nil
	}
	s.mu.Lock()
	if !s.started {
		s.started, s.first = true, lc.AwsRequestID
	}
	cold := s.first == lc.AwsRequestID
	s.mu.Unlock()
	header, _ := ctx.Value("x-amzn-trace-id").(string) // aws-lambda-go's key for the invocation's trace header
	return &invocation{requestID: lc.AwsRequestID, arn: lc.InvokedFunctionArn, traceID: TraceRoot(header), cold: cold}
}

// now returns the invocation of ctx, else the current one (nil before the
// first).
func (s *invocations) now(ctx context.Context) *invocation {
	if inv := s.of(ctx); inv != nil {
		return inv
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.current
}

// TraceRoot returns the Root of an X-Ray trace header
// ("Root=1-5759e988-bd862e3fe1be46a994272793;Parent=...;Sampled=1"), ""
// when it has none.
func TraceRoot(header string) string {
	for part := range strings.SplitSeq(header, ";") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(part), "Root="); ok {
			return v
		}
	}
	return ""
}

// contextHandler adds the Powertools keys to every record: the
// container's (service, function name and memory) and the invocation's
// (request id, ARN, trace id, cold start), from the record's context or,
// logged without one, from the invocation under way.
type contextHandler struct {
	slog.Handler
	static []slog.Attr
	inv    *invocations
}

func (h *contextHandler) Handle(ctx context.Context, r slog.Record) error {
	r = r.Clone()
	r.AddAttrs(h.static...)
	switch inv := h.inv.now(ctx); {
	case inv == nil: // start-up, before the first invocation: part of the cold start
		r.AddAttrs(slog.Bool(KeyColdStart, true))
	default:
		r.AddAttrs(slog.Bool(KeyColdStart, inv.cold), slog.String(KeyFunctionRequestID, inv.requestID))
		if inv.arn != "" {
			r.AddAttrs(slog.String(KeyFunctionARN, inv.arn))
		}
		if inv.traceID != "" {
			r.AddAttrs(slog.String(KeyXRayTraceID, inv.traceID))
		}
	}
	return h.Handler.Handle(ctx, r)
}

func (h *contextHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &contextHandler{Handler: h.Handler.WithAttrs(as), static: h.static, inv: h.inv}
}

func (h *contextHandler) WithGroup(name string) slog.Handler {
	// sendonce opens no group; a caller's group would hold these keys too.
	return &contextHandler{Handler: h.Handler.WithGroup(name), static: h.static, inv: h.inv}
}

// powertoolsKeys renames slog's message and time keys to Powertools'.
func powertoolsKeys(groups []string, a slog.Attr) slog.Attr {
	if len(groups) > 0 {
		return a
	}
	switch a.Key {
	case slog.MessageKey:
		a.Key = KeyMessage
	case slog.TimeKey:
		a.Key = KeyTimestamp
	}
	return a
}

// staticKeys are the keys of every line of the container.
func staticKeys(service string, getenv func(string) string) []slog.Attr {
	var as []slog.Attr
	if service != "" {
		as = append(as, slog.String(KeyService, service))
	}
	if v := strings.TrimSpace(getenv("AWS_LAMBDA_FUNCTION_NAME")); v != "" {
		as = append(as, slog.String(KeyFunctionName, v))
	}
	if v, err := strconv.Atoi(strings.TrimSpace(getenv("AWS_LAMBDA_FUNCTION_MEMORY_SIZE"))); err == nil {
		as = append(as, slog.Int(KeyFunctionMemorySize, v))
	}
	return as
}

// Invocation wraps a Lambda handler so that the log lines of each
// invocation, also those logged without its context, carry its request
// id, trace id and cold start (Logger). Serve does it.
func Invocation[In, Out any](log *slog.Logger, h func(context.Context, In) (Out, error)) func(context.Context, In) (Out, error) {
	ch, ok := log.Handler().(*contextHandler)
	if !ok {
		return h
	}
	return func(ctx context.Context, in In) (Out, error) {
		ch.inv.begin(ctx)
		return h(ctx, in)
	}
}
