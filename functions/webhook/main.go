// Command webhook is the delivery-callback Lambda behind a Function URL
// (package webhook). It only wires: configuration from the environment
// (docs/configuration.md), secrets resolved once per container, SDK
// clients built once, and lambda.Start with the EMF metrics flushed after
// every invocation.
//
// A provider without its secret or token is not served (404); with
// neither set (SNS or SMTP only) the webhook answers 404 to everything.
package main

import (
	"context"

	"github.com/sendonce/sendonce/internal/lambdaenv"
	"github.com/sendonce/sendonce/internal/webhook"
	"github.com/sendonce/sendonce/internal/webhook/dynamodedup"
)

func main() {
	ctx := context.Background()
	fn := lambdaenv.Start(ctx, "webhook")
	ledger := fn.Ledger()
	dedupTTL := fn.Env.Duration("SENDONCE_CALLBACK_DEDUP_TTL", webhook.DefaultDedupTTL)
	httpSecret := fn.Env.Secret(ctx, "SENDONCE_HTTP_PROVIDER_CALLBACK_SECRET")
	twilioToken := fn.Env.Secret(ctx, "SENDONCE_TWILIO_AUTH_TOKEN")
	baseURL := fn.Env.URL("SENDONCE_CALLBACK_BASE_URL") // https, or http to a loopback host
	fn.Ready()

	dedup, err := dynamodedup.New(fn.DB, fn.Table, dynamodedup.Config{TTL: dedupTTL})
	fn.Must(err)
	h, err := webhook.New(webhook.Config{
		Ledger:          ledger,
		Dedup:           dedup,
		HTTPSecret:      []byte(httpSecret),
		TwilioAuthToken: twilioToken,
		PublicBaseURL:   baseURL,
		Metrics:         fn.Metrics,
		Logger:          fn.Log,
	})
	fn.Must(err)
	lambdaenv.Serve(fn, h.Handle)
}
