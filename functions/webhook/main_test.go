package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/rie"
	"github.com/sendonce/sendonce/internal/testenv"
)

// TestStartUpRefused: the real bootstraps, under the RIE, refuse to start
// on bad configuration with one "start-up failed" line that names every
// wrong variable. The sesevents function shares the webhook's start-up
// (lambdaenv.Start, Function.Ledger, the dedup TTL), so its case is here;
// so is the api's, which starts through lambdaenv.Start too.
func TestStartUpRefused(t *testing.T) {
	t.Parallel()
	const secret = "SENDONCE_HTTP_PROVIDER_CALLBACK_SECRET"
	tests := []struct {
		name, function string
		env            map[string]string
		want           []string // in the one start-up failure line (JSON-escaped)
	}{
		{"PlainHTTPCallbackBase", "webhook", map[string]string{"SENDONCE_CALLBACK_BASE_URL": "http://hooks.example.com"},
			[]string{`SENDONCE_CALLBACK_BASE_URL=\"http://hooks.example.com\" is plain http`}},
		// Before the webhook read its secrets through lambdaenv.Env, the
		// _PARAM won silently here.
		{"SecretAndParam", "webhook", map[string]string{secret: "local-secret", secret + "_PARAM": "/sendonce/callback-secret"},
			[]string{secret + " and " + secret + "_PARAM are both set"}},
		{"TwoProblems", "webhook", map[string]string{"SENDONCE_TABLE": "", "SENDONCE_CALLBACK_DEDUP_TTL": "soon"},
			[]string{"SENDONCE_TABLE is required", `SENDONCE_CALLBACK_DEDUP_TTL=\"soon\"`}},
		{"SESEventsTwoProblems", "sesevents", map[string]string{"SENDONCE_TABLE": "", "SENDONCE_RETENTION": "-1h"},
			[]string{"SENDONCE_TABLE is required", `SENDONCE_RETENTION=\"-1h\"`}},
		// Before the api started through lambdaenv.Start, a wrong log
		// level was ignored there.
		{"APIThreeProblems", "api", map[string]string{"SENDONCE_LOG_LEVEL": "loud", "SENDONCE_API_TENANT_RATE": "lots"},
			[]string{"SENDONCE_LOG_LEVEL: ", "SENDONCE_QUEUE_URL is required", "SENDONCE_API_TENANT_RATE: "}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := map[string]string{
				"SENDONCE_TABLE":            "unused",
				"AWS_ENDPOINT_URL_DYNAMODB": testenv.DynamoDBEndpoint(t),
				"SENDONCE_REDACT_KEY":       strings.Repeat("k", 32),
			}
			for k, v := range tt.env {
				env[k] = v
			}
			line := startUpFailure(t, rie.Build(t, tt.function), env)
			for _, want := range tt.want {
				if !strings.Contains(line, want) {
					t.Errorf("start-up failure %s\ndoes not say %s", line, want)
				}
			}
			if strings.Contains(line, "local-secret") {
				t.Errorf("start-up failure %s shows the secret", line)
			}
		})
	}
}

// startUpFailure starts bootstrap under the RIE with env, checks that the
// first invocation fails and returns the one "start-up failed" log line.
func startUpFailure(t *testing.T, bootstrap string, env map[string]string) string {
	t.Helper()
	fn := rie.Start(t, bootstrap, env)
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
	var lines []string
	for l := range strings.Lines(fn.Logs()) {
		if strings.Contains(l, "start-up failed") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 {
		t.Fatalf("%d start-up failure lines, want 1:\n%s", len(lines), fn.Logs())
	}
	return lines[0]
}
