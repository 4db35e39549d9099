// Command api is the HTTP API Lambda function (API Gateway HTTP API,
// payload format 2.0): POST /v1/notifications and GET
// /v1/notifications/{id} (package api). It only wires: configuration from
// the environment (docs/configuration.md, read through lambdaenv like
// every function), secrets resolved once per container, SDK clients built
// once, and lambda.Start with the EMF metrics flushed after every
// invocation.
package main

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sendonce/sendonce/internal/api"
	"github.com/sendonce/sendonce/internal/api/idempotency/dynamoidempotency"
	"github.com/sendonce/sendonce/internal/api/ratelimit/dynamoratelimit"
	"github.com/sendonce/sendonce/internal/apikey"
	"github.com/sendonce/sendonce/internal/apikey/dynamoapikey"
	"github.com/sendonce/sendonce/internal/lambdaenv"
	"github.com/sendonce/sendonce/internal/ledger/dynamoledger"
)

func main() {
	ctx := context.Background()
	fn := lambdaenv.Start(ctx, "api")
	env := api.ReadEnv(fn.Env)
	fn.Ready()

	// The API only reads the ledger: no retention to set.
	ledger, err := dynamoledger.New(fn.DB, fn.Table, dynamoledger.Config{})
	fn.Must(err)
	h, err := api.New(api.Config{
		Keys:          apikey.New(dynamoapikey.New(fn.DB, fn.Table), apikey.Config{}),
		Ledger:        ledger,
		Queue:         sqs.NewFromConfig(fn.AWS),
		QueueURL:      env.QueueURL,
		Idempotency:   dynamoidempotency.New(fn.DB, fn.Table),
		RateWindows:   dynamoratelimit.New(fn.DB, fn.Table),
		Retention:     env.Retention,
		TenantRate:    env.TenantRate,
		RecipientRate: env.RecipientRate,
		Metrics:       fn.Metrics,
		Logger:        fn.Log,
	})
	fn.Must(err)
	lambdaenv.Serve(fn, h.Handle)
}
