// Command webhook is the delivery-callback Lambda function behind its
// function URL (/callbacks/http, /callbacks/twilio). It only wires: the
// configuration from the environment (docs/configuration.md), read once
// per container by lambdaapp.LoadEnvironment, sendonce.Callbacks built
// from it, and lambda.Start through lambdaapp.Serve.
//
// A provider without its secret or token is not served (404); with
// neither set (SNS or SMTP only) the webhook answers 404 to everything.
package main

import (
	"context"

	"github.com/sendonce/sendonce"
	"github.com/sendonce/sendonce/lambdaapp"
)

func main() {
	ctx := context.Background()
	env := lambdaapp.LoadEnvironment(ctx, "webhook")
	cfg, err := env.CallbacksConfig(ctx, true)
	env.Must(err)
	c, err := sendonce.NewCallbacks(cfg)
	env.Must(err)
	lambdaapp.Serve(env, c.HandleFunctionURL)
}
