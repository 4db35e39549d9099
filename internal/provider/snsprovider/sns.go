// Package snsprovider sends SMS and mobile push notifications through
// Amazon SNS, and translates every SNS failure into a *provider.Error.
//
// SMS goes out with Publish(PhoneNumber), push with Publish(TargetArn) to a
// platform endpoint and a per-platform JSON message. A channel configured
// with a topic ARN is fanned out through that topic instead.
//
// SNS takes no client idempotency key and has no lookup, so the adapter
// promises neither (Capabilities is all false). For the same reason the
// AWS SDK's own retries are switched off for Publish: a retry of a
// Publish that timed out after it was written could send twice. The
// sender retries what is safe to retry (Transient) on its own schedule.
package snsprovider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sns/types"

	"github.com/sendonce/sendonce/internal/provider/awserr"
	"github.com/sendonce/sendonce/internal/redact"
	"github.com/sendonce/sendonce/provider"
)

// Name is the adapter's configuration name.
const Name = "sns"

// The message attributes SNS reads for SMS (AWS SNS developer guide,
// "Publishing SMS messages": message attributes).
const (
	AttrSMSType           = "AWS.SNS.SMS.SMSType"
	AttrSenderID          = "AWS.SNS.SMS.SenderID"
	AttrOriginationNumber = "AWS.MM.SMS.OriginationNumber"
	// AttrKey carries the idempotency key on topic fan-out, so a
	// subscriber can drop a repeat.
	AttrKey = "sendonce.key"
)

// The SMS types SNS accepts in AttrSMSType.
const (
	SMSTransactional = "Transactional"
	SMSPromotional   = "Promotional"
)

// Publisher is the part of *sns.Client the adapter uses, so tests can wrap
// or replace it.
type Publisher interface {
	Publish(ctx context.Context, in *sns.PublishInput, optFns ...func(*sns.Options)) (*sns.PublishOutput, error)
}

// Config configures a Provider.
type Config struct {
	// Client publishes; usually sns.NewFromConfig(cfg). Required.
	Client Publisher
	// SenderID is the optional alphanumeric sender id of SMS.
	SenderID string
	// OriginationNumber is the optional E.164 number SMS are sent from.
	OriginationNumber string
	// TopicARNs maps a channel ("sms", "push", "email") to a topic: a
	// message on that channel is published to the topic (fan-out) rather
	// than to its recipient address.
	TopicARNs map[string]string
	// Timeout bounds one Publish call; zero means the caller's ctx only.
	Timeout time.Duration
	// Logger receives one line per failed send (addresses redacted);
	// nil discards.
	Logger *slog.Logger
	// Redactor makes the tokens of the addresses in its log lines and
	// error texts; nil: redact.Default.
	Redactor *redact.Redactor
}

// Provider is the SNS adapter. It implements provider.Adapter.
type Provider struct {
	awserr.Base
	cfg Config
}

// New returns an SNS adapter. It returns an error when cfg.Client is nil.
func New(cfg Config) (*Provider, error) {
	if cfg.Client == nil {
		return nil, errors.New("snsprovider: new: no SNS client")
	}
	return &Provider{Base: awserr.NewBase(service, cfg.Timeout, cfg.Logger, cfg.Redactor), cfg: cfg}, nil
}

// noRetry turns the SDK's retries off for one call (see the package doc).
func noRetry(o *sns.Options) { o.RetryMaxAttempts = 1 }

// Send publishes m. It returns the SNS message id, or a *provider.Error
// classified by Classify. A channel the adapter cannot serve (email with
// no topic, an unknown channel) is a Permanent error.
func (p *Provider) Send(ctx context.Context, m provider.Message) (provider.Receipt, error) {
	return awserr.Send(ctx, p.Base, m, "sns publish failed", p.input, p.cfg.Client.Publish,
		func(out *sns.PublishOutput) *string { return out.MessageId }, noRetry)
}

// input builds the Publish call for m.
func (p *Provider) input(m provider.Message) (*sns.PublishInput, error) {
	if topic := p.cfg.TopicARNs[string(m.Channel)]; topic != "" {
		in := &sns.PublishInput{
			TopicArn: aws.String(topic),
			Message:  aws.String(m.Body),
			MessageAttributes: map[string]types.MessageAttributeValue{
				AttrKey: stringAttr(m.Key),
			},
		}
		if m.Subject != "" {
			in.Subject = aws.String(m.Subject)
		}
		if m.Channel == "push" {
			msg, err := pushMessage(m)
			if err != nil {
				return nil, err
			}
			in.Message, in.MessageStructure = aws.String(msg), aws.String("json")
		}
		return in, nil
	}
	switch m.Channel {
	case "sms":
		if m.To == "" {
			return nil, service.Refuse("no phone number")
		}
		attrs := map[string]types.MessageAttributeValue{AttrSMSType: stringAttr(smsType(string(m.Class)))}
		if p.cfg.SenderID != "" {
			attrs[AttrSenderID] = stringAttr(p.cfg.SenderID)
		}
		if p.cfg.OriginationNumber != "" {
			attrs[AttrOriginationNumber] = stringAttr(p.cfg.OriginationNumber)
		}
		return &sns.PublishInput{PhoneNumber: aws.String(m.To), Message: aws.String(m.Body), MessageAttributes: attrs}, nil
	case "push":
		if !strings.HasPrefix(m.To, "arn:") {
			return nil, service.Refuse("push target is not an SNS platform-endpoint ARN")
		}
		msg, err := pushMessage(m)
		if err != nil {
			return nil, err
		}
		return &sns.PublishInput{TargetArn: aws.String(m.To), Message: aws.String(msg), MessageStructure: aws.String("json")}, nil
	}
	return nil, service.Refuse(fmt.Sprintf("channel %q is not served by sns (configure a topic for it)", m.Channel))
}

