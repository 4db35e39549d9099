// Command sender is the SQS-triggered sender Lambda (package sender). It
// only wires: configuration from the environment (docs/configuration.md),
// SDK clients built once per container, and lambda.Start.
//
// Lambda's SQS event source hands each batch to sender.Sender.HandleSQS,
// where the path of one record starts (its body, which notify.Parse reads
// next) and ends (the events.SQSEventResponse returned here);
// docs/architecture.md follows it through the packages in between.
package main

import (
	"context"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sendonce/sendonce/internal/lambdaenv"
	"github.com/sendonce/sendonce/internal/render"
	"github.com/sendonce/sendonce/internal/sender"
	"github.com/sendonce/sendonce/internal/sendpath"
	"github.com/sendonce/sendonce/internal/templates/dynamotemplates"
)

func main() {
	ctx := context.Background()
	fn := lambdaenv.Start(ctx, "sender")
	shared := sendpath.Read(fn.Env)
	dlqURL := fn.Env.Required("SENDONCE_DLQ_URL")
	concurrency := fn.Env.Int("SENDONCE_CONCURRENCY", 0) // 0: sender.Config's default
	templateCache, err := render.ParseCacheTTL(fn.Env.String(render.CacheEnv, ""))
	fn.Env.Fail(err)
	deps := sendpath.Build(ctx, fn, shared)
	fn.Ready()

	renderer := render.New(dynamotemplates.New(fn.DB, fn.Table), render.WithCacheTTL(templateCache))
	s, err := sender.New(sender.Config{
		Ledger:          deps.Ledger,
		Providers:       deps.Providers,
		Fallbacks:       deps.Fallbacks,
		Renderer:        renderer,
		DeadLetters:     &sender.SQSDeadLetters{Client: sqs.NewFromConfig(fn.AWS), QueueURL: dlqURL},
		Metrics:         fn.Metrics,
		Logger:          fn.Log,
		ProviderTimeout: shared.ProviderTimeout,
		ClaimTimeout:    shared.ClaimTimeout,
		Settle:          shared.Settle,
		RetryBase:       shared.RetryBase,
		Validity:        shared.Validity,
		Concurrency:     concurrency,
	})
	fn.Must(err)
	lambdaenv.Serve(fn, func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		return s.WithLogger(lambdaenv.WithRequest(ctx, fn.Log)).HandleSQS(ctx, ev)
	})
}
