package sender

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sendonce/sendonce/notify"
)

// Message attributes set on a request moved to the dead-letter queue.
const (
	AttrErrorReason    = "sendonce-error"
	AttrErrorField     = "sendonce-error-field"
	AttrSourceID       = "sendonce-source-message-id"
	AttrReceiveCount   = "sendonce-receive-count"
	maxAttributeLength = 1024
)

// SQSSendAPI is the part of the SQS client the dead-letter queue uses.
type SQSSendAPI interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

// SQSDeadLetters puts invalid requests on an SQS queue (the notification
// queue's dead-letter queue), the original body unchanged and the reason
// in message attributes.
type SQSDeadLetters struct {
	Client   SQSSendAPI
	QueueURL string
}

// Put implements DeadLetters.
func (d *SQSDeadLetters) Put(ctx context.Context, rec events.SQSMessage, invalid *notify.InvalidError) error {
	attrs := map[string]types.MessageAttributeValue{
		AttrErrorReason: stringAttr(invalid.Error()),
		AttrSourceID:    stringAttr(rec.MessageId),
	}
	if invalid.Field != "" {
		attrs[AttrErrorField] = stringAttr(invalid.Field)
	}
	if n := rec.Attributes["ApproximateReceiveCount"]; n != "" {
		attrs[AttrReceiveCount] = stringAttr(n)
	}
	in := &sqs.SendMessageInput{
		QueueUrl:          aws.String(d.QueueURL),
		MessageBody:       aws.String(rec.Body),
		MessageAttributes: attrs,
	}
	if strings.HasSuffix(d.QueueURL, ".fifo") {
		group := rec.Attributes["MessageGroupId"]
		if group == "" {
			group = "invalid"
		}
		in.MessageGroupId = aws.String(group)
		in.MessageDeduplicationId = aws.String(rec.MessageId)
	}
	if _, err := d.Client.SendMessage(ctx, in); err != nil {
		return fmt.Errorf("sender: dead-letter %s: %w", rec.MessageId, err)
	}
	return nil
}

func stringAttr(s string) types.MessageAttributeValue {
	if len(s) > maxAttributeLength {
		s = s[:maxAttributeLength]
	}
	return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(s)}
}
