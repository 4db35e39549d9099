package main

import (
	"cmp"
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sendonce/sendonce/internal/redact"
	"github.com/sendonce/sendonce/internal/sender"
)

// # Redrive at scale
//
// dlq redrive has two engines (docs/cli.md, "dlq redrive"):
//
//   - with filtering (the default: invalid messages stay, --reason-match,
//     --dry-run), batches: ReceiveMessage of 10, SendMessageBatch of up to
//     10 to the queue, DeleteMessageBatch of the ones sent, from
//     --concurrency workers at once: 3 calls per 10 messages;
//   - without (--all), SQS's own move task: StartMessageMoveTask, then
//     ListMessageMoveTasks every --poll for its progress: 2 calls, plus
//     one per poll, whatever the number of messages.

// batchBytes bounds the bodies of one SendMessageBatch (SQS caps a batch's
// payload at 256 KiB on queues with the classic message size).
const batchBytes = 256*1024 - 10*1024

// batchRedrive is one run of the batch engine.
type batchRedrive struct {
	q           sqsAPI
	dlq, target string
	visibility  time.Duration
	re          *regexp.Regexp
	dryRun      bool
	rd          *redact.Redactor
	concurrency int
	// line reports one message's fate (under mu).
	line func(redriveView) error
	// progress shows the running totals (under mu).
	progress func()

	mu      sync.Mutex
	seen    map[string]bool
	skipped []string // receipt handles made visible again at the end
	tally   *tally
	err     error
	// calls counts the SQS calls, by operation.
	calls struct{ receive, send, delete, visibility atomic.Int64 }
}

// run receives until every worker found nothing new, then makes the
// skipped messages visible again.
func (b *batchRedrive) run(ctx context.Context) error {
	b.seen = map[string]bool{}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for range max(1, b.concurrency) {
		wg.Go(func() {
			for ctx.Err() == nil {
				more, err := b.round(ctx)
				if err != nil {
					b.fail(err)
					cancel()
					return
				}
				if !more {
					return
				}
			}
		})
	}
	wg.Wait()
	b.release(context.WithoutCancel(ctx))
	return b.err
}

func (b *batchRedrive) fail(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err == nil {
		b.err = err
	}
}

// round handles one receive of up to 10 messages. It reports whether the
// receive held a message not seen before.
func (b *batchRedrive) round(ctx context.Context) (bool, error) {
	b.calls.receive.Add(1)
	out, err := b.q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(b.dlq),
		MaxNumberOfMessages:         10,
		VisibilityTimeout:           int32(b.visibility / time.Second),
		WaitTimeSeconds:             1, // long polling asks every server: a short poll may answer empty early
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		MessageAttributeNames:       []string{"All"},
	})
	if err != nil {
		return false, &queueError{url: b.dlq, flag: "--dlq-url or SENDONCE_DLQ_URL", err: fmt.Errorf("receive from %s: %w", b.dlq, err)}
	}
	var send []types.Message
	var views []redriveView
	b.mu.Lock()
	for _, m := range out.Messages {
		id := aws.ToString(m.MessageId)
		if b.seen[id] {
			continue
		}
		b.seen[id] = true
		v := describeMessage(m, b.rd)
		rv := redriveView{MessageID: v.MessageID, Key: v.Key, Reason: cmp.Or(v.Reason, v.Invalid)}
		switch {
		case !v.Valid:
			rv.Action, rv.Reason = "invalid", v.Invalid
		case b.re != nil && !b.re.MatchString(stringAttr(m, sender.AttrErrorReason)):
			rv.Action = "no-match"
		case b.dryRun:
			rv.Action = "would-move"
		}
		if rv.Action != "" {
			b.skipped = append(b.skipped, aws.ToString(m.ReceiptHandle))
			views = append(views, rv)
			continue
		}
		send = append(send, m)
	}
	fresh := len(views) + len(send)
	b.mu.Unlock()
	moved := b.move(ctx, send)
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, rv := range append(views, moved...) {
		b.tally.add(rv.Action)
		if err := b.line(rv); err != nil {
			return false, err
		}
	}
	b.progress()
	return fresh > 0, nil
}

// move sends msgs to the target queue in batches and deletes from the
// dead-letter queue the ones the queue took: in that order, so a crash in
// between duplicates a message (the ledger absorbs it) and never loses
// one. It returns each message's fate.
func (b *batchRedrive) move(ctx context.Context, msgs []types.Message) []redriveView {
	var out []redriveView
	for len(msgs) > 0 {
		n, size := 0, 0
		for n < len(msgs) && n < 10 && (n == 0 || size+len(aws.ToString(msgs[n].Body)) <= batchBytes) {
			size += len(aws.ToString(msgs[n].Body))
			n++
		}
		out = append(out, b.moveBatch(ctx, msgs[:n])...)
		msgs = msgs[n:]
	}
	return out
}

