// Command api is the HTTP API Lambda function (API Gateway HTTP API,
// payload format 2.0): POST /v1/notifications and GET
// /v1/notifications/{id}. See package api for the behaviour and
// api.LoadEnv for its environment.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sendonce/sendonce/internal/api"
	"github.com/sendonce/sendonce/internal/apikey"
	"github.com/sendonce/sendonce/internal/lambdaenv"
	"github.com/sendonce/sendonce/internal/ledger/dynamoledger"
	"github.com/sendonce/sendonce/internal/metrics"
	"github.com/sendonce/sendonce/internal/secrets"
)

func main() {
	logger := lambdaenv.Logger(os.Stdout, os.Getenv)
	slog.SetDefault(logger) // libraries that log through slog.Default write JSON too
	h, err := setup(context.Background(), logger)
	if err != nil {
		logger.Error("api: start-up failed", "err", err)
		os.Exit(1)
	}
	lambda.Start(h.Handle)
}

func setup(ctx context.Context, logger *slog.Logger) (*api.Handler, error) {
	env, err := api.LoadEnv(os.Getenv)
	if err != nil {
		return nil, err
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, err
	}
	if err := lambdaenv.SetRedaction(ctx, logger, os.Getenv, secrets.NewFromConfig(cfg)); err != nil {
		return nil, err
	}
	db := lambdaenv.DynamoDB(cfg, os.Getenv)
	led, err := dynamoledger.New(db, env.Table)
	if err != nil {
		return nil, err
	}
	return api.New(api.Config{
		Keys:          apikey.New(db, env.Table),
		Ledger:        led,
		Queue:         sqs.NewFromConfig(cfg),
		QueueURL:      env.QueueURL,
		DB:            db,
		Table:         env.Table,
		Retention:     env.Retention,
		TenantRate:    env.TenantRate,
		RecipientRate: env.RecipientRate,
		Metrics:       metrics.NewEMF(os.Stdout, "api"),
		Logger:        logger,
	})
}
