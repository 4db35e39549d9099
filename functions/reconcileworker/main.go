// Command reconcileworker is the reconcile worker Lambda function:
// Lambda's SQS event source hands it the units of work the scheduled
// reconciler found (sendonce.Reconciler.Find), at most the template's
// ReconcileWorkerConcurrency at once, and it settles each unit's rows
// (sendonce.Reconciler.HandleSQS). It only wires: the configuration from
// the environment (docs/configuration.md), read once per container by
// lambdaapp.LoadEnvironment, a sendonce.Reconciler built from it, and
// lambda.Start through lambdaapp.Serve.
package main

import (
	"context"

	"github.com/sendonce/sendonce"
	"github.com/sendonce/sendonce/lambdaapp"
)

func main() {
	ctx := context.Background()
	env := lambdaapp.LoadEnvironment(ctx, "reconcileworker")
	cfg, err := env.ReconcilerConfig(ctx)
	env.Must(err)
	r, err := sendonce.NewReconciler(cfg)
	env.Must(err)
	lambdaapp.Serve(env, r.HandleSQS)
}
