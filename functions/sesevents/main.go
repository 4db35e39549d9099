// Command sesevents is the Lambda that applies Amazon SES email events
// (bounce, complaint, delivery, reject) to the ledger (package sesevents).
// Its event source is the SNS topic of the ses provider's configuration
// set. It only wires: configuration from the environment, SDK clients
// built once, and lambda.Start with the EMF metrics flushed after every
// invocation.
//
// Environment:
//
//	SENDONCE_TABLE                the one table (required)
//	SENDONCE_CALLBACK_DEDUP_TTL   event dedup record lifetime (default 168h)
//	SENDONCE_RETENTION            ledger row retention (default 720h)
//	SENDONCE_REDACT_KEY_PARAM     the address-token key (see the README)
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
	"github.com/sendonce/sendonce/internal/secrets"
	"github.com/sendonce/sendonce/internal/sesevents"
	"github.com/sendonce/sendonce/internal/webhook"
)

func main() {
	ctx := context.Background()
	log := lambdaenv.Logger(os.Stdout, os.Getenv)
	slog.SetDefault(log)
	env := lambdaenv.New(os.Getenv)
	table := env.Required("SENDONCE_TABLE")
	dedupTTL := env.Duration("SENDONCE_CALLBACK_DEDUP_TTL", webhook.DefaultDedupTTL)
	retention := env.Duration("SENDONCE_RETENTION", dynamoledger.DefaultRetention)
	if err := env.Err(); err != nil {
		lambdaenv.Fatal(log, err)
	}

	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		lambdaenv.Fatal(log, err)
	}
	if err := lambdaenv.SetRedaction(ctx, log, os.Getenv, secrets.NewFromConfig(awsCfg)); err != nil {
		lambdaenv.Fatal(log, err)
	}
	db := lambdaenv.DynamoDB(awsCfg, os.Getenv)
	l, err := dynamoledger.New(db, table, dynamoledger.WithRetention(retention))
	if err != nil {
		lambdaenv.Fatal(log, err)
	}
	dedup, err := webhook.NewDynamoDedup(db, table, dedupTTL, nil)
	if err != nil {
		lambdaenv.Fatal(log, err)
	}
	emf := metrics.NewEMF(os.Stdout, "sesevents")
	// No callback secrets: the webhook handler serves no HTTP route here,
	// only its Apply (dedup, ranks, ledger write).
	apply, err := webhook.New(webhook.Config{Ledger: l, Dedup: dedup, Metrics: emf, Logger: log})
	if err != nil {
		lambdaenv.Fatal(log, err)
	}
	h, err := sesevents.New(apply, emf, log)
	if err != nil {
		lambdaenv.Fatal(log, err)
	}
	// An error makes Lambda retry the (asynchronous) invocation; the
	// answer itself carries nothing.
	lambda.Start(lambdaenv.FlushAfter(emf, log, func(ctx context.Context, e events.SNSEvent) (struct{}, error) {
		return struct{}{}, h.Handle(ctx, e)
	}))
}
