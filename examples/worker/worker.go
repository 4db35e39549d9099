package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sendonce/sendonce"
	"github.com/sendonce/sendonce/notify"
)

// SQS is the part of the SQS client the worker uses; *sqs.Client
// implements it.
type SQS interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
}

// ackTimeout is the deadline of a message's acknowledgement after Send:
// its delete, or its move to the dead-letter queue.
const ackTimeout = 5 * time.Second

// Worker polls one queue and sends each request it receives once.
type Worker struct {
	SQS      SQS
	QueueURL string
	Sender   *sendonce.Sender
	// DeadLetters receives the invalid requests; nil leaves them on the
	// queue, whose redrive policy moves them aside in the end.
	DeadLetters sendonce.DeadLetters
	// Metrics records the sender's metrics (sendonce.NewEMF, or
	// lambdaapp's in a stack) and is flushed after every batch.
	Metrics interface {
		sendonce.Metrics
		Flush() error
	}
	Log *slog.Logger
	// Pollers is how many receive loops run at once.
	Pollers int
	// Visibility is the visibility timeout of a received message.
	Visibility time.Duration
	// SendTimeout is the deadline of one Send.
	SendTimeout time.Duration
	// Wait is the long-poll wait of one receive (at most 20 s).
	Wait time.Duration
}

func (w *Worker) check() error {
	switch {
	case w.Pollers < 1:
		return fmt.Errorf("WORKER_POLLERS=%d: want at least 1", w.Pollers)
	case w.Wait < 0 || w.Wait > 20*time.Second:
		return fmt.Errorf("WORKER_WAIT=%s: want 0 to 20s", w.Wait)
	case w.SendTimeout <= 0:
		return fmt.Errorf("WORKER_SEND_TIMEOUT=%s: want more than 0", w.SendTimeout)
	case w.Visibility < w.SendTimeout+ackTimeout:
		return fmt.Errorf("WORKER_VISIBILITY=%s must exceed WORKER_SEND_TIMEOUT=%s by %s at least: a message must not reappear while it is being sent and acknowledged", w.Visibility, w.SendTimeout, ackTimeout)
	}
	return nil
}

// Run polls until ctx is cancelled, then finishes the messages it holds
// and returns nil. It returns an error only for a receive that fails
// for good (a missing queue, refused credentials) on every poller.
func (w *Worker) Run(ctx context.Context) error {
	if err := w.check(); err != nil {
		return err
	}
	if w.Log == nil {
		w.Log = slog.New(slog.DiscardHandler)
	}
	flushed := make(chan struct{})
	go func() { // metrics once a minute, and once more at the end
		defer close(flushed)
		tick := time.NewTicker(time.Minute)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				w.flush()
			case <-ctx.Done():
				return
			}
		}
	}()
	var wg sync.WaitGroup
	errs := make([]error, w.Pollers)
	for i := range w.Pollers {
		wg.Go(func() { errs[i] = w.poll(ctx) })
	}
	wg.Wait()
	<-flushed
	w.flush()
	return errors.Join(errs...)
}

func (w *Worker) flush() {
	if w.Metrics != nil {
		if err := w.Metrics.Flush(); err != nil {
			w.Log.Warn("metrics flush failed", "error", err.Error())
		}
	}
}

// poll is one receive loop. A failed receive is retried with backoff,
// up to a few times in a row.
func (w *Worker) poll(ctx context.Context) error {
	failures := 0
	for ctx.Err() == nil {
		out, err := w.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl:            aws.String(w.QueueURL),
			MaxNumberOfMessages: 10,
			WaitTimeSeconds:     int32(w.Wait / time.Second),
			VisibilityTimeout:   int32(w.Visibility / time.Second),
			// SentTimestamp (and the original one a redriven message
			// carries) is when the message was first enqueued: a class's
			// validity counts from it (sendonce.EnqueuedAt).
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameApproximateReceiveCount, types.MessageSystemAttributeNameMessageGroupId, types.MessageSystemAttributeNameSentTimestamp},
			MessageAttributeNames:       []string{"All"},
		})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			failures++
			w.Log.Warn("receive failed", "error", err.Error(), "failures", failures)
			if failures >= 5 {
				return fmt.Errorf("receive from %s: %w", w.QueueURL, err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Duration(failures) * time.Second):
			}
			continue
		}
		failures = 0
		// The batch is finished even after ctx is cancelled: each
		// message gets its own deadline, and what was sent is deleted
		// rather than received again after a restart. Messages of one
		// FIFO group are handled in the order received.
		for _, m := range out.Messages {
			w.handle(context.WithoutCancel(ctx), m)
		}
	}
	return nil
}

// handle sends one message and acknowledges it unless it must be
// delivered again.
func (w *Worker) handle(ctx context.Context, m types.Message) {
	log := w.Log.With("message_id", aws.ToString(m.MessageId))
	// The acknowledgement (a delete, or the dead-letter queue) has a
	// deadline of its own after Send's: a slow Send must not leave it no
	// time, or a sent message comes back to be found a duplicate.
	ack := func(do func(context.Context)) {
		ctx, cancel := context.WithTimeout(ctx, ackTimeout)
		defer cancel()
		do(ctx)
	}
	req, err := notify.Parse([]byte(aws.ToString(m.Body)))
	if err != nil {
		var invalid *notify.InvalidError
		if !errors.As(err, &invalid) {
			invalid = &notify.InvalidError{Reason: err.Error()}
		}
		ack(func(ctx context.Context) { w.setAside(ctx, log, m, invalid) })
		return
	}
	sendCtx, cancel := context.WithTimeout(ctx, w.SendTimeout)
	out := w.Sender.WithLogger(log).Send(sendCtx, req, sendonce.EnqueuedAt(m))
	cancel()
	log = log.With("key", out.Key, "disposition", out.Disposition.String())
	switch out.Disposition {
	case sendonce.Retry:
		// Not deleted: SQS delivers it again after its visibility
		// timeout, with the same body, so the same key.
		log.Info("left for redelivery", "reason", out.Reason)
	case sendonce.Invalid:
		ack(func(ctx context.Context) { w.setAside(ctx, log, m, out.Invalid) })
	default:
		ack(func(ctx context.Context) { w.delete(ctx, log, m) })
	}
}

// setAside puts an invalid message on the dead-letter queue, then
// deletes it; if it cannot be stored it stays on the queue.
func (w *Worker) setAside(ctx context.Context, log *slog.Logger, m types.Message, invalid *notify.InvalidError) {
	log = log.With("reason", invalid.Error())
	if w.DeadLetters == nil {
		log.Warn("invalid request left on the queue (no dead-letter queue)")
		return
	}
	if err := w.DeadLetters.Put(ctx, lambdaRecord(m), invalid); err != nil {
		log.Error("invalid request could not be set aside; left on the queue", "error", err.Error())
		return
	}
	log.Warn("invalid request moved to the dead-letter queue")
	w.delete(ctx, log, m)
}

func (w *Worker) delete(ctx context.Context, log *slog.Logger, m types.Message) {
	_, err := w.SQS.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(w.QueueURL), ReceiptHandle: m.ReceiptHandle})
	if err != nil {
		// It comes back after its visibility timeout; the ledger finds
		// it handled and sends nothing again.
		log.Warn("delete failed; the message will be delivered again", "error", err.Error())
	}
}

// lambdaRecord presents a received message as the record of a Lambda SQS
// event, the shape sendonce.DeadLetters takes.
func lambdaRecord(m types.Message) events.SQSMessage {
	return events.SQSMessage{MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle), Body: aws.ToString(m.Body), Attributes: maps.Clone(m.Attributes)}
}
