package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/spf13/cobra"

	"github.com/sendonce/sendonce/internal/redact"
	"github.com/sendonce/sendonce/internal/sender"
	"github.com/sendonce/sendonce/internal/sendkey"
	"github.com/sendonce/sendonce/notify"
)

func dlqListCmd(a *app) *cobra.Command {
	c := &cobra.Command{
		Use:         "list [--limit N] [--dlq-url URL]",
		Annotations: map[string]string{annotService: serviceSQS},
		Short:       "show dead-lettered messages: reasons, receive counts, keys",
		Long: `
Shows the messages in the dead-letter queue, one per line (--output json) or
as a table: the SQS message id, how often it was received, when it was first
sent, the reason the sender gave (the sendonce-error attributes; empty for a
message SQS moved there after maxReceiveCount receives), whether it is
valid now (as "sendonce key" would check it), and the key it has (or would
have: derived from its tenant_id, event_id, recipient.id, channel and
template even when another field is invalid). Addresses are redacted; the
body is not printed.

Listing receives the messages (with a visibility timeout of 30s) and then
makes them visible again at once, as the console's "poll for messages"
does: each listing adds one to their receive count.`,
		Args: noArgs,
	}
	dlq := dlqFlag(c)
	limit := c.Flags().Int("limit", 100, "at most `N` messages")
	c.RunE = func(c *cobra.Command, _ []string) error {
		ctx := c.Context()
		url, err := a.dlqURL(c, *dlq)
		if err != nil {
			return err
		}
		if *limit <= 0 {
			return &usageError{cmd: c, msg: "--limit must be positive"}
		}
		q, rd, err := a.dlqOpen(ctx)
		if err != nil {
			return err
		}
		var views []dlqView
		var handles []string
		err = receiveAll(ctx, q, url, 30*time.Second, *limit, func(m types.Message) error {
			views = append(views, describeMessage(m, rd))
			handles = append(handles, aws.ToString(m.ReceiptHandle))
			a.prog.show(fmt.Sprintf("dlq list: %d messages received", len(views)))
			return nil
		})
		// Visible again at once, whatever happened.
		release(context.WithoutCancel(ctx), q, url, handles)
		if err != nil {
			return fmt.Errorf("dlq list: %w", err)
		}
		a.prog.clear()
		return writeList(a.printer(), views, []string{"MESSAGE_ID", "RECEIVES", "VALID", "KEY", "TENANT", "CHANNEL", "REASON"},
			func(v dlqView) []string {
				return []string{v.MessageID, strconv.Itoa(v.ReceiveCount), strconv.FormatBool(v.Valid), v.Key, v.Tenant, v.Channel, cmp.Or(v.Reason, v.Invalid)}
			})
	}
	return c
}

