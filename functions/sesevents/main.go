// Command sesevents is the Lambda function that applies Amazon SES email
// events (send, delivery, bounce, complaint, reject) to the ledger. Its
// event source is the SNS topic of the ses provider's configuration set.
// It only wires: the configuration from the environment
// (docs/configuration.md), read once per container by
// lambdaapp.LoadEnvironment, sendonce.Callbacks built from it (without
// the HTTP callbacks' secrets: it serves no HTTP route), and lambda.Start
// through lambdaapp.Serve.
package main

import (
	"context"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sendonce/sendonce"
	"github.com/sendonce/sendonce/lambdaapp"
)

func main() {
	ctx := context.Background()
	env := lambdaapp.LoadEnvironment(ctx, "sesevents")
	cfg, err := env.CallbacksConfig(ctx, false)
	env.Must(err)
	c, err := sendonce.NewCallbacks(cfg)
	env.Must(err)
	// An error makes Lambda retry the (asynchronous) invocation; the
	// answer itself carries nothing.
	lambdaapp.Serve(env, func(ctx context.Context, e events.SNSEvent) (struct{}, error) {
		return struct{}{}, c.HandleSESEvents(ctx, e)
	})
}
