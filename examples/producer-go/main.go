// Command producer-go sends one notification request to the sendonce
// queue with the AWS SDK for Go v2: the request of docs/request.md as the
// message body and, on a FIFO queue, a MessageGroupId per recipient so one
// recipient's messages go out in order.
//
//	go run ./examples/producer-go -queue-url URL -tenant acme -event evt_01J9Z3 \
//	    -recipient user-42 -phone +15551234567 -template order_shipped -data '{"order_id":"A-1001"}'
//
// Region, credentials and endpoint come from the SDK's standard variables
// (AWS_REGION, AWS_PROFILE, AWS_ENDPOINT_URL_SQS for a local emulator). It
// prints the SQS message id. It imports nothing of sendonce: copy it.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// Request is the notification request (docs/request.md).
type Request struct {
	TenantID  string         `json:"tenant_id"`
	EventID   string         `json:"event_id"`
	Channel   string         `json:"channel"`
	Template  string         `json:"template"`
	Recipient Recipient      `json:"recipient"`
	Class     string         `json:"class,omitempty"`
	Locale    string         `json:"locale,omitempty"`
	Data      map[string]any `json:"data,omitempty"`
	Content   *Content       `json:"content,omitempty"`
}

// Recipient is who the message is for: a stable id and the address of the
// request's channel.
type Recipient struct {
	ID         string `json:"id"`
	Phone      string `json:"phone,omitempty"`
	Email      string `json:"email,omitempty"`
	PushTarget string `json:"push_target,omitempty"`
}

// Content is pre-rendered content, sent instead of a stored template.
type Content struct {
	Subject string `json:"subject,omitempty"`
	Text    string `json:"text"`
	HTML    string `json:"html,omitempty"`
}

// SQS is the part of the SQS client the producer uses.
type SQS interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

// Send enqueues req on queueURL and returns the SQS message id. On a FIFO
// queue (URL ending in ".fifo") the group is the tenant and recipient, and
// the deduplication id the event, recipient, channel and template, so SQS
// drops a repeat within its 5-minute window (sendonce's ledger drops it
// for its whole retention anyway).
func Send(ctx context.Context, client SQS, queueURL string, req Request) (string, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return "", fmt.Errorf("encode request: %w", err)
	}
	in := &sqs.SendMessageInput{QueueUrl: aws.String(queueURL), MessageBody: aws.String(string(body))}
	if strings.HasSuffix(queueURL, ".fifo") {
		in.MessageGroupId = aws.String(req.TenantID + ":" + req.Recipient.ID)
		in.MessageDeduplicationId = aws.String(dedupID(req))
	}
	out, err := client.SendMessage(ctx, in)
	if err != nil {
		return "", fmt.Errorf("send message: %w", err)
	}
	return aws.ToString(out.MessageId), nil
}

// dedupID fits SQS's 128-character limit of printable ASCII.
func dedupID(r Request) string {
	s := fmt.Sprintf("%s:%s:%s:%s:%s", r.TenantID, r.EventID, r.Recipient.ID, r.Channel, r.Template)
	var b strings.Builder
	for _, c := range s {
		if c > ' ' && c <= '~' && b.Len() < 128 {
			b.WriteRune(c)
		}
	}
	return b.String()
}

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("producer-go", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		req      Request
		data     string
		queueURL = fs.String("queue-url", os.Getenv("SENDONCE_QUEUE_URL"), "the notification queue (default $SENDONCE_QUEUE_URL)")
	)
	fs.StringVar(&req.TenantID, "tenant", "", "tenant_id")
	fs.StringVar(&req.EventID, "event", "", "event_id: your id of the business event, the same on every retry")
	fs.StringVar(&req.Channel, "channel", "sms", "sms, email or push")
	fs.StringVar(&req.Template, "template", "", "the template (the message's purpose)")
	fs.StringVar(&req.Recipient.ID, "recipient", "", "the recipient's stable id")
	fs.StringVar(&req.Recipient.Phone, "phone", "", "E.164 number (sms)")
	fs.StringVar(&req.Recipient.Email, "email", "", "email address (email)")
	fs.StringVar(&req.Locale, "locale", "", "locale, e.g. pt-BR")
	fs.StringVar(&data, "data", "", "template parameters as a JSON object")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *queueURL == "" || req.TenantID == "" || req.EventID == "" || req.Template == "" || req.Recipient.ID == "" {
		fmt.Fprintln(stderr, "producer-go: -queue-url, -tenant, -event, -template and -recipient are required")
		return 2
	}
	if data != "" {
		if err := json.Unmarshal([]byte(data), &req.Data); err != nil {
			fmt.Fprintln(stderr, "producer-go: -data is not a JSON object:", err)
			return 2
		}
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err == nil && cfg.Region == "" {
		err = errors.New("no AWS region: set AWS_REGION")
	}
	if err != nil {
		fmt.Fprintln(stderr, "producer-go:", err)
		return 1
	}
	id, err := Send(ctx, sqs.NewFromConfig(cfg), *queueURL, req)
	if err != nil {
		fmt.Fprintln(stderr, "producer-go:", err)
		return 1
	}
	fmt.Fprintln(stdout, id)
	return 0
}
