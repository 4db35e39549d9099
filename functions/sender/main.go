// Command sender is the SQS-triggered sender Lambda (package sender). It
// only wires: configuration from the environment (CONTRACTS §3), SDK
// clients built once per container, and lambda.Start.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sendonce/sendonce/internal/lambdaenv"
	"github.com/sendonce/sendonce/internal/ledger/dynamoledger"
	"github.com/sendonce/sendonce/internal/metrics"
	"github.com/sendonce/sendonce/internal/provider/registry"
	"github.com/sendonce/sendonce/internal/render"
	"github.com/sendonce/sendonce/internal/sender"
)

func main() {
	ctx := context.Background()
	log := lambdaenv.Logger(os.Stdout, os.Getenv)
	slog.SetDefault(log) // libraries that log through slog.Default write JSON too
	env := lambdaenv.New(os.Getenv)
	table := env.Required("SENDONCE_TABLE")
	dlqURL := env.Required("SENDONCE_DLQ_URL")
	providerTimeout := env.Duration("SENDONCE_PROVIDER_TIMEOUT", sender.DefaultProviderTimeout)
	claimTimeout := env.Duration("SENDONCE_CLAIM_TIMEOUT", sender.DefaultClaimTimeout)
	retention := env.Duration("SENDONCE_RETENTION", dynamoledger.DefaultRetention)
	settle := env.Duration("SENDONCE_RECONCILE_SETTLE", sender.DefaultSettle)
	concurrency := env.Int("SENDONCE_CONCURRENCY", 10)
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
	emf := metrics.NewEMF(os.Stdout, "sender")
	s, err := sender.New(sender.Config{
		Ledger:          l,
		Providers:       providers,
		Renderer:        render.MustNew(),
		DeadLetters:     &sender.SQSDeadLetters{Client: sqs.NewFromConfig(awsCfg), QueueURL: dlqURL},
		Metrics:         emf,
		Logger:          log,
		ProviderTimeout: providerTimeout,
		ClaimTimeout:    claimTimeout,
		Settle:          settle,
		Concurrency:     concurrency,
	})
	if err != nil {
		lambdaenv.Fatal(log, err)
	}
	lambda.Start(lambdaenv.FlushAfter(emf, log, func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		return s.WithLogger(lambdaenv.WithRequest(ctx, log)).HandleSQS(ctx, ev)
	}))
}