func dlqRedriveCmd(a *app) *cobra.Command {
	c := &cobra.Command{
		Use:         "redrive [--all [--rate N] [--no-wait]] [--dry-run] [--reason-match RE] [--each] [--concurrency N] [--queue-url URL] [--dlq-url URL]",
		Annotations: map[string]string{annotService: serviceSQS},
		Short:       "move the dead-lettered messages back to the queue, in batches or with SQS's move task",
		Long: `
Moves dead-lettered messages back to the notification queue, body unchanged,
with one of two engines.

By default it filters: it re-validates every message (as the sender does)
and moves only the valid ones (and, with --reason-match, only those whose
sendonce-error reason matches), in batches: ReceiveMessage of 10,
SendMessageBatch of up to 10 to the queue, DeleteMessageBatch of the ones
the queue took, from --concurrency workers at once (3 calls per 10
messages). A message is deleted from the DLQ only after the queue took it:
a crash in between leaves it in both, and the second copy finds its ledger
row and sends nothing. No message is lost. Each moved copy carries the
sendonce-enqueued-at attribute (its first enqueue time), so its class's
default validity is not restarted. Invalid and non-matching messages stay
(visible again when it ends).

With --all it filters nothing and hands the move to SQS: one
StartMessageMoveTask from the DLQ to the queue (at most --rate messages a
second; SQS's own pace without it), then ListMessageMoveTasks every --poll
to show its progress until it ends (--no-wait: print the task and return).
Invalid messages move too; the sender dead-letters them again at once with
their reason. SQS gives each moved message a new SentTimestamp.

A message past its validity (expires_at, or its class's default) is never
sent after a redrive either: its ledger row, or its first enqueue time,
says so (docs/request.md, "Validity"). A redriven message whose ledger row
has expired (past the retention) is sent again: do not redrive messages
older than the ledger's retention.

Output: the batch engine prints one line per message not moved (invalid,
no-match, failed; with --dry-run or --each, every message): the action, the
message id, the key and the reason (with --query the lines are collected
and the query runs over all of them at the end). The move task prints one
object: its handle, status, messages moved and to move. On a terminal a
progress line on stderr counts them while it runs; the totals go to stderr
at the end:
  sendonce: dlq redrive: 12 messages: 9 moved, 2 invalid, 1 no-match, 0 failed in 1.2s (10/s; 4 ReceiveMessage, 1 SendMessageBatch, ...)
A failed send or delete, or a move task that failed or was cancelled,
makes the exit status 1, with the totals in the error line.`,
		Args: noArgs,
	}
	dlq := dlqFlag(c)
	f := c.Flags()
	queue := f.String("queue-url", "", "the `URL` of the queue to move them to (default: SENDONCE_QUEUE_URL, else the one queue whose dead-letter queue this is)")
	dryRun := f.Bool("dry-run", false, "only say what would move")
	match := f.String("reason-match", "", "only messages whose sendonce-error reason matches the regular expression `RE`")
	visibility := f.Duration("visibility", 60*time.Second, "`D`: how long a message is hidden while it is handled")
	all := f.Bool("all", false, "move every message with SQS's move task (StartMessageMoveTask): no filter")
	rate := f.Int32("rate", 0, "with --all: at most `N` messages a second (1 to 500; 0: SQS's own pace)")
	noWait := f.Bool("no-wait", false, "with --all: start the move task and return")
	poll := f.Duration("poll", 2*time.Second, "with --all: how often `D` to ask for the task's progress")
	each := f.Bool("each", false, "print a line for every message, moved ones too")
	concurrency := f.Int("concurrency", 8, "batch workers at once (`N`, 1 to 64)")
	c.RunE = func(c *cobra.Command, _ []string) error {
		ctx := c.Context()
		url, err := a.dlqURL(c, *dlq)
		if err != nil {
			return err
		}
		switch {
		case *visibility < time.Second || *visibility > 12*time.Hour:
			return &usageError{cmd: c, msg: "--visibility must be between 1s and 12h"}
		case *all && (*match != "" || *dryRun):
			return &usageError{cmd: c, msg: "--all moves every message with SQS's move task: it takes no --reason-match or --dry-run"}
		case !*all && (*rate != 0 || *noWait):
			return &usageError{cmd: c, msg: "--rate and --no-wait go with --all"}
		case *rate < 0 || *rate > 500:
			return &usageError{cmd: c, msg: "--rate must be between 1 and 500 (SQS's limit), or 0 for SQS's own pace"}
		case *concurrency < 1 || *concurrency > 64:
			return &usageError{cmd: c, msg: "--concurrency must be between 1 and 64"}
		case *poll < 10*time.Millisecond:
			return &usageError{cmd: c, msg: "--poll must be at least 10ms"}
		}
		var re *regexp.Regexp
		if *match != "" {
			if re, err = regexp.Compile(*match); err != nil {
				return &usageError{cmd: c, msg: fmt.Sprintf("--reason-match: %v", err)}
			}
		}
		q, rd, err := a.dlqOpen(ctx)
		if err != nil {
			return err
		}
		target := cmp.Or(*queue, strings.TrimSpace(a.getenv("SENDONCE_QUEUE_URL")))
		if target == "" {
			if target, err = sourceQueue(ctx, q, url); err != nil {
				return fmt.Errorf("dlq redrive: %w", err)
			}
		}
		start := time.Now()
		if *all {
			v, err := moveTask(ctx, q, url, target, *rate, *noWait, *poll, func(v moveTaskView) {
				a.prog.show(fmt.Sprintf("dlq redrive: move task %s: %d of %d moved (%s)", v.Status, v.Moved, v.ToMove, v.Elapsed))
			})
			if err != nil {
				return fmt.Errorf("dlq redrive --all: %w", err)
			}
			a.prog.clear()
			if err := a.printer().object(v); err != nil {
				return err
			}
			switch v.Status {
			case "RUNNING":
				a.note("dlq redrive: move task %s started; follow it with aws sqs list-message-move-tasks --source-arn %s", v.TaskHandle, v.Source)
			case "COMPLETED":
				a.note("dlq redrive: move task completed: %d messages moved in %s (%s/s)", v.Moved, time.Since(start).Round(time.Millisecond), perSecond(v.Moved, time.Since(start)))
			default:
				return fmt.Errorf("dlq redrive: move task %s: %s after %d messages moved", v.Status, cmp.Or(v.FailureReason, "no reason given"), v.Moved)
			}
			return nil
		}
		out := a.redriveLines()
		b := &batchRedrive{q: q, dlq: url, target: target, visibility: *visibility, re: re, dryRun: *dryRun, rd: rd, concurrency: *concurrency,
			tally: &tally{n: map[string]int{}, dryRun: *dryRun}}
		b.line = func(v redriveView) error {
			if v.Action == "moved" && !*each {
				return nil
			}
			return out.line(v)
		}
		b.progress = func() { a.prog.show("dlq redrive: " + b.tally.String()) }
		err = b.run(ctx)
		if err == nil {
			err = out.flush()
		}
		took := time.Since(start)
		summary := fmt.Sprintf("%s in %s (%s/s; %s)", b.tally, took.Round(time.Millisecond), perSecond(int64(b.tally.total()), took), b.callsString())
		if err != nil {
			return fmt.Errorf("dlq redrive: %w (so far %s)", err, summary)
		}
		if n := b.tally.n["failed"]; n > 0 {
			return fmt.Errorf("dlq redrive: %d message(s) could not be moved; they are still in the dead-letter queue (or in both queues, which the ledger absorbs): %s", n, summary)
		}
		a.note("dlq redrive: %s", summary)
		return nil
	}
	return c
}

