// Command sesevents is the Lambda that applies Amazon SES email events
// (bounce, complaint, delivery, reject) to the ledger (package sesevents).
// Its event source is the SNS topic of the ses provider's configuration
// set. It only wires: configuration from the environment
// (docs/configuration.md), SDK clients built once, and lambda.Start with
// the EMF metrics flushed after every invocation.
package main

import (
	"context"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sendonce/sendonce/internal/lambdaenv"
	"github.com/sendonce/sendonce/internal/sesevents"
	"github.com/sendonce/sendonce/internal/webhook"
	"github.com/sendonce/sendonce/internal/webhook/dynamodedup"
)

func main() {
	ctx := context.Background()
	fn := lambdaenv.Start(ctx, "sesevents")
	ledger := fn.Ledger()
	dedupTTL := fn.Env.Duration("SENDONCE_CALLBACK_DEDUP_TTL", webhook.DefaultDedupTTL)
	fn.Ready()

	dedup, err := dynamodedup.New(fn.DB, fn.Table, dynamodedup.Config{TTL: dedupTTL})
	fn.Must(err)
	// No callback secrets: the webhook handler serves no HTTP route here,
	// only its Apply (dedup, ranks, ledger write).
	apply, err := webhook.New(webhook.Config{Ledger: ledger, Dedup: dedup, Metrics: fn.Metrics, Logger: fn.Log})
	fn.Must(err)
	h, err := sesevents.New(apply, fn.Metrics, fn.Log)
	fn.Must(err)
	// An error makes Lambda retry the (asynchronous) invocation; the
	// answer itself carries nothing.
	lambdaenv.Serve(fn, func(ctx context.Context, e events.SNSEvent) (struct{}, error) {
		return struct{}{}, h.Handle(ctx, e)
	})
}
