// Command reconciler is the scheduled reconciler Lambda (package
// reconcile), invoked by an EventBridge schedule. It only wires.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"

	"github.com/sendonce/sendonce/internal/lambdaenv"
	"github.com/sendonce/sendonce/internal/ledger/dynamoledger"
	"github.com/sendonce/sendonce/internal/metrics"
	"github.com/sendonce/sendonce/internal/provider/registry"
	"github.com/sendonce/sendonce/internal/reconcile"
	"github.com/sendonce/sendonce/internal/sender"
)

func main() {
	ctx := context.Background()
	log := lambdaenv.Logger(os.Stdout, os.Getenv)
	slog.SetDefault(log) // libraries that log through slog.Default write JSON too
	env := lambdaenv.New(os.Getenv)
	table := env.Required("SENDONCE_TABLE")
	providerTimeout := env.Duration("SENDONCE_PROVIDER_TIMEOUT", sender.DefaultProviderTimeout)
	claimTimeout := env.Duration("SENDONCE_CLAIM_TIMEOUT", sender.DefaultClaimTimeout)
	retention := env.Duration("SENDONCE_RETENTION", dynamoledger.DefaultRetention)
	settle := env.Duration("SENDONCE_RECONCILE_SETTLE", reconcile.DefaultSettle)
	maxAttempts := env.Int("SENDONCE_RECONCILE_MAX_ATTEMPTS", reconcile.DefaultMaxAttempts)
	maxRows := env.Int("SENDONCE_RECONCILE_MAX_ROWS", reconcile.DefaultMaxRows)
	policies, err := reconcile.ParsePolicies(env.String("SENDONCE_RECONCILE_POLICIES", ""))
	if err != nil {
		env.Fail(err)
	}
	if err := env.Err(); err != nil {
		lambdaenv.Fatal(log, err)
	}

	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		lambdaenv.Fatal(log, err)
	}
	l, err := dynamoledger.New(lambdaenv.DynamoDB(awsCfg, os.Getenv), table, dynamoledger.WithRetention(retention))
	if err != nil {
		lambdaenv.Fatal(log, err)
	}
	providers, err := registry.FromEnv(ctx, os.Getenv, awsCfg)
	if err != nil {
		lambdaenv.Fatal(log, err)
	}
	emf := metrics.NewEMF(os.Stdout, "reconciler")
	r, err := reconcile.New(reconcile.Config{
		Ledger:          l,
		Providers:       providers,
		Metrics:         emf,
		Logger:          log,
		ProviderTimeout: providerTimeout,
		ClaimTimeout:    claimTimeout,
		Settle:          settle,
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
