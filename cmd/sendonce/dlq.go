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
		Use:   "list [--limit N] [--dlq-url URL]",
		Short: "show dead-lettered messages: reasons, receive counts, keys",
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
		Use:   "redrive [--dry-run] [--reason-match RE] [--queue-url URL] [--dlq-url URL]",
		Short: "move the valid dead-lettered messages back to the queue",
		Long: `
Re-validates every message in the dead-letter queue (as the sender does) and
moves the valid ones back to the notification queue, body unchanged. Each
message is deleted from the DLQ only after SendMessage to the queue
succeeded: a crash in between leaves it in both, and the second copy finds
its ledger row and sends nothing. No message is lost. Invalid messages, and
messages whose reason does not match --reason-match, stay where they are
(visible again when it ends).

A redriven message whose ledger row has expired (past the retention) is
sent again: do not redrive messages older than the ledger's retention.

It prints one line per message as it goes: the action (moved, would-move,
invalid, no-match, failed), the message id, the key and the reason (with
--query, the lines are collected and the query runs over all of them at the
end). On a terminal a progress line on stderr counts them while it runs;
the totals go to stderr at the end:
  sendonce: dlq redrive: 12 messages: 9 moved, 2 invalid, 1 no-match, 0 failed
A failed send or delete makes the exit status 1 after every message was
tried, with the totals in the error line.`,
		Args: noArgs,
	}
	dlq := dlqFlag(c)
	f := c.Flags()
	queue := f.String("queue-url", "", "the `URL` of the queue to move them to (default: SENDONCE_QUEUE_URL, else the one queue whose dead-letter queue this is)")
	dryRun := f.Bool("dry-run", false, "only say what would move")
	match := f.String("reason-match", "", "only messages whose sendonce-error reason matches the regular expression `RE`")
	visibility := f.Duration("visibility", 60*time.Second, "`D`: how long a message is hidden while it is handled")
	c.RunE = func(c *cobra.Command, _ []string) error {
		ctx := c.Context()
		url, err := a.dlqURL(c, *dlq)
		if err != nil {
			return err
		}
		if *visibility < time.Second || *visibility > 12*time.Hour {
			return &usageError{cmd: c, msg: "--visibility must be between 1s and 12h"}
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
		var (
			skipped []string
			tally   = &tally{n: map[string]int{}, dryRun: *dryRun}
			out     = a.redriveLines()
		)
		err = receiveAll(ctx, q, url, *visibility, 0, func(m types.Message) error {
			v := describeMessage(m, rd)
			rv := redriveView{MessageID: v.MessageID, Key: v.Key, Reason: cmp.Or(v.Reason, v.Invalid)}
			switch {
			case !v.Valid:
				rv.Action, rv.Reason = "invalid", v.Invalid
			case re != nil && !re.MatchString(stringAttr(m, sender.AttrErrorReason)):
				rv.Action = "no-match"
			case *dryRun:
				rv.Action = "would-move"
			}
			if rv.Action != "" {
				skipped = append(skipped, aws.ToString(m.ReceiptHandle))
			} else if err := move(ctx, q, target, url, m); err != nil {
				rv.Action, rv.Reason = "failed", err.Error()
			} else {
				rv.Action = "moved"
			}
			tally.add(rv.Action)
			a.prog.show("dlq redrive: " + tally.String())
			return out.line(rv)
		})
		release(context.WithoutCancel(ctx), q, url, skipped)
		if err == nil {
			err = out.flush()
		}
		if err != nil {
			return fmt.Errorf("dlq redrive: %w (so far %s)", err, tally)
		}
		if n := tally.n["failed"]; n > 0 {
			return fmt.Errorf("dlq redrive: %d message(s) could not be moved; they are still in the dead-letter queue (or in both queues, which the ledger absorbs): %s", n, tally)
		}
		a.note("dlq redrive: %s", tally)
		return nil
	}
	return c
}

// sqsAPI is the part of the SQS client the dlq commands use.
type sqsAPI interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
	DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
	ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
	ListDeadLetterSourceQueues(ctx context.Context, in *sqs.ListDeadLetterSourceQueuesInput, optFns ...func(*sqs.Options)) (*sqs.ListDeadLetterSourceQueuesOutput, error)
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
	if p.query != nil {
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
	if p.query == nil {
		return nil
	}
	return writeList(p, o.collected, nil, nil)
}

// move sends m's body to queue, then deletes m from dlq: in that order,
// so a crash in between duplicates the message and never loses it.
func move(ctx context.Context, q sqsAPI, queue, dlq string, m types.Message) error {
	in := &sqs.SendMessageInput{QueueUrl: aws.String(queue), MessageBody: m.Body}
	if strings.HasSuffix(queue, ".fifo") {
		group := m.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)]
		if group == "" {
			group = "redrive"
		}
		in.MessageGroupId = aws.String(group)
		in.MessageDeduplicationId = m.MessageId
	}
	if _, err := q.SendMessage(ctx, in); err != nil {
		return &queueError{url: queue, flag: "--queue-url or SENDONCE_QUEUE_URL", err: fmt.Errorf("send to the queue: %w", err)}
	}
	if _, err := q.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(dlq), ReceiptHandle: m.ReceiptHandle}); err != nil {
		return fmt.Errorf("sent to the queue, but not deleted from the dead-letter queue (a duplicate the ledger absorbs): %w", err)
	}
	return nil
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
