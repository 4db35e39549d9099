package sendonce

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sendonce/sendonce/internal/tracing"
	"github.com/sendonce/sendonce/notify"
)

// SQSSender is the SQS call Enqueue makes; *sqs.Client implements it.
type SQSSender interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

// Enqueue puts req on the notification queue at queueURL, for a producer:
// it checks req exactly as the sender will (notify.Request.Body) and,
// on a FIFO queue, sends it in its recipient's message group
// (notify.Request.MessageGroup) with its key as the deduplication id. It
// returns the queue's message id.
//
// Enqueue as often as the event is delivered to you: every copy carries
// the same key, and the sender sends it once.
func Enqueue(ctx context.Context, client SQSSender, queueURL string, req notify.Request) (string, error) {
	body, err := req.Body()
	if err != nil {
		return "", fmt.Errorf("sendonce: enqueue: %w", err)
	}
	in := &sqs.SendMessageInput{QueueUrl: aws.String(queueURL), MessageBody: aws.String(string(body))}
	if strings.HasSuffix(queueURL, ".fifo") {
		in.MessageGroupId = aws.String(req.MessageGroup())
		in.MessageDeduplicationId = aws.String(req.Key())
	}
	// The message carries its trace (package tracing): the sender's spans
	// join it.
	ctx, span := tracing.StartProducer(ctx, tracing.SpanEnqueue, tracing.AttrKey.String(req.Key()), tracing.AttrChannel.String(string(req.Channel)))
	tracing.SetHeader(ctx, in)
	out, err := client.SendMessage(ctx, in)
	tracing.End(span, err)
	if err != nil {
		return "", fmt.Errorf("sendonce: enqueue %s: %w", req.Key(), err)
	}
	return aws.ToString(out.MessageId), nil
}
