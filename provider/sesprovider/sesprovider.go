// Package sesprovider is sendonce's adapter for Amazon SES (the SESv2
// SendEmail API). Its configuration name, stored in every row it sends,
// is "ses".
//
// Each message goes out as one email with a text part and, when the
// message has one, an HTML part. Its key rides along twice, so that SES's
// bounce, complaint and delivery events can be tied back to its row
// (sendonce.Callbacks.HandleSESEvents): as the email tag "sendonce-key"
// and as the header "X-Sendonce-Key".
//
// SES takes no client idempotency key and cannot be asked whether it sent
// a message, so the adapter declares neither capability: an ambiguous
// attempt is recorded UNCERTAIN and settled by the message class's
// policy. The SDK's own retries are switched off for SendEmail; the
// sender retries what is safe to retry. Every failure is a
// *provider.Error: a rejected message or an unverified sender Permanent,
// throttling Transient, a suspended account or a missing configuration
// set Config, a 5xx or a timeout after the request was written Ambiguous.
//
// The adapter reads no environment variable. The SAM application's
// functions build it from theirs (SENDONCE_SES_*, docs/configuration.md)
// through New, as a program of your own does with its own settings.
package sesprovider

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sesv2"

	"github.com/sendonce/sendonce/internal/provider/sesprovider"
	"github.com/sendonce/sendonce/internal/provider/settings"
	"github.com/sendonce/sendonce/provider"
)

// EmailSender is the part of the SESv2 client the adapter calls:
// *sesv2.Client (github.com/aws/aws-sdk-go-v2/service/sesv2) implements
// it.
type EmailSender interface {
	SendEmail(ctx context.Context, in *sesv2.SendEmailInput, optFns ...func(*sesv2.Options)) (*sesv2.SendEmailOutput, error)
}

// Options configure the adapter.
type Options struct {
	// From is the sender address, a verified SES identity (the address
	// itself or its domain). Required.
	From string
	// ConfigurationSet is the SES configuration set every email is sent
	// with; its event destination publishes bounces, complaints and
	// deliveries. Empty: none.
	ConfigurationSet string
	// Timeout bounds one SendEmail call. Zero: 5 s
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

// New returns the SES adapter, sending through client (usually
// sesv2.NewFromConfig(cfg)). It returns an error when client is nil,
// From is not an email address, Timeout is negative, or RedactionKey is
// shorter than 32 bytes.
func New(client EmailSender, opts Options) (provider.Adapter, error) {
	if client == nil {
		return nil, errors.New("sesprovider: new: no SES client")
	}
	timeout, r, err := settings.Common("sesprovider", opts.Timeout, opts.RedactionKey)
	if err != nil {
		return nil, err
	}
	a, err := sesprovider.New(sesprovider.Config{
		Client: client, From: opts.From, ConfigurationSet: opts.ConfigurationSet,
		Timeout: timeout, Logger: opts.Logger, Redactor: r,
	})
	if err != nil {
		return nil, err
	}
	return a, nil
}