func (b *batchRedrive) moveBatch(ctx context.Context, msgs []types.Message) []redriveView {
	views := make([]redriveView, len(msgs))
	entries := make([]types.SendMessageBatchRequestEntry, len(msgs))
	for i, m := range msgs {
		d := describeMessage(m, b.rd)
		views[i] = redriveView{MessageID: d.MessageID, Key: d.Key}
		entries[i] = redriveEntry(strconv.Itoa(i), m, b.target)
	}
	b.calls.send.Add(1)
	sent, err := b.q.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(b.target), Entries: entries})
	if err != nil {
		err = &queueError{url: b.target, flag: "--queue-url or SENDONCE_QUEUE_URL", err: fmt.Errorf("send to the queue: %w", err)}
		for i := range views {
			views[i].Action, views[i].Reason = "failed", err.Error()
		}
		return views
	}
	for _, f := range sent.Failed {
		if i, err := strconv.Atoi(aws.ToString(f.Id)); err == nil && i < len(views) {
			views[i].Action, views[i].Reason = "failed", fmt.Sprintf("send to the queue: %s: %s", aws.ToString(f.Code), aws.ToString(f.Message))
		}
	}
	var del []types.DeleteMessageBatchRequestEntry
	for _, s := range sent.Successful {
		if i, err := strconv.Atoi(aws.ToString(s.Id)); err == nil && i < len(views) {
			del = append(del, types.DeleteMessageBatchRequestEntry{Id: s.Id, ReceiptHandle: msgs[i].ReceiptHandle})
		}
	}
	if len(del) > 0 {
		b.calls.delete.Add(1)
		gone, err := b.q.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(b.dlq), Entries: del})
		for _, e := range del {
			views[atoi(e.Id)].Action = "moved"
		}
		const notDeleted = "sent to the queue, but not deleted from the dead-letter queue (a duplicate the ledger absorbs)"
		if err != nil {
			for _, e := range del {
				views[atoi(e.Id)].Action, views[atoi(e.Id)].Reason = "failed", fmt.Sprintf("%s: %v", notDeleted, err)
			}
		} else {
			for _, f := range gone.Failed {
				views[atoi(f.Id)].Action, views[atoi(f.Id)].Reason = "failed", fmt.Sprintf("%s: %s: %s", notDeleted, aws.ToString(f.Code), aws.ToString(f.Message))
			}
		}
	}
	for i := range views {
		if views[i].Action == "" {
			views[i].Action, views[i].Reason = "failed", "send to the queue: no answer for this message"
		}
	}
	return views
}

func atoi(id *string) int { n, _ := strconv.Atoi(aws.ToString(id)); return n }

// redriveEntry is m as an entry of a SendMessageBatch to queue: its body
// unchanged, and the time it was first enqueued (sender.EnqueuedAttribute:
// the earlier of its SentTimestamp and the attribute it carries), from
// which its class's default validity counts; the queue gives the copy a
// new SentTimestamp.
func redriveEntry(id string, m types.Message, queue string) types.SendMessageBatchRequestEntry {
	e := types.SendMessageBatchRequestEntry{Id: aws.String(id), MessageBody: m.Body}
	first := m.Attributes[string(types.MessageSystemAttributeNameSentTimestamp)]
	if v := stringAttr(m, sender.EnqueuedAttribute); v != "" {
		a, aerr := strconv.ParseInt(v, 10, 64)
		s, serr := strconv.ParseInt(first, 10, 64)
		if aerr == nil && (serr != nil || a < s) {
			first = v
		}
	}
	if _, err := strconv.ParseInt(first, 10, 64); err == nil {
		e.MessageAttributes = map[string]types.MessageAttributeValue{
			sender.EnqueuedAttribute: {DataType: aws.String("Number"), StringValue: aws.String(first)},
		}
	}
	if isFIFO(queue) {
		group := m.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)]
		e.MessageGroupId = aws.String(cmp.Or(group, "redrive"))
		e.MessageDeduplicationId = m.MessageId
	}
	return e
}

