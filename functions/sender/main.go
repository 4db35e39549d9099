// Command sender is the SQS-triggered sender Lambda function. It only
// wires: the configuration from the environment (docs/configuration.md),
// read once per container by lambdaapp.LoadEnvironment, a sendonce.Sender
// built from it, and lambda.Start through lambdaapp.Serve.
//
// Lambda's SQS event source hands each batch to Sender.HandleSQS, where
// the path of one record starts (its body, which notify.Parse reads next)
// and ends (the events.SQSEventResponse returned here);
// docs/architecture.md follows it through the packages in between.
package main

import (
	"context"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sendonce/sendonce"
	"github.com/sendonce/sendonce/lambdaapp"
)

func main() {
	ctx := context.Background()
	env := lambdaapp.LoadEnvironment(ctx, "sender")
	cfg, err := env.SenderConfig(ctx)
	env.Must(err)
	s, err := sendonce.NewSender(cfg)
	env.Must(err)
	lambdaapp.Serve(env, func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		return s.WithLogger(env.RequestLogger(ctx)).HandleSQS(ctx, ev)
	})
}