// perSecond is n per d, rounded.
func perSecond(n int64, d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return strconv.FormatFloat(float64(n)/d.Seconds(), 'f', 0, 64)
}

// sqsAPI is the part of the SQS client the dlq commands use.
type sqsAPI interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
	DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
	ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
	ListDeadLetterSourceQueues(ctx context.Context, in *sqs.ListDeadLetterSourceQueuesInput, optFns ...func(*sqs.Options)) (*sqs.ListDeadLetterSourceQueuesOutput, error)
	SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
	DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
	ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error)
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
	StartMessageMoveTask(ctx context.Context, in *sqs.StartMessageMoveTaskInput, optFns ...func(*sqs.Options)) (*sqs.StartMessageMoveTaskOutput, error)
	ListMessageMoveTasks(ctx context.Context, in *sqs.ListMessageMoveTasksInput, optFns ...func(*sqs.Options)) (*sqs.ListMessageMoveTasksOutput, error)
}

// dlqView is one dead-lettered message as dlq list prints it.
type dlqView struct {
	MessageID       string `json:"message_id"`
	ReceiveCount    int    `json:"receive_count"`
	SentAt          string `json:"sent_at,omitempty"`
	Reason          string `json:"reason,omitempty"`
	Field           string `json:"field,omitempty"`
	SourceMessageID string `json:"source_message_id,omitempty"`
	Valid           bool   `json:"valid"`
	Invalid         string `json:"invalid,omitempty"`
	Key             string `json:"key,omitempty"`
	Tenant          string `json:"tenant,omitempty"`
	EventID         string `json:"event_id,omitempty"`
	Channel         string `json:"channel,omitempty"`
	Template        string `json:"template,omitempty"`
	RecipientID     string `json:"recipient_id,omitempty"`
}

