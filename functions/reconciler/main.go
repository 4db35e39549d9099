// Command reconciler is the scheduled reconciler Lambda function, invoked
// by an EventBridge schedule. With SENDONCE_RECONCILE_QUEUE_URL set (as
// the SAM application sets it) it only finds the work and hands it out to
// the reconcile workers (sendonce.Reconciler.Find, functions/reconcileworker),
// with no provider and no secret, and watches for a provider's recovery
// and the workers' progress until shortly before the next run
// (sendonce.Reconciler.Watch); without it, it settles the rows itself
// (Run). It only wires: the configuration from the environment
// (docs/configuration.md), read once per container by
// lambdaapp.LoadEnvironment, a sendonce.Reconciler built from it, and
// lambda.Start through lambdaapp.Serve.
package main

import (
	"context"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sendonce/sendonce"
	"github.com/sendonce/sendonce/lambdaapp"
)

func main() {
	ctx := context.Background()
	env := lambdaapp.LoadEnvironment(ctx, "reconciler")
	if q := env.ReconcileQueue(); q != nil {
		cfg, err := env.FinderConfig()
		env.Must(err)
		r, err := sendonce.NewReconciler(cfg)
		env.Must(err)
		lambdaapp.Serve(env, func(ctx context.Context, _ events.EventBridgeEvent) (sendonce.FindReport, error) {
			since := time.Now()
			rep, err := r.Find(ctx, q)
			env.RequestLogger(ctx).Info("reconcile hand-out", "found", rep.Found, "units", rep.Units, "lost", rep.Lost, "busy", rep.Busy, "waiting", rep.Waiting, "oldest_due_ms", rep.OldestDueMillis, "truncated", rep.Truncated)
			if err != nil {
				return rep, err
			}
			// While a provider is down or a backlog drains: a hand-out at
			// its recovery, and as soon as the workers took the last.
			w, err := r.Watch(ctx, q, since, rep)
			if w.Units > 0 || err != nil {
				env.RequestLogger(ctx).Info("reconcile watch", "found", w.Found, "units", w.Units, "lost", w.Lost, "truncated", w.Truncated, "error", err)
			}
			rep.Found, rep.Units, rep.Lost = rep.Found+w.Found, rep.Units+w.Units, rep.Lost+w.Lost
			return rep, err
		})
		return
	}
	cfg, err := env.ReconcilerConfig(ctx)
	env.Must(err)
	r, err := sendonce.NewReconciler(cfg)
	env.Must(err)
	lambdaapp.Serve(env, func(ctx context.Context, _ events.EventBridgeEvent) (sendonce.ReconcileReport, error) {
		rep, err := r.Run(ctx)
		env.RequestLogger(ctx).Info("reconcile run", "examined", rep.Examined, "actions", rep.Actions, "oldest_due_ms", rep.OldestDueMillis, "truncated", rep.Truncated)
		return rep, err
	})
}
