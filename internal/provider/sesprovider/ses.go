// Package sesprovider sends email through Amazon SES (the SESv2 SendEmail
// API), and translates every SES failure into a *provider.Error.
//
// Each message goes out as Simple content: the subject, the text part and,
// when the message has one, the HTML part. The idempotency key rides along
// twice, so SES events can be tied back to the ledger row: as the email
// tag TagKey (SES copies tags into every event it publishes for the
// configuration set) and as the header HeaderKey (in the message itself,
// and in the event's mail.headers).
//
// SES takes no client idempotency key and cannot be asked whether it sent
// a message, so the adapter promises neither (Capabilities is all false):
// an ambiguous outcome becomes UNCERTAIN and the message's class decides
// what follows. For the same reason the AWS SDK's own retries are switched
// off for SendEmail: a retry of a call that timed out after it was written
// could send twice. The sender retries what is safe (Transient).
package sesprovider

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/aws/aws-sdk-go-v2/service/sesv2/types"

	"github.com/sendonce/sendonce/internal/provider/awserr"
	"github.com/sendonce/sendonce/internal/redact"
	"github.com/sendonce/sendonce/provider"
)

// Name is the adapter's configuration name.
const Name = "ses"

// Where the idempotency key travels with each email.
const (
	// TagKey is the email tag (SendEmail EmailTags) holding the key.
	TagKey = "sendonce-key"
	// HeaderKey is the message header holding the key.
	HeaderKey = "X-Sendonce-Key"
)

// charset of every part.
const charset = "UTF-8"

// EmailSender is the part of *sesv2.Client the adapter uses, so tests can wrap
// or replace it.
type EmailSender interface {
	SendEmail(ctx context.Context, in *sesv2.SendEmailInput, optFns ...func(*sesv2.Options)) (*sesv2.SendEmailOutput, error)
}

// Config configures a Provider.
type Config struct {
	// Client sends; usually sesv2.NewFromConfig(cfg). Required.
	Client EmailSender
	// From is the sender address, a verified SES identity (the address
	// itself or its domain). Required.
	From string
	// ConfigurationSet is the optional SES configuration set every email
	// is sent with; its event destination publishes bounces, complaints
	// and deliveries.
	ConfigurationSet string
	// Timeout bounds one SendEmail call; zero means the caller's ctx only.
	Timeout time.Duration
	// Logger receives one line per failed send (addresses redacted); nil
	// discards.
	Logger *slog.Logger
	// Redactor makes the tokens of the addresses in its log lines and
	// error texts; nil: redact.Default.
	Redactor *redact.Redactor
}

// Provider is the SES adapter. It implements provider.Adapter.
type Provider struct {
	awserr.Base
	cfg Config
}

// New returns an SES adapter. It returns an error when cfg.Client is nil
// or cfg.From is not an email address.
func New(cfg Config) (*Provider, error) {
	if cfg.Client == nil {
		return nil, errors.New("sesprovider: new: no SES client")
	}
	if at := strings.LastIndexByte(cfg.From, '@'); at <= 0 || at == len(cfg.From)-1 || strings.ContainsAny(cfg.From, " \t\r\n<>") {
		return nil, fmt.Errorf("sesprovider: new: From %q is not an email address", cfg.From)
	}
	return &Provider{Base: awserr.NewBase(service, cfg.Timeout, cfg.Logger, cfg.Redactor), cfg: cfg}, nil
}

// noRetry turns the SDK's retries off for one call (see the package doc).
func noRetry(o *sesv2.Options) { o.RetryMaxAttempts = 1 }

// Send sends m as one email to m.To. It returns SES's message id, or a
// *provider.Error classified by Classify. A message that is not email or
// has no address is a Permanent error, and nothing is sent.
func (p *Provider) Send(ctx context.Context, m provider.Message) (provider.Receipt, error) {
	return awserr.Send(ctx, p.Base, m, "ses send failed", p.Input, p.cfg.Client.SendEmail,
		func(out *sesv2.SendEmailOutput) *string { return out.MessageId }, noRetry)
}

// Input builds the SendEmail call for m: Simple content with a text part,
// an HTML part when m.HTML is set, the key as tag and header, and the
// configuration set when one is configured.
func (p *Provider) Input(m provider.Message) (*sesv2.SendEmailInput, error) {
	if m.Channel != "email" {
		return nil, service.Refuse(fmt.Sprintf("channel %q is not served by ses", m.Channel))
	}
	if m.To == "" {
		return nil, service.Refuse("no email address")
	}
	body := &types.Body{Text: &types.Content{Data: aws.String(m.Body), Charset: aws.String(charset)}}
	if m.HTML != "" {
		body.Html = &types.Content{Data: aws.String(m.HTML), Charset: aws.String(charset)}
	}
	in := &sesv2.SendEmailInput{
		FromEmailAddress: aws.String(p.cfg.From),
		Destination:      &types.Destination{ToAddresses: []string{m.To}},
		Content: &types.EmailContent{Simple: &types.Message{
			Subject: &types.Content{Data: aws.String(m.Subject), Charset: aws.String(charset)},
			Body:    body,
			Headers: []types.MessageHeader{{Name: aws.String(HeaderKey), Value: aws.String(m.Key)}},
		}},
		EmailTags: []types.MessageTag{{Name: aws.String(TagKey), Value: aws.String(m.Key)}},
	}
	if p.cfg.ConfigurationSet != "" {
		in.ConfigurationSetName = aws.String(p.cfg.ConfigurationSet)
	}
	return in, nil
}

// codeKinds classifies SES's error codes: the SendEmail errors of the
// SESv2 API reference (service/sesv2/types/errors.go) and the common AWS
// error codes SES gives its own meaning; awserr classifies the others.
var codeKinds = map[string]awserr.Code{
	// The message is at fault, or its sender is not a verified identity:
	// SES refused it and sent nothing. FAILED.
	"MessageRejected":                    {provider.Permanent, "rejected by SES"},
	"MailFromDomainNotVerifiedException": {provider.Permanent, "sending domain is not verified"},
	"BadRequestException":                {provider.Permanent, "invalid request"},
	// Throttling (sending rate or daily quota): SES took nothing; retry
	// later (AWS: wait up to 10 minutes).
	"TooManyRequestsException": {provider.Transient, "throttled"},
	"LimitExceededException":   {provider.Transient, "sending limit exceeded"},
	"ServiceUnavailable":       {provider.Transient, "SES unavailable"},
	// The deployment is at fault: retried, alarmed, never FAILED.
	"AccountSuspendedException": {provider.Config, "SES account suspended"},
	"SendingPausedException":    {provider.Config, "SES sending paused for the account or configuration set"},
	"NotFoundException":         {provider.Config, "configuration set not found"},
}

// Classify translates an error from SendEmail into a *provider.Error by
// the rules of awserr.Service.Classify, with SES's codes (codeKinds:
// Permanent for a rejected message or an unverified sender, Transient for
// throttling, Config for account problems). to is the message's raw
// address; it is redacted out of any text kept. A 5xx is Ambiguous: SES
// does not say whether it accepted the message, and it cannot drop a
// repeat.
func Classify(err error, to string) *provider.Error { return service.Classify(err, to) }

// service classifies SES errors: Classify's rules, SES's words.
var service = awserr.Service{
	Provider: Name, Service: "SES", Codes: codeKinds, DetailKnown: true,
	Maybe: "the email may have been accepted",
}