// dlqFlag adds --dlq-url to c.
func dlqFlag(c *cobra.Command) *string {
	return c.Flags().String("dlq-url", "", "the dead-letter queue's `URL` (default: SENDONCE_DLQ_URL)")
}

// dlqURL returns the dead-letter queue: --dlq-url, else SENDONCE_DLQ_URL;
// a usage error when neither names one.
func (a *app) dlqURL(c *cobra.Command, flag string) (string, error) {
	url := cmp.Or(flag, strings.TrimSpace(a.getenv("SENDONCE_DLQ_URL")))
	if url == "" {
		return "", &usageError{cmd: c, msg: "no dead-letter queue: pass --dlq-url URL or set SENDONCE_DLQ_URL"}
	}
	return url, nil
}

// dlqOpen returns what the dlq commands start from once their flags are
// checked: the SQS client and the redactor.
func (a *app) dlqOpen(ctx context.Context) (*sqs.Client, *redact.Redactor, error) {
	q, err := a.sqsClient(ctx)
	if err != nil {
		return nil, nil, err
	}
	rd, err := a.redactor(ctx)
	if err != nil {
		return nil, nil, err
	}
	return q, rd, nil
}

// redriveView is one message's fate in dlq redrive.
type redriveView struct {
	Action    string `json:"action"`
	MessageID string `json:"message_id"`
	Key       string `json:"key,omitempty"`
	Reason    string `json:"reason,omitempty"`
}

// redriveActions are the actions in the order the totals name them.
var redriveActions = []string{"moved", "would-move", "invalid", "no-match", "failed"}

// tally counts the redrive's actions.
type tally struct {
	n      map[string]int
	dryRun bool
}

func (t *tally) add(action string) { t.n[action]++ }

// total is the number of messages counted.
func (t *tally) total() int {
	n := 0
	for _, v := range t.n {
		n += v
	}
	return n
}

// String is "12 messages: 9 moved, 2 invalid, 1 no-match, 0 failed"
// ("would-move" instead of "moved" for a dry run); an action that did not
// happen is left out, except those two and failed.
func (t *tally) String() string {
	total := 0
	var parts []string
	for _, act := range redriveActions {
		total += t.n[act]
		if t.n[act] > 0 || act == "failed" || act == map[bool]string{false: "moved", true: "would-move"}[t.dryRun] {
			parts = append(parts, fmt.Sprintf("%d %s", t.n[act], act))
		}
	}
	return fmt.Sprintf("%d messages: %s", total, strings.Join(parts, ", "))
}

// redriveOut prints redrive lines as they happen (a JSON object, aligned
// or tab-separated cells per line), or collects them for --query.
type redriveOut struct {
	a         *app
	collected []redriveView
}

func (a *app) redriveLines() *redriveOut { return &redriveOut{a: a} }

func (o *redriveOut) line(v redriveView) error {
	p := o.a.printer()
	if p.query != nil || p.format == "yaml" { // one YAML sequence at the end (flush)
		o.collected = append(o.collected, v)
		return nil
	}
	o.a.prog.clear()
	switch p.format {
	case "json":
		return writeJSON(p.w, v, false)
	case "text":
		return writeRows(p.w, "text", nil, [][]string{{v.Action, v.MessageID, v.Key, v.Reason}})
	}
	_, err := fmt.Fprintf(p.w, "%-10s %s %s %s\n", v.Action, v.MessageID, cmp.Or(v.Key, "-"), oneLine(v.Reason))
	return err
}

// flush runs --query over the collected lines.
func (o *redriveOut) flush() error {
	p := o.a.printer()
	if p.query == nil && p.format != "yaml" {
		return nil
	}
	return writeList(p, o.collected, nil, nil)
}

