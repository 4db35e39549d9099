// Command reconciler is the scheduled reconciler Lambda (package
// reconcile), invoked by an EventBridge schedule. It only wires.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/sendonce/sendonce/internal/decide"
	"github.com/sendonce/sendonce/internal/lambdaenv"
	"github.com/sendonce/sendonce/internal/metrics"
	"github.com/sendonce/sendonce/internal/reconcile"
	"github.com/sendonce/sendonce/internal/render"
	"github.com/sendonce/sendonce/internal/secrets"
	"github.com/sendonce/sendonce/internal/sendpath"
	"github.com/sendonce/sendonce/internal/templates/dynamotemplates"
)

func main() {
	ctx := context.Background()
	log := lambdaenv.Logger(os.Stdout, os.Getenv)
	slog.SetDefault(log) // libraries that log through slog.Default write JSON too
	env := lambdaenv.New(os.Getenv)
	shared := sendpath.Read(env)
	maxAttempts := env.Int("SENDONCE_RECONCILE_MAX_ATTEMPTS", decide.DefaultMaxAttempts)
	maxRows := env.Int("SENDONCE_RECONCILE_MAX_ROWS", reconcile.DefaultMaxRows)
	policies, err := reconcile.ParsePolicies(env.String("SENDONCE_RECONCILE_POLICIES", ""))
	if err != nil {
		env.Fail(err)
	}
	if err := env.Err(); err != nil {
		lambdaenv.Fatal(log, err)
	}

	deps, err := sendpath.Build(ctx, shared, os.Getenv)
	if err != nil {
		lambdaenv.Fatal(log, err)
	}
	if err := lambdaenv.SetRedaction(ctx, log, os.Getenv, secrets.NewFromConfig(deps.AWS)); err != nil {
		lambdaenv.Fatal(log, err)
	}
	emf := metrics.NewEMF(os.Stdout, "reconciler")
	// A resend renders a stored template's version again (versions are
	// immutable: no cache TTL applies to them).
	renderer := render.New(dynamotemplates.New(lambdaenv.DynamoDB(deps.AWS, os.Getenv), shared.Table))
	r, err := reconcile.New(reconcile.Config{
		Ledger:          deps.Ledger,
		Renderer:        renderer,
		Providers:       deps.Providers,
		Metrics:         emf,
		Logger:          log,
		ProviderTimeout: shared.ProviderTimeout,
		ClaimTimeout:    shared.ClaimTimeout,
		Settle:          shared.Settle,
		MaxAge:          shared.MaxAge,
		RetryBase:       shared.RetryBase,
		MaxAttempts:     maxAttempts,
		MaxRows:         maxRows,
		Policies:        policies,
	})
	if err != nil {
		lambdaenv.Fatal(log, err)
	}
	lambda.Start(lambdaenv.FlushAfter(emf, log, func(ctx context.Context, _ events.EventBridgeEvent) (reconcile.Summary, error) {
		rep, err := r.Run(ctx)
		sum := rep.Summary()
		lambdaenv.WithRequest(ctx, log).Info("reconcile run", "examined", sum.Examined, "actions", sum.Actions, "oldest_due_ms", sum.OldestDueMillis, "truncated", sum.Truncated)
		return sum, err
	}))
}
