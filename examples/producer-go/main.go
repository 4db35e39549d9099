// Command producer-go sends one notification request to the sendonce
// queue from Go: it builds a notify.Request (the request of
// docs/request.md) and enqueues it with sendonce.Enqueue, which checks it
// as the sender will and, on a FIFO queue, sends it in its recipient's
// message group with its key as the deduplication id.
//
//	go run ./examples/producer-go -queue-url URL -tenant acme -event evt_01J9Z3 \
//	    -recipient user-42 -phone +15551234567 -template order_shipped -data '{"order_id":"A-1001"}'
//
// Region, credentials and endpoint come from the SDK's standard variables
// (AWS_REGION, AWS_PROFILE, AWS_ENDPOINT_URL_SQS for a local emulator). It
// prints the SQS message id. A producer in another language builds the
// same JSON (schema/notification-request.v1.json): see aws-cli.sh.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sendonce/sendonce"
	"github.com/sendonce/sendonce/notify"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("producer-go", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		req      notify.Request
		channel  string
		data     string
		queueURL = fs.String("queue-url", os.Getenv("SENDONCE_QUEUE_URL"), "the notification queue (default $SENDONCE_QUEUE_URL)")
	)
	fs.StringVar(&req.TenantID, "tenant", "", "tenant_id")
	fs.StringVar(&req.EventID, "event", "", "event_id: your id of the business event, the same on every retry")
	fs.StringVar(&channel, "channel", "sms", "sms, email or push")
	fs.StringVar(&req.Template, "template", "", "the template (the message's purpose)")
	fs.StringVar(&req.Recipient.ID, "recipient", "", "the recipient's stable id")
	fs.StringVar(&req.Recipient.Phone, "phone", "", "E.164 number (sms)")
	fs.StringVar(&req.Recipient.Email, "email", "", "email address (email)")
	fs.StringVar(&req.Locale, "locale", "", "locale, e.g. pt-BR")
	fs.StringVar(&data, "data", "", "template parameters as a JSON object")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *queueURL == "" {
		fmt.Fprintln(stderr, "producer-go: -queue-url (or SENDONCE_QUEUE_URL) is required")
		return 2
	}
	req.Channel = notify.Channel(channel)
	if data != "" {
		if err := json.Unmarshal([]byte(data), &req.Data); err != nil {
			fmt.Fprintln(stderr, "producer-go: -data is not a JSON object:", err)
			return 2
		}
	}
	// Checked before any AWS call: the same checks the sender makes, so
	// a request that passes is never dead-lettered for its shape.
	if _, err := req.Body(); err != nil {
		fmt.Fprintln(stderr, "producer-go:", err)
		return 2
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err == nil && cfg.Region == "" {
		err = errors.New("no AWS region: set AWS_REGION")
	}
	if err != nil {
		fmt.Fprintln(stderr, "producer-go:", err)
		return 1
	}
	id, err := sendonce.Enqueue(ctx, sqs.NewFromConfig(cfg), *queueURL, req)
	if err != nil {
		fmt.Fprintln(stderr, "producer-go:", err)
		return 1
	}
	fmt.Fprintln(stdout, id)
	return 0
}