// receiveAll receives dlq's messages in batches of 10, hidden for
// visibility, and hands each (once, by message id) to fn until the queue
// answers empty or limit messages were handled (0: no limit).
func receiveAll(ctx context.Context, q sqsAPI, dlq string, visibility time.Duration, limit int, fn func(types.Message) error) error {
	seen := map[string]bool{}
	for limit == 0 || len(seen) < limit {
		n := int32(10)
		if limit > 0 {
			n = int32(min(10, limit-len(seen)))
		}
		out, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl:                    aws.String(dlq),
			MaxNumberOfMessages:         n,
			VisibilityTimeout:           int32(visibility / time.Second),
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
			MessageAttributeNames:       []string{"All"},
		})
		if err != nil {
			return &queueError{url: dlq, flag: "--dlq-url or SENDONCE_DLQ_URL", err: fmt.Errorf("receive from %s: %w", dlq, err)}
		}
		fresh := 0
		for _, m := range out.Messages {
			id := aws.ToString(m.MessageId)
			if seen[id] {
				continue
			}
			seen[id] = true
			fresh++
			if err := fn(m); err != nil {
				return err
			}
		}
		if fresh == 0 {
			return nil
		}
	}
	return nil
}

// release makes the messages of handles visible again.
func release(ctx context.Context, q sqsAPI, dlq string, handles []string) {
	for _, h := range handles {
		_, _ = q.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
			QueueUrl: aws.String(dlq), ReceiptHandle: aws.String(h), VisibilityTimeout: 0,
		})
	}
}

// sourceQueue finds the one queue whose dead-letter queue dlq is.
func sourceQueue(ctx context.Context, q sqsAPI, dlq string) (string, error) {
	out, err := q.ListDeadLetterSourceQueues(ctx, &sqs.ListDeadLetterSourceQueuesInput{QueueUrl: aws.String(dlq)})
	if err != nil {
		return "", &queueError{url: dlq, flag: "--dlq-url or SENDONCE_DLQ_URL", err: fmt.Errorf("find the queue of %s (pass --queue-url or set SENDONCE_QUEUE_URL): %w", dlq, err)}
	}
	if len(out.QueueUrls) != 1 {
		return "", fmt.Errorf("%s is the dead-letter queue of %d queues: pass --queue-url or set SENDONCE_QUEUE_URL", dlq, len(out.QueueUrls))
	}
	return out.QueueUrls[0], nil
}

// describeMessage summarises m without its body or any raw address.
func describeMessage(m types.Message, rd *redact.Redactor) dlqView {
	v := dlqView{
		MessageID:       aws.ToString(m.MessageId),
		Reason:          scrub(rd, stringAttr(m, sender.AttrErrorReason), ""),
		Field:           stringAttr(m, sender.AttrErrorField),
		SourceMessageID: stringAttr(m, sender.AttrSourceID),
	}
	v.ReceiveCount, _ = strconv.Atoi(m.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)])
	if ms, err := strconv.ParseInt(m.Attributes[string(types.MessageSystemAttributeNameSentTimestamp)], 10, 64); err == nil {
		v.SentAt = timeString(time.UnixMilli(ms))
	}
	body := []byte(aws.ToString(m.Body))
	req, err := notify.Parse(body)
	if err == nil {
		v.Valid, v.Key = true, req.Key()
	} else {
		v.Invalid = scrub(rd, err.Error(), "")
		// The key it would have, if the key's inputs are there.
		var loose notify.Request
		if json.Unmarshal(body, &loose) == nil {
			req = loose
			if req.TenantID != "" && req.EventID != "" && req.Recipient.ID != "" && req.Channel != "" && req.Template != "" {
				v.Key = sendkey.Derive(sendkey.Parts{Tenant: req.TenantID, EventID: req.EventID, RecipientID: req.Recipient.ID, Channel: string(req.Channel), Template: req.Template})
			}
		}
	}
	v.Tenant, v.EventID, v.Channel, v.Template = truncate(req.TenantID), truncate(req.EventID), truncate(string(req.Channel)), truncate(req.Template)
	v.RecipientID = scrub(rd, truncate(req.Recipient.ID), req.Address())
	return v
}

func stringAttr(m types.Message, name string) string {
	if a, ok := m.MessageAttributes[name]; ok {
		return aws.ToString(a.StringValue)
	}
	return ""
}
