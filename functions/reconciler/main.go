// Command reconciler is the scheduled reconciler Lambda (package
// reconcile), invoked by an EventBridge schedule. With
// SENDONCE_RECONCILE_QUEUE_URL set (as the template sets it) it only finds
// the work and hands it out to the reconcile workers (reconcile.Find,
// functions/reconcileworker); without, it does the work itself
// (reconcile.Run). It only wires:
// configuration from the environment (docs/configuration.md), SDK
// clients built once per container, and lambda.Start.
package main

import (
	"context"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

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
	pageSize := fn.Env.Int("SENDONCE_RECONCILE_PAGE_SIZE", 0)
	queueURL := fn.Env.String("SENDONCE_RECONCILE_QUEUE_URL", "")
	policies := lambdaenv.Value(fn.Env, "SENDONCE_RECONCILE_POLICIES", nil, reconcile.ParsePolicies)
	if queueURL != "" {
		// It reads the index and hands out keys: no provider, no secret.
		ledger := fn.Ledger()
		fn.Ready()
		r, err := reconcile.New(reconcile.Config{Ledger: ledger, Metrics: fn.Metrics, Logger: fn.Log,
			ProviderTimeout: shared.ProviderTimeout, ClaimTimeout: shared.ClaimTimeout, MaxRows: maxRows, PageSize: pageSize})
		fn.Must(err)
		q := &reconcile.SQSQueue{Client: sqs.NewFromConfig(fn.AWS), QueueURL: queueURL}
		lambdaenv.Serve(fn, func(ctx context.Context, _ events.EventBridgeEvent) (reconcile.FindReport, error) {
			rep, err := r.Find(ctx, q)
			lambdaenv.WithRequest(ctx, fn.Log).Info("reconcile hand-out", "found", rep.Found, "units", rep.Units, "lost", rep.Lost, "busy", rep.Busy, "waiting", rep.Waiting, "oldest_due_ms", rep.OldestDueMillis, "truncated", rep.Truncated)
			return rep, err
		})
		return
	}
	deps := sendpath.Build(ctx, fn, shared)
	fn.Ready()

	// A resend renders a stored template's version again (versions are
	// immutable: no cache TTL applies to them).
	renderer := render.New(dynamotemplates.New(fn.DB, fn.Table))
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
