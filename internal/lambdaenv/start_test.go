package lambdaenv

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/redact"
)

// TestStartWith: start-up reads the table, the log level and the
// redaction key (made redact's default) and builds the clients; its
// problems and the function's own land in the one Err. Not parallel: it
// changes slog's and redact's defaults.
func TestStartWith(t *testing.T) {
	oldLog, oldRedact := slog.Default(), redact.Default()
	t.Cleanup(func() { slog.SetDefault(oldLog); redact.SetDefault(oldRedact) })
	ctx := context.Background()
	var out strings.Builder

	f := StartWith(ctx, "test", getenv(map[string]string{EnvTable: "t", EnvRedactKey: testKey, EnvLogLevel: "debug"}), &out)
	if l := f.Ledger(); f.Env.Err() != nil || f.Table != "t" || f.DB == nil || l == nil || f.Metrics == nil {
		t.Fatalf("good configuration: Err %v, table %q, DB %v, ledger %v", f.Env.Err(), f.Table, f.DB, l)
	}
	want, _ := redact.New([]byte(testKey))
	if redact.Default().KeyID() != want.KeyID() || slog.Default() != f.Log || !f.Log.Enabled(ctx, slog.LevelDebug) {
		t.Error("Start did not install the key, the logger or its level")
	}
	if !strings.Contains(out.String(), `"redact_key_id":"`+want.KeyID()+`"`) || strings.Contains(out.String(), testKey) {
		t.Errorf("start-up log %q: want the key's id and not the key", out.String())
	}

	f = StartWith(ctx, "test", getenv(map[string]string{EnvLogLevel: "loud", EnvRedactKey: testKey, EnvRedactKeyParam: "/x", EnvRetention: "forever"}), &out)
	if l := f.Ledger(); l != nil {
		t.Error("a ledger without a table")
	}
	err := f.Env.Err()
	for _, want := range []string{EnvLogLevel + ": ", EnvTable + " is required", EnvRedactKey + " and " + EnvRedactKeyParam + " are both set", EnvRetention + `="forever"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Err = %v, want it to say %s", err, want)
		}
	}
	if err != nil && strings.Contains(err.Error(), testKey) {
		t.Errorf("Err %q shows the key", err)
	}
}

// TestStartWithStack: the EMF recorder writes in the namespace of the
// stack SENDONCE_STACK names (metrics.StackNamespace), the plain one
// without it, and a value that is no stack name is a start-up problem.
func TestStartWithStack(t *testing.T) {
	oldLog, oldRedact := slog.Default(), redact.Default()
	t.Cleanup(func() { slog.SetDefault(oldLog); redact.SetDefault(oldRedact) })
	ctx := context.Background()
	var out strings.Builder
	for stack, want := range map[string]string{"prod-eu": "sendonce/prod-eu", "": "sendonce"} {
		f := StartWith(ctx, "sender", getenv(map[string]string{EnvTable: "t", EnvRedactKey: testKey, EnvStack: stack}), &out)
		if f.Env.Err() != nil || f.Metrics.Namespace() != want {
			t.Errorf("%s=%q: namespace %q (Err %v), want %q", EnvStack, stack, f.Metrics.Namespace(), f.Env.Err(), want)
		}
	}
	for _, bad := range []string{"prod/eu", "1prod", "prod_eu", strings.Repeat("a", 129)} {
		f := StartWith(ctx, "sender", getenv(map[string]string{EnvTable: "t", EnvRedactKey: testKey, EnvStack: bad}), &out)
		if err := f.Env.Err(); err == nil || !strings.Contains(err.Error(), EnvStack) {
			t.Errorf("%s=%q: Err %v, want it refused", EnvStack, bad, err)
		}
	}
}
