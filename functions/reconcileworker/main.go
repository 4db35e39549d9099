// Command reconcileworker is the reconcile worker Lambda (package
// reconcile): Lambda's SQS event source hands it the units of work the
// scheduled reconciler found (reconcile.Find), at most the template's
// ReconcileWorkerConcurrency at once, and it reconciles each unit's rows
// (reconcile.HandleSQS). It only wires: configuration from the
// environment (docs/configuration.md), SDK clients built once per
// container, and lambda.Start.
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
	fn := lambdaenv.Start(ctx, "reconcileworker")
	shared := sendpath.Read(fn.Env)
	maxAttempts := fn.Env.Int("SENDONCE_RECONCILE_MAX_ATTEMPTS", 0) // 0: reconcile.Config's default
	concurrency := fn.Env.Int("SENDONCE_RECONCILE_CONCURRENCY", 0)
	policies := lambdaenv.Value(fn.Env, "SENDONCE_RECONCILE_POLICIES", nil, reconcile.ParsePolicies)
	deps := sendpath.Build(ctx, fn, shared)
	fn.Ready()

	r, err := reconcile.New(reconcile.Config{
		Ledger:          deps.Ledger,
		Renderer:        render.New(dynamotemplates.New(fn.DB, fn.Table)),
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
		Policies:        policies,
		Concurrency:     concurrency,
	})
	fn.Must(err)
	lambdaenv.Serve(fn, func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		return r.HandleSQS(ctx, ev, lambdaenv.WithRequest(ctx, fn.Log)), nil
	})
}
