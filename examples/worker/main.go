// Command worker is a long-running sendonce sender for a container
// (ECS, Kubernetes) rather than Lambda: it polls the notification queue
// itself and hands each request to sendonce.Sender.Send.
//
// For each message it receives (long polling, WORKER_VISIBILITY as the
// visibility timeout):
//
//	sent, failed, uncertain, duplicate   deleted: the ledger holds the outcome
//	                                     (an uncertain one is the reconciler's)
//	retry                                left on the queue: SQS delivers it
//	                                     again after the visibility timeout
//	invalid                              put on the dead-letter queue with
//	                                     its reason, then deleted
//
// Each Send gets WORKER_SEND_TIMEOUT as its deadline
// (sendonce.SenderConfig.SendTimeout). It must leave room for the longest
// step (a lookup and a send, two provider calls, plus the ledger margin:
// with the defaults, 15s), or sendonce.NewSender refuses it; and it must
// be well inside the visibility timeout: a message whose step outlives
// its visibility is received again by another poller (the ledger still
// sends it once, but the work is wasted). A class's validity counts from
// the message's SentTimestamp (sendonce.EnqueuedAt): an OTP that waited
// past its validity in the queue is never sent. On SIGTERM or SIGINT it stops
// polling, finishes the messages it holds, and exits 0: give the
// container a stop timeout above WORKER_SEND_TIMEOUT.
//
// Configuration: the sender's (docs/configuration.md: SENDONCE_TABLE,
// SENDONCE_DLQ_URL, SENDONCE_SMS_PROVIDER, ...), read by
// lambdaapp.LoadEnvironment as the SAM application's sender reads it, and:
//
//	SENDONCE_QUEUE_URL   the notification queue to poll (required)
//	WORKER_POLLERS       receive loops run at once (default 2)
//	WORKER_VISIBILITY    visibility timeout of a received message (default 60s)
//	WORKER_SEND_TIMEOUT  deadline of one Send (default 20s)
//	WORKER_WAIT          long-poll wait of one receive (default 20s, at most 20s)
//
// The reconciler still runs on its schedule (the SAM application's, or
// sendonce.NewReconciler in a program of your own).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sendonce/sendonce"
	"github.com/sendonce/sendonce/lambdaapp"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	env := lambdaapp.LoadEnvironment(ctx, "worker")
	cfg, err := env.SenderConfig(ctx)
	env.Must(err)
	w, err := settings(os.Getenv)
	env.Must(err)
	// NewSender refuses a deadline too short for a step's longest path.
	cfg.SendTimeout = w.SendTimeout
	s, err := sendonce.NewSender(cfg)
	env.Must(err)
	// The Environment builds its AWS configuration the SDK's standard
	// way; the worker loads its own the same way for its SQS client.
	awsCfg, err := config.LoadDefaultConfig(ctx)
	env.Must(err)
	w.SQS = sqs.NewFromConfig(awsCfg)
	w.Sender = s
	w.DeadLetters = cfg.DeadLetters
	w.Metrics = env.Metrics()
	w.Log = env.Logger()
	if err := w.Run(ctx); err != nil {
		env.Must(fmt.Errorf("worker: %w", err))
	}
	w.Log.Info("stopped")
}

// settings reads the worker's own variables.
func settings(getenv func(string) string) (*Worker, error) {
	w := &Worker{QueueURL: getenv("SENDONCE_QUEUE_URL"), Pollers: 2, Visibility: 60 * time.Second, SendTimeout: 20 * time.Second, Wait: 20 * time.Second}
	var errs []error
	if w.QueueURL == "" {
		errs = append(errs, errors.New("SENDONCE_QUEUE_URL is required"))
	}
	for name, d := range map[string]*time.Duration{"WORKER_VISIBILITY": &w.Visibility, "WORKER_SEND_TIMEOUT": &w.SendTimeout, "WORKER_WAIT": &w.Wait} {
		if v := getenv(name); v != "" {
			p, err := time.ParseDuration(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: %w", name, v, err))
				continue
			}
			*d = p
		}
	}
	if v := getenv("WORKER_POLLERS"); v != "" {
		if _, err := fmt.Sscanf(v, "%d", &w.Pollers); err != nil {
			errs = append(errs, fmt.Errorf("WORKER_POLLERS=%q: want a number", v))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return w, w.check()
}
