// Command reconciler is the scheduled reconciler Lambda function, invoked
// by an EventBridge schedule. It only wires: the configuration from the
// environment (docs/configuration.md), read once per container by
// sendonce.LoadEnvironment, a sendonce.Reconciler built from it, and
// lambda.Start through sendonce.Serve.
package main

import (
	"context"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sendonce/sendonce"
)

func main() {
	ctx := context.Background()
	env := sendonce.LoadEnvironment(ctx, "reconciler")
	cfg, err := env.ReconcilerConfig(ctx)
	env.Must(err)
	r, err := sendonce.NewReconciler(cfg)
	env.Must(err)
	sendonce.Serve(env, func(ctx context.Context, _ events.EventBridgeEvent) (sendonce.ReconcileReport, error) {
		rep, err := r.Run(ctx)
		env.RequestLogger(ctx).Info("reconcile run", "examined", rep.Examined, "actions", rep.Actions, "oldest_due_ms", rep.OldestDueMillis, "truncated", rep.Truncated)
		return rep, err
	})
}
