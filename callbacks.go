package sendonce

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sendonce/sendonce/internal/sesevents"
	"github.com/sendonce/sendonce/internal/webhook"
	"github.com/sendonce/sendonce/internal/webhook/dynamodedup"
	"github.com/sendonce/sendonce/internal/webhook/memdedup"
)

// DefaultDedupTTL is how long a handled callback is remembered, so that a
// provider's retry of it changes nothing, unless CallbacksConfig says
// otherwise.
const DefaultDedupTTL = webhook.DefaultDedupTTL

// CallbacksConfig is what Callbacks are built from. NewCallbacks
// validates it.
type CallbacksConfig struct {
	// Ledger receives the delivery statuses. Required.
	Ledger *Ledger
	// HTTPSecret is the generic HTTP provider's callback HMAC secret
	// (docs/http-provider.md); empty disables /callbacks/http.
	HTTPSecret []byte
	// TwilioAuthToken is the Twilio account's auth token, which signs its
	// status callbacks; empty disables /callbacks/twilio.
	TwilioAuthToken string
	// PublicBaseURL is the scheme and host under which Twilio reaches the
	// handler (the URL Twilio signs), e.g. "https://abc.lambda-url.us-east-1.on.aws".
	PublicBaseURL string
	// DedupTTL is how long a handled callback is remembered
	// (DefaultDedupTTL).
	DedupTTL time.Duration
	// Metrics receives the callbacks' metrics; nil records none.
	Metrics Metrics
	// Logger receives the callbacks' log lines; nil logs nothing.
	Logger *slog.Logger
}

// Callbacks verify the providers' delivery callbacks, drop the ones
// handled before, and apply each status to its message's row in order:
// a late "sent" never overwrites "delivered". It is safe for concurrent
// use.
type Callbacks struct {
	h   *webhook.Handler
	ses *sesevents.Handler
}

// NewCallbacks validates cfg and returns Callbacks.
func NewCallbacks(cfg CallbacksConfig) (*Callbacks, error) {
	if cfg.Ledger == nil {
		return nil, errors.New("sendonce: new callbacks: a ledger is required")
	}
	ttl := cfg.DedupTTL
	if ttl == 0 {
		ttl = DefaultDedupTTL
	}
	var dedup webhook.Dedup = memdedup.New(memdedup.Config{TTL: ttl})
	if cfg.Ledger.db != nil {
		d, err := dynamodedup.New(cfg.Ledger.db, cfg.Ledger.table, dynamodedup.Config{TTL: ttl})
		if err != nil {
			return nil, fmt.Errorf("sendonce: new callbacks: %w", err)
		}
		dedup = d
	}
	h, err := webhook.New(webhook.Config{
		Ledger:          cfg.Ledger.rows,
		Dedup:           dedup,
		HTTPSecret:      cfg.HTTPSecret,
		TwilioAuthToken: cfg.TwilioAuthToken,
		PublicBaseURL:   cfg.PublicBaseURL,
		Metrics:         recorder(cfg.Metrics),
		Logger:          logger(cfg.Logger),
	})
	if err != nil {
		return nil, fmt.Errorf("sendonce: new callbacks: %w", err)
	}
	ses, err := sesevents.New(h, recorder(cfg.Metrics), logger(cfg.Logger))
	if err != nil {
		return nil, fmt.Errorf("sendonce: new callbacks: %w", err)
	}
	return &Callbacks{h: h, ses: ses}, nil
}

// HandleFunctionURL answers one callback request to /callbacks/http or
// /callbacks/twilio, from a Lambda function URL (API Gateway HTTP API
// payload 2.0 events have the same shape). It never returns an error:
// every failure is an HTTP answer with a generic body, its detail logged.
func (c *Callbacks) HandleFunctionURL(ctx context.Context, req events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
	return c.h.Handle(ctx, req)
}

// HandleSESEvents applies the SES notifications of an SNS event (sends,
// deliveries, bounces, complaints, rejects) to their messages' rows. An
// error means some could not be applied: the invocation is retried, and
// the ones applied already are dropped as duplicates.
func (c *Callbacks) HandleSESEvents(ctx context.Context, e events.SNSEvent) error {
	return c.ses.Handle(ctx, e)
}
