// Command reconciler is the scheduled reconciler Lambda (package
// reconcile), invoked by an EventBridge schedule. It only wires:
// configuration from the environment (docs/configuration.md), SDK
// clients built once per container, and lambda.Start.
package main

import (
	"context"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sendonce/sendonce/internal/lambdaenv"
	"github.com/sendonce/sendonce/internal/reconcile"
	"github.com/sendonce/sendonce/internal/render"
	"github.com/sendonce/sendonce/internal/sendpath"
	"github.com/sendonce/sendonce/internal/templates/dynamotemplates"
)

func main() {
	ctx := context.Background()
	fn := lambdaenv.Start(ctx, "reconciler")
	shared := sendpath.Read(fn.Env)
	maxAttempts := fn.Env.Int("SENDONCE_RECONCILE_MAX_ATTEMPTS", 0) // 0: reconcile.Config's default
	maxRows := fn.Env.Int("SENDONCE_RECONCILE_MAX_ROWS", 0)
	policies := lambdaenv.Value(fn.Env, "SENDONCE_RECONCILE_POLICIES", nil, reconcile.ParsePolicies)
	deps := sendpath.Build(ctx, fn, shared)
	fn.Ready()

	// A resend renders a stored template's version again (versions are
	// immutable: the cache TTL does not apply to them).
	renderer := render.New(dynamotemplates.New(fn.DB, fn.Table, dynamotemplates.Config{}), render.Config{CacheTTL: shared.TemplateCache})
	r, err := reconcile.New(reconcile.Config{
		Ledger:          deps.Ledger,
		Renderer:        renderer,
		Providers:       deps.Providers,
		Fallbacks:       deps.Fallbacks,
		Metrics:         fn.Metrics,
		Logger:          fn.Log,
		ProviderTimeout: shared.ProviderTimeout,
		ClaimTimeout:    shared.ClaimTimeout,
		Settle:          shared.Settle,
		MaxAge:          shared.MaxAge,
		RetryBase:       shared.RetryBase,
		MaxAttempts:     maxAttempts,
		MaxRows:         maxRows,
		Policies:        policies,
	})
	fn.Must(err)
	lambdaenv.Serve(fn, func(ctx context.Context, _ events.EventBridgeEvent) (reconcile.Summary, error) {
		rep, err := r.Run(ctx)
		sum := rep.Summary()
		lambdaenv.WithRequest(ctx, fn.Log).Info("reconcile run", "examined", sum.Examined, "actions", sum.Actions, "oldest_due_ms", sum.OldestDueMillis, "truncated", sum.Truncated)
		return sum, err
	})
}
