// Command sender is the SQS-triggered sender Lambda (package sender). It
// only wires: configuration from the environment (README.md, Configuration), SDK
// clients built once per container, and lambda.Start.
//
// Lambda's SQS event source hands each batch to sender.HandleSQS, where
// the path of one record starts (its body) and ends (the batch response);
// docs/architecture.md follows it through the packages in between.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sendonce/sendonce/internal/lambdaenv"
	"github.com/sendonce/sendonce/internal/metrics"
	"github.com/sendonce/sendonce/internal/render"
	"github.com/sendonce/sendonce/internal/secrets"
	"github.com/sendonce/sendonce/internal/sender"
	"github.com/sendonce/sendonce/internal/sendpath"
	"github.com/sendonce/sendonce/internal/templates/dynamotemplates"
)

func main() {
	ctx := context.Background()
	log := lambdaenv.Logger(os.Stdout, os.Getenv)
	slog.SetDefault(log) // libraries that log through slog.Default write JSON too
	env := lambdaenv.New(os.Getenv)
	shared := sendpath.Read(env)
	dlqURL := env.Required("SENDONCE_DLQ_URL")
	concurrency := env.Int("SENDONCE_CONCURRENCY", 10)
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
	templateCache, err := render.ParseCacheTTL(os.Getenv(render.CacheEnv))
	if err != nil {
		lambdaenv.Fatal(log, err)
	}
	renderer := render.New(dynamotemplates.New(lambdaenv.DynamoDB(deps.AWS, os.Getenv), shared.Table), render.WithCacheTTL(templateCache))
	emf := metrics.NewEMF(os.Stdout, "sender")
	s, err := sender.New(sender.Config{
		Ledger:          deps.Ledger,
		Providers:       deps.Providers,
		Renderer:        renderer,
		DeadLetters:     &sender.SQSDeadLetters{Client: sqs.NewFromConfig(deps.AWS), QueueURL: dlqURL},
		Metrics:         emf,
		Logger:          log,
		ProviderTimeout: shared.ProviderTimeout,
		ClaimTimeout:    shared.ClaimTimeout,
		Settle:          shared.Settle,
		RetryBase:       shared.RetryBase,
		Concurrency:     concurrency,
	})
	if err != nil {
		lambdaenv.Fatal(log, err)
	}
	lambda.Start(lambdaenv.FlushAfter(emf, log, func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		return s.WithLogger(lambdaenv.WithRequest(ctx, log)).HandleSQS(ctx, ev)
	}))
}
