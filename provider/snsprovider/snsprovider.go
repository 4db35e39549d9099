// Package snsprovider is sendonce's adapter for Amazon SNS: SMS to a
// phone number, mobile push to a platform endpoint, and fan-out through a
// topic for a channel given one. Its configuration name, stored in every
// row it sends, is "sns".
//
// SNS takes no client idempotency key and cannot be asked whether it sent
// a message, so the adapter declares neither capability: an ambiguous
// attempt (a timeout, an SNS 5xx after the request was written) is
// recorded UNCERTAIN and settled by the message class's policy. The SDK's
// own retries are switched off for Publish, since a retry of a call that
// timed out after it was written could send twice; the sender retries
// what is safe to retry. Every failure is a *provider.Error: a bad number
// or an opted-out recipient Permanent, throttling Transient, permissions
// and KMS Config, internal errors Ambiguous. docs/providers.md has the
// whole table.
//
// The adapter reads no environment variable. The SAM application's
// functions build it from theirs (SENDONCE_SNS_*, docs/configuration.md)
// through New, as a program of your own does with its own settings.
package snsprovider

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sns"

	"github.com/sendonce/sendonce/internal/provider/settings"
	"github.com/sendonce/sendonce/internal/provider/snsprovider"
	"github.com/sendonce/sendonce/notify"
	"github.com/sendonce/sendonce/provider"
)

// Publisher is the part of the SNS client the adapter calls: *sns.Client
// (github.com/aws/aws-sdk-go-v2/service/sns) implements it.
type Publisher interface {
	Publish(ctx context.Context, in *sns.PublishInput, optFns ...func(*sns.Options)) (*sns.PublishOutput, error)
}

// Options configure the adapter. The zero value is valid: SMS and push
// to each message's own recipient, a 5 s timeout, no log lines.
type Options struct {
	// SenderID is the alphanumeric sender id of SMS (SNS's
	// AWS.SNS.SMS.SenderID attribute), where the destination country
	// supports one. Empty: none.
	SenderID string
	// OriginationNumber is the E.164 number SMS are sent from (SNS's
	// AWS.MM.SMS.OriginationNumber attribute). Empty: SNS chooses.
	OriginationNumber string
	// Topics maps a channel to the ARN of an SNS topic: a message on that
	// channel is published to the topic, for its subscribers to deliver,
	// rather than to its recipient, with its key in the message attribute
	// "sendonce.key" so that a subscriber can drop a repeat. Email goes
	// through SNS only this way. Nil: no topic.
	Topics map[notify.Channel]string
	// Timeout bounds one Publish call. Zero: 5 s
	// (sendonce.DefaultProviderTimeout); a negative value is refused.
	Timeout time.Duration
	// Logger receives a warning line for each failed send, with the
	// recipient as a token. Nil: none.
	Logger *slog.Logger
	// RedactionKey keys the tokens that stand for recipients' addresses
	// in the adapter's log lines and error reasons, as
	// sendonce.SenderConfig.RedactionKey does the sender's: at least 32
	// bytes, the same in every process of a deployment. Empty: the
	// process's key (random unless the Lambda wiring set the
	// deployment's).
	RedactionKey []byte
}

// New returns the SNS adapter, publishing through client (usually
// sns.NewFromConfig(cfg)). It returns an error when client is nil, a
// topic is not an ARN or is given for an unknown channel, Timeout is
// negative, or RedactionKey is shorter than 32 bytes.
func New(client Publisher, opts Options) (provider.Adapter, error) {
	if client == nil {
		return nil, errors.New("snsprovider: new: no SNS client")
	}
	topics := make(map[string]string, len(opts.Topics))
	for ch, arn := range opts.Topics {
		if !ch.Valid() {
			return nil, fmt.Errorf("snsprovider: new: Topics: %q is not a channel (sms, email, push)", ch)
		}
		if !strings.HasPrefix(arn, "arn:") {
			return nil, fmt.Errorf("snsprovider: new: Topics[%s]: %q is not a topic ARN", ch, arn)
		}
		topics[string(ch)] = arn
	}
	timeout, r, err := settings.Common("snsprovider", opts.Timeout, opts.RedactionKey)
	if err != nil {
		return nil, err
	}
	a, err := snsprovider.New(snsprovider.Config{
		Client: client, SenderID: opts.SenderID, OriginationNumber: opts.OriginationNumber,
		TopicARNs: topics, Timeout: timeout,
		Logger: opts.Logger, Redactor: r,
	})
	if err != nil {
		return nil, err
	}
	return a, nil
}
