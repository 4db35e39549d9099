package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/rie"
	"github.com/sendonce/sendonce/internal/testenv"
)

// TestPlainHTTPCallbackBaseRefused: the real bootstrap, under the RIE,
// refuses to start with a plain-http SENDONCE_CALLBACK_BASE_URL to a host
// that is not loopback, and says which variable is wrong.
func TestPlainHTTPCallbackBaseRefused(t *testing.T) {
	t.Parallel()
	fn := rie.Start(t, rie.Build(t, "webhook"), map[string]string{
		"SENDONCE_TABLE":             "unused",
		"AWS_ENDPOINT_URL_DYNAMODB":  testenv.DynamoDBEndpoint(t),
		"SENDONCE_CALLBACK_BASE_URL": "http://hooks.example.com",
		"SENDONCE_REDACT_KEY":        strings.Repeat("k", 32),
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := fn.Invoke(ctx, []byte(`{}`))
	if _, isErr := rie.ParseInvokeError(out); err == nil && !isErr {
		t.Fatalf("invoke answered %s: the function started", out)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(fn.Logs(), "start-up failed") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if logs := fn.Logs(); !strings.Contains(logs, "start-up failed") || !strings.Contains(logs, `SENDONCE_CALLBACK_BASE_URL=\"http://hooks.example.com\" is plain http`) {
		t.Errorf("logs do not say start-up failed on the callback base URL:\n%s", logs)
	}
}
