package lambdaenv

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/lambdacontext"
)

// lines decodes the JSON lines of out.
func lines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var ls []map[string]any
	for l := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		ls = append(ls, m)
	}
	return ls
}

// invoke returns a context as aws-lambda-go hands one to a handler.
func invokeCtx(id, traceHeader string) context.Context {
	ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{
		AwsRequestID: id, InvokedFunctionArn: "arn:aws:lambda:us-east-1:123456789012:function:f",
	})
	return context.WithValue(ctx, "x-amzn-trace-id", traceHeader) //nolint:staticcheck // aws-lambda-go's own key
}

// TestLoggerPowertoolsKeys: every line carries Powertools' standard keys:
// the container's on every line, the invocation's from the handler's
// context or, logged without it, from the invocation under way; the cold
// start on the first invocation only.
func TestLoggerPowertoolsKeys(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	env := map[string]string{"AWS_LAMBDA_FUNCTION_NAME": "stack-SenderFunction-1", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "256"}
	log := ServiceLogger(&out, "sender", getenv(env))
	log.Info("starting")
	h := Invocation(log, func(ctx context.Context, n int) (int, error) {
		log.With("key", "v1_k").Info("sent") // no context: the invocation under way
		log.InfoContext(ctx, "with context") // the handler's context
		return n, nil
	})
	for i, id := range []string{"req-1", "req-2"} {
		if _, err := h(invokeCtx(id, "Root=1-5759e988-bd862e3fe1be46a99427279"+string(rune('0'+i))+";Parent=53995c3f42cd8ad8;Sampled=1"), i); err != nil {
			t.Fatal(err)
		}
	}
	ls := lines(t, out.String())
	if len(ls) != 5 {
		t.Fatalf("%d lines, want 5:\n%s", len(ls), out.String())
	}
	for i, l := range ls {
		for k, want := range map[string]any{"service": "sender", "function_name": "stack-SenderFunction-1", "function_memory_size": 256.0, "level": "INFO"} {
			if l[k] != want {
				t.Errorf("line %d: %s = %v, want %v", i, k, l[k], want)
			}
		}
		for _, k := range []string{"message", "timestamp"} {
			if _, ok := l[k]; !ok {
				t.Errorf("line %d has no %s: %v", i, k, l)
			}
		}
		for _, k := range []string{"msg", "time", "request_id"} {
			if _, ok := l[k]; ok {
				t.Errorf("line %d has slog's %s: %v", i, k, l)
			}
		}
	}
	if l := ls[0]; l["cold_start"] != true || l["function_request_id"] != nil {
		t.Errorf("start-up line %v: want cold_start true and no request id", l)
	}
	for i, want := range []struct {
		id, trace string
		cold      bool
	}{{"req-1", "1-5759e988-bd862e3fe1be46a994272790", true}, {"req-1", "1-5759e988-bd862e3fe1be46a994272790", true}, {"req-2", "1-5759e988-bd862e3fe1be46a994272791", false}, {"req-2", "1-5759e988-bd862e3fe1be46a994272791", false}} {
		l := ls[i+1]
		if l["function_request_id"] != want.id || l["xray_trace_id"] != want.trace || l["cold_start"] != want.cold || l["function_arn"] == nil {
			t.Errorf("line %d %v: want request %s, trace %s, cold start %v", i+1, l, want.id, want.trace, want.cold)
		}
	}
	if ls[1]["key"] != "v1_k" {
		t.Errorf("the message's key is lost: %v", ls[1])
	}
}

// TestLoggerOutsideLambda: outside Lambda, Logger's lines carry no
// function, service or invocation keys, and still Powertools' names for
// slog's own.
func TestLoggerOutsideLambda(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	Logger(&out, getenv(nil)).Info("x")
	l := lines(t, out.String())[0]
	for _, k := range []string{"service", "function_name", "function_request_id", "msg"} {
		if _, ok := l[k]; ok {
			t.Errorf("line %v has %s", l, k)
		}
	}
	if l["message"] != "x" {
		t.Errorf("line %v: want message x", l)
	}
}

func TestTraceRoot(t *testing.T) {
	t.Parallel()
	for header, want := range map[string]string{
		"Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1": "1-5759e988-bd862e3fe1be46a994272793",
		"Parent=53995c3f42cd8ad8; Root=1-a-b":                                        "1-a-b",
		"":                                                                           "",
		"Sampled=1":                                                                  "",
	} {
		if got := TraceRoot(header); got != want {
			t.Errorf("TraceRoot(%q) = %q, want %q", header, got, want)
		}
	}
}