func stringAttr(v string) types.MessageAttributeValue {
	return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
}

// smsType maps a message class to SNS's SMS type: marketing is
// Promotional, everything else (otp, transactional) Transactional.
func smsType(class string) string {
	if class == "marketing" {
		return SMSPromotional
	}
	return SMSTransactional
}

// pushMessage renders m as SNS's per-platform JSON message: each value is
// itself a JSON document in the platform's own format, carrying the key
// so an app can drop a repeat.
func pushMessage(m provider.Message) (string, error) {
	type alert struct {
		Title string `json:"title,omitempty"`
		Body  string `json:"body"`
	}
	gcm, err := json.Marshal(map[string]any{
		"notification": alert{Title: m.Subject, Body: m.Body},
		"data":         map[string]string{"sendonce_key": m.Key},
	})
	if err != nil {
		return "", service.Refuse("push message cannot be encoded")
	}
	apns, err := json.Marshal(map[string]any{
		"aps":          map[string]any{"alert": alert{Title: m.Subject, Body: m.Body}},
		"sendonce_key": m.Key,
	})
	if err != nil {
		return "", service.Refuse("push message cannot be encoded")
	}
	doc, err := json.Marshal(map[string]string{
		"default":      m.Body,
		"GCM":          string(gcm),
		"APNS":         string(apns),
		"APNS_SANDBOX": string(apns),
	})
	if err != nil {
		return "", service.Refuse("push message cannot be encoded")
	}
	return string(doc), nil
}

// codeKinds classifies SNS's error codes (the ErrorCode of the SDK's
// types in service/sns/types/errors.go, and the common AWS error codes
// SNS gives its own meaning; awserr classifies the others).
var codeKinds = map[string]awserr.Code{
	// The message is at fault: FAILED.
	"InvalidParameter":            {provider.Permanent, "invalid parameter"},
	"ParameterValueInvalid":       {provider.Permanent, "invalid parameter value"},
	"EndpointDisabled":            {provider.Permanent, "push endpoint is disabled"},
	"OptedOut":                    {provider.Permanent, "recipient opted out"},
	"NotFound":                    {provider.Permanent, "target not found"},
	"ResourceNotFound":            {provider.Permanent, "target not found"},
	"PlatformApplicationDisabled": {provider.Permanent, "platform application is disabled"},
	"UserError":                   {provider.Permanent, "rejected by SNS"},
	// SNS documents that it did not take it (the request was refused
	// before processing): retry later.
	"Throttled":        {provider.Transient, "throttled"},
	"KMSThrottling":    {provider.Transient, "KMS throttled"},
	"ConcurrentAccess": {provider.Transient, "concurrent access"},
	// SNS failed while processing: it documents nothing about whether the
	// message was published, and it cannot drop a repeat, so a retry may
	// duplicate it.
	"InternalError":      {provider.Ambiguous, "SNS internal error: the message may have been published"},
	"InternalFailure":    {provider.Ambiguous, "SNS internal failure: the message may have been published"},
	"ServiceUnavailable": {provider.Ambiguous, "SNS unavailable: the message may have been published"},
	// The deployment is at fault: retried, alarmed, never FAILED.
	"AuthorizationError":    {provider.Config, "not authorized to publish"},
	"InvalidSecurity":       {provider.Config, "request must use HTTPS and SigV4"},
	"KMSAccessDenied":       {provider.Config, "KMS access denied"},
	"KMSDisabled":           {provider.Config, "KMS key disabled"},
	"KMSInvalidState":       {provider.Config, "KMS key in invalid state"},
	"KMSNotFound":           {provider.Config, "KMS key not found"},
	"KMSOptInRequired":      {provider.Config, "KMS opt-in required"},
	"InvalidState":          {provider.Config, "SNS resource in invalid state"},
	"VerificationException": {provider.Config, "origination identity not verified"},
}

// Classify translates an error from Publish into a *provider.Error by the
// rules of awserr.Service.Classify, with SNS's codes (codeKinds: Permanent
// for a bad message, Transient for throttling, Ambiguous for internal
// errors and unavailability, since SNS cannot drop a repeat and does not
// say whether it published, Config for permissions and KMS). to is the
// message's raw address; it is redacted out of any text kept.
func Classify(err error, to string) *provider.Error { return service.Classify(err, to) }

// service classifies SNS errors: Classify's rules, SNS's words.
var service = awserr.Service{
	Provider: Name, Service: "SNS", Codes: codeKinds,
	Maybe: "the message may have been published", Maybe5xx: "the request may have been processed",
}
