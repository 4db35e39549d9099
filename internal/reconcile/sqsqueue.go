package reconcile

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// SQSAPI is the part of the SQS client SQSQueue uses.
type SQSAPI interface {
	SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, opts ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
}

// SQSQueue is the Queue of the reconcile workers' SQS queue.
type SQSQueue struct {
	Client   SQSAPI
	QueueURL string
}

// Waiting implements Queue with the queue's ApproximateNumberOfMessages
// (visible messages: units no worker holds).
func (q *SQSQueue) Waiting(ctx context.Context) (int, error) {
	out, err := q.Client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(q.QueueURL),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages},
	})
	if err != nil {
		return 0, fmt.Errorf("reconcile: queue attributes: %w", err)
	}
	n, err := strconv.Atoi(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessages)])
	if err != nil {
		return 0, fmt.Errorf("reconcile: queue attributes: ApproximateNumberOfMessages: %w", err)
	}
	return n, nil
}

// Put implements Queue with SendMessageBatch, 10 units a call. A unit SQS
// did not take counts as not handed out, with those after it.
func (q *SQSQueue) Put(ctx context.Context, units []Unit) (int, error) {
	done := 0
	for start := 0; start < len(units); start += 10 {
		end := min(start+10, len(units))
		in := &sqs.SendMessageBatchInput{QueueUrl: aws.String(q.QueueURL)}
		for i, u := range units[start:end] {
			b, err := json.Marshal(u)
			if err != nil {
				return done, fmt.Errorf("reconcile: encode unit: %w", err)
			}
			in.Entries = append(in.Entries, types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(string(b))})
		}
		out, err := q.Client.SendMessageBatch(ctx, in)
		if err != nil {
			return done, fmt.Errorf("reconcile: send units: %w", err)
		}
		if len(out.Failed) > 0 {
			// Units are disposable (their rows are found again), so the
			// first failure ends the hand-out instead of a retry loop.
			first := end - start
			for _, f := range out.Failed {
				if i, err := strconv.Atoi(aws.ToString(f.Id)); err == nil && i < first {
					first = i
				}
			}
			return done + first, fmt.Errorf("reconcile: send units: %d of %d failed: %s", len(out.Failed), end-start, aws.ToString(out.Failed[0].Code))
		}
		done = end
	}
	return done, nil
}

// HandleSQS is the reconcile worker's handler: each record of the batch
// is one unit (Work). A record that is not a unit is logged and dropped
// (its rows, if any, are found again); a unit the deadline interrupted is
// reported as a batch item failure, so SQS hands it out again.
func (r *Reconciler) HandleSQS(ctx context.Context, ev events.SQSEvent, log *slog.Logger) events.SQSEventResponse {
	var resp events.SQSEventResponse
	total := Report{Actions: map[Action]int{}}
	for i, m := range ev.Records {
		u, err := ParseUnit(m.Body)
		if err != nil {
			log.Error("not a unit of work: dropped", "message_id", m.MessageId, "error", err)
			continue
		}
		if r.nearDeadline(ctx) {
			for _, rest := range ev.Records[i:] {
				resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: rest.MessageId})
			}
			break
		}
		rep, done := r.Work(ctx, u)
		total.Examined += rep.Examined
		for a, n := range rep.Actions {
			total.Actions[a] += n
		}
		if !done {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: m.MessageId})
		}
	}
	sum := total.Summary()
	log.Info("reconcile units", "units", len(ev.Records), "examined", sum.Examined, "actions", sum.Actions, "returned", len(resp.BatchItemFailures))
	return resp
}
