// Command webhook is the delivery-callback Lambda behind a Function URL
// (package webhook). It only wires: configuration from the environment,
// secrets resolved once per container, SDK clients built once, and
// lambda.Start with the EMF metrics flushed after every invocation.
//
// Environment:
//
//	SENDONCE_TABLE                                  the one table (required)
//	SENDONCE_HTTP_PROVIDER_CALLBACK_SECRET[_PARAM]  generic provider's HMAC secret
//	SENDONCE_TWILIO_AUTH_TOKEN[_PARAM]              Twilio auth token
//	SENDONCE_CALLBACK_BASE_URL                      public base URL Twilio posts to
//	SENDONCE_CALLBACK_DEDUP_TTL                     dedup record lifetime (default 168h)
//	SENDONCE_RETENTION                              ledger row retention (default 720h)
//	SENDONCE_REDACT_KEY[_PARAM]                     address-token key (package redact)
//
// A provider without its secret or token is not served (404); with
// neither set (SNS or SMTP only) the webhook answers 404 to everything.
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
	"github.com/sendonce/sendonce/internal/webhook"
)

func main() {
	ctx := context.Background()
	log := lambdaenv.Logger(os.Stdout, os.Getenv)
	slog.SetDefault(log) // libraries that log through slog.Default write JSON too
	env := lambdaenv.New(os.Getenv)
	table := env.Required("SENDONCE_TABLE")
	baseURL := env.URL("SENDONCE_CALLBACK_BASE_URL") // https, or http to a loopback host
	dedupTTL := env.Duration("SENDONCE_CALLBACK_DEDUP_TTL", webhook.DefaultDedupTTL)
	retention := env.Duration("SENDONCE_RETENTION", dynamoledger.DefaultRetention)
	if err := env.Err(); err != nil {
		lambdaenv.Fatal(log, err)
	}

	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		lambdaenv.Fatal(log, err)
	}
	res := secrets.NewFromConfig(awsCfg)
	if err := lambdaenv.SetRedaction(ctx, log, os.Getenv, res); err != nil {
		lambdaenv.Fatal(log, err)
	}
	httpSecret, err := res.Resolve(ctx, os.Getenv("SENDONCE_HTTP_PROVIDER_CALLBACK_SECRET"), os.Getenv("SENDONCE_HTTP_PROVIDER_CALLBACK_SECRET_PARAM"))
	if err != nil {
		lambdaenv.Fatal(log, err)
	}
	twilioToken, err := res.Resolve(ctx, os.Getenv("SENDONCE_TWILIO_AUTH_TOKEN"), os.Getenv("SENDONCE_TWILIO_AUTH_TOKEN_PARAM"))
	if err != nil {
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
	emf := metrics.NewEMF(os.Stdout, "webhook")
	h, err := webhook.New(webhook.Config{
		Ledger:          l,
		Dedup:           dedup,
		HTTPSecret:      []byte(httpSecret),
		TwilioAuthToken: twilioToken,
		PublicBaseURL:   baseURL,
		Metrics:         emf,
		Logger:          log,
	})
	if err != nil {
		lambdaenv.Fatal(log, err)
	}
	lambda.Start(lambdaenv.FlushAfter(emf, log, func(ctx context.Context, req events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
		return h.Handle(ctx, req)
	}))
}
