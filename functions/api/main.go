// Command api is the HTTP API Lambda function (API Gateway HTTP API,
// payload format 2.0): POST /v1/notifications and GET
// /v1/notifications/{id} (package api). It only wires: configuration from
// the environment (api.LoadEnv), secrets resolved once per container, SDK
// clients built once, and lambda.Start with the EMF metrics flushed after
// every invocation.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sendonce/sendonce/internal/api"
	"github.com/sendonce/sendonce/internal/api/idempotency"
	"github.com/sendonce/sendonce/internal/apikey"
	"github.com/sendonce/sendonce/internal/lambdaenv"
	"github.com/sendonce/sendonce/internal/ledger/dynamoledger"
	"github.com/sendonce/sendonce/internal/metrics"
	"github.com/sendonce/sendonce/internal/secrets"
)

func main() {
	ctx := context.Background()
	log := lambdaenv.Logger(os.Stdout, os.Getenv)
	slog.SetDefault(log) // libraries that log through slog.Default write JSON too
	env, err := api.LoadEnv(os.Getenv)
	if err != nil {
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
	l, err := dynamoledger.New(db, env.Table)
	if err != nil {
		lambdaenv.Fatal(log, err)
	}
	emf := metrics.NewEMF(os.Stdout, "api")
	h, err := api.New(api.Config{
		Keys:          apikey.New(db, env.Table),
		Ledger:        l,
		Queue:         sqs.NewFromConfig(awsCfg),
		QueueURL:      env.QueueURL,
		Idempotency:   idempotency.NewDynamoRecords(db, env.Table),
		RateWindows:   api.NewDynamoWindows(db, env.Table),
		Retention:     env.Retention,
		TenantRate:    env.TenantRate,
		RecipientRate: env.RecipientRate,
		Metrics:       emf,
		Logger:        log,
	})
	if err != nil {
		lambdaenv.Fatal(log, err)
	}
	lambda.Start(lambdaenv.FlushAfter(emf, log, h.Handle))
}