// release makes the skipped messages visible again, 10 per call.
func (b *batchRedrive) release(ctx context.Context) {
	for i := 0; i < len(b.skipped); i += 10 {
		var entries []types.ChangeMessageVisibilityBatchRequestEntry
		for j, h := range b.skipped[i:min(i+10, len(b.skipped))] {
			entries = append(entries, types.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String(strconv.Itoa(j)), ReceiptHandle: aws.String(h), VisibilityTimeout: 0})
		}
		b.calls.visibility.Add(1)
		_, _ = b.q.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(b.dlq), Entries: entries})
	}
}

// callsString is "3 ReceiveMessage, 1 SendMessageBatch, ...".
func (b *batchRedrive) callsString() string {
	return fmt.Sprintf("%d ReceiveMessage, %d SendMessageBatch, %d DeleteMessageBatch, %d ChangeMessageVisibilityBatch",
		b.calls.receive.Load(), b.calls.send.Load(), b.calls.delete.Load(), b.calls.visibility.Load())
}

// moveTaskView is what dlq redrive --all prints: the move task's state.
type moveTaskView struct {
	Action        string `json:"action"`
	TaskHandle    string `json:"task_handle,omitempty"`
	Status        string `json:"status"`
	Moved         int64  `json:"moved"`
	ToMove        int64  `json:"to_move,omitempty"`
	Rate          int32  `json:"max_per_second,omitempty"`
	Source        string `json:"source_arn"`
	Destination   string `json:"destination_arn"`
	FailureReason string `json:"failure_reason,omitempty"`
	Elapsed       string `json:"elapsed,omitempty"`
}

// queueARN returns url's queue ARN (GetQueueAttributes).
func queueARN(ctx context.Context, q sqsAPI, url, flag string) (string, error) {
	out, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
	if err != nil {
		return "", &queueError{url: url, flag: flag, err: fmt.Errorf("read the ARN of %s: %w", url, err)}
	}
	arn := out.Attributes[string(types.QueueAttributeNameQueueArn)]
	if arn == "" {
		return "", fmt.Errorf("%s has no QueueArn attribute", url)
	}
	return arn, nil
}

// moveTask starts SQS's move task from dlq to target at rate messages a
// second (0: SQS's own pace) and, unless noWait, follows it with
// ListMessageMoveTasks every poll until it ends; show reports its
// progress.
func moveTask(ctx context.Context, q sqsAPI, dlq, target string, rate int32, noWait bool, poll time.Duration, show func(moveTaskView)) (moveTaskView, error) {
	src, err := queueARN(ctx, q, dlq, "--dlq-url or SENDONCE_DLQ_URL")
	if err != nil {
		return moveTaskView{}, err
	}
	dst, err := queueARN(ctx, q, target, "--queue-url or SENDONCE_QUEUE_URL")
	if err != nil {
		return moveTaskView{}, err
	}
	in := &sqs.StartMessageMoveTaskInput{SourceArn: aws.String(src), DestinationArn: aws.String(dst)}
	if rate > 0 {
		in.MaxNumberOfMessagesPerSecond = aws.Int32(rate)
	}
	start := time.Now()
	out, err := q.StartMessageMoveTask(ctx, in)
	if err != nil {
		return moveTaskView{}, &queueError{url: dlq, flag: "--dlq-url or SENDONCE_DLQ_URL", err: fmt.Errorf("start a message move task from %s: %w", src, err)}
	}
	v := moveTaskView{Action: "move-task", TaskHandle: aws.ToString(out.TaskHandle), Status: "RUNNING", Rate: rate, Source: src, Destination: dst}
	if noWait {
		return v, nil
	}
	for {
		select {
		case <-ctx.Done():
			return v, ctx.Err()
		case <-time.After(poll):
		}
		list, err := q.ListMessageMoveTasks(ctx, &sqs.ListMessageMoveTasksInput{SourceArn: aws.String(src), MaxResults: aws.Int32(1)})
		if err != nil {
			return v, &queueError{url: dlq, flag: "--dlq-url or SENDONCE_DLQ_URL", err: fmt.Errorf("follow the move task: %w", err)}
		}
		if len(list.Results) == 0 {
			continue
		}
		r := list.Results[0] // the most recent: ours (one active task per queue)
		v.Status, v.Moved, v.ToMove = aws.ToString(r.Status), r.ApproximateNumberOfMessagesMoved, aws.ToInt64(r.ApproximateNumberOfMessagesToMove)
		v.FailureReason = aws.ToString(r.FailureReason)
		v.Elapsed = time.Since(start).Round(time.Second).String()
		if v.Status != "RUNNING" && v.Status != "CANCELLING" {
			return v, nil
		}
		show(v)
	}
}

func isFIFO(queue string) bool { return strings.HasSuffix(queue, ".fifo") }
