// Package sesevents applies Amazon SES email events (bounce, complaint,
// delivery, reject) to the send ledger.
//
// SES publishes the events of the configuration set the ses provider sends
// with (package sesprovider) to an SNS topic; the topic is subscribed to
// the SES events function as a Lambda event source, so each invocation is
// an events.SNSEvent authorised by IAM: no public endpoint, no signature
// or certificate to check.
//
// Each record's message is one SES event (the event publishing format,
// "eventType"; the identity notification format, "notificationType", is
// read too). The ledger key comes from the email tag TagKey,
// which SES copies into every event, else from the HeaderKey
// header in mail.headers. The event becomes a webhook.Callback and is
// applied through webhook.Handler.Apply: the same deduplication (a
// "cb#ses#..." record per event) and the same monotonic ranks (a late
// delivery never replaces a bounce) as provider callbacks.
//
//	Bounce (Permanent, Undetermined)  bounced
//	Bounce (Transient)                undelivered (SES gave up retrying)
//	Complaint                         complained
//	Delivery                          delivered
//	Reject                            rejected
//	anything else                     ignored, counted as InvalidCallbacks
//	                                  (reason ignored_status)
//
// The event id is the bounce's or complaint's feedbackId, or SES's message
// id with the event type for the others, so SNS's redeliveries and SES's
// own repeats of an event are one event.
//
// Bounces and complaints are counted (EmailBounces with dimension
// bounce_type, EmailComplaints), so the alarms SES's reputation rules call
// for can be set on them. No recipient address is ever logged.
package sesevents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sendonce/sendonce/internal/metrics"
	"github.com/sendonce/sendonce/internal/sendkey"
	"github.com/sendonce/sendonce/internal/webhook"
)

// Where the SES adapter puts each email's key, which SES copies into its
// events: the email tag and the message header (the adapter's
// sesprovider.TagKey and HeaderKey; a test keeps them equal). Declared
// here so that the handler does not link the SES client.
const (
	TagKey    = "sendonce-key"
	HeaderKey = "X-Sendonce-Key"
)

// Provider is the callback source name of SES events: their dedup records
// are "cb#ses#<event id>".
const Provider webhook.Provider = "ses"

// The metrics the handler records beyond the webhook's callback counters.
const (
	MetricBounces    = "EmailBounces"
	MetricComplaints = "EmailComplaints"
)

// ErrMalformed is matched (errors.Is) by every error Parse returns for a
// message that is not a usable SES event.
var ErrMalformed = webhook.ErrMalformed

// ErrIgnored is matched by Parse's error for a well-formed event whose
// type the ledger does not track (send, open, click, delivery delay, ...).
var ErrIgnored = webhook.ErrIgnoredStatus

// Event is the part of an SES event the ledger needs.
type Event struct {
	EventType        string     `json:"eventType"`
	NotificationType string     `json:"notificationType"`
	Mail             Mail       `json:"mail"`
	Bounce           *Bounce    `json:"bounce"`
	Complaint        *Complaint `json:"complaint"`
	Delivery         *Delivery  `json:"delivery"`
	Reject           *Reject    `json:"reject"`
}

// Mail describes the email an event is about.
type Mail struct {
	MessageID string              `json:"messageId"`
	Timestamp string              `json:"timestamp"`
	Tags      map[string][]string `json:"tags"`
	Headers   []struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	} `json:"headers"`
}

// Bounce is a bounce event's detail.
type Bounce struct {
	BounceType    string `json:"bounceType"`
	BounceSubType string `json:"bounceSubType"`
	FeedbackID    string `json:"feedbackId"`
	Timestamp     string `json:"timestamp"`
}

// Complaint is a complaint event's detail.
type Complaint struct {
	FeedbackID            string `json:"feedbackId"`
	ComplaintFeedbackType string `json:"complaintFeedbackType"`
	Timestamp             string `json:"timestamp"`
}

// Delivery is a delivery event's detail.
type Delivery struct {
	Timestamp string `json:"timestamp"`
}

// Reject is a reject event's detail.
type Reject struct {
	Reason string `json:"reason"`
}

// maxMessage bounds the SNS message parsed (SNS allows 256 KB).
const maxMessage = 256 << 10

// Parse turns one SNS message holding an SES event into a callback. Its
// error matches ErrMalformed (not JSON, trailing data, no valid key, a
// bounce without feedbackId, ...) or ErrIgnored (an event type the ledger
// does not track). Parse also returns the event, for metrics.
func Parse(message string) (webhook.Callback, Event, error) {
	var ev Event
	if len(message) > maxMessage {
		return webhook.Callback{}, ev, fmt.Errorf("%w: SES event larger than %d bytes", ErrMalformed, maxMessage)
	}
	dec := json.NewDecoder(strings.NewReader(message))
	if err := dec.Decode(&ev); err != nil {
		return webhook.Callback{}, ev, fmt.Errorf("%w: SNS message is not an SES event object", ErrMalformed)
	}
	// Only EOF may follow: a stray "}" or "]" is an error of Token, not
	// the end of input.
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return webhook.Callback{}, ev, fmt.Errorf("%w: trailing data after the SES event", ErrMalformed)
	}
	typ := ev.EventType
	if typ == "" {
		typ = ev.NotificationType
	}
	cb := webhook.Callback{Provider: Provider, ProviderMessageID: ev.Mail.MessageID}
	var at string
	switch typ {
	case "Bounce":
		if ev.Bounce == nil || ev.Bounce.FeedbackID == "" {
			return cb, ev, fmt.Errorf("%w: bounce without feedbackId", ErrMalformed)
		}
		cb.Status, cb.EventID, at = webhook.StatusBounced, "bounce:"+ev.Bounce.FeedbackID, ev.Bounce.Timestamp
		if ev.Bounce.BounceType == "Transient" {
			cb.Status = webhook.StatusUndelivered
		}
		cb.ErrorCode = limit(ev.Bounce.BounceType+"/"+ev.Bounce.BounceSubType, 64)
	case "Complaint":
		if ev.Complaint == nil || ev.Complaint.FeedbackID == "" {
			return cb, ev, fmt.Errorf("%w: complaint without feedbackId", ErrMalformed)
		}
		cb.Status, cb.EventID, at = webhook.StatusComplained, "complaint:"+ev.Complaint.FeedbackID, ev.Complaint.Timestamp
	case "Delivery":
		cb.Status, cb.EventID = webhook.StatusDelivered, "delivery:"+ev.Mail.MessageID
		if ev.Delivery != nil {
			at = ev.Delivery.Timestamp
		}
	case "Reject":
		cb.Status, cb.EventID, at = webhook.StatusRejected, "reject:"+ev.Mail.MessageID, ev.Mail.Timestamp
	case "":
		return cb, ev, fmt.Errorf("%w: no eventType", ErrMalformed)
	default:
		return cb, ev, fmt.Errorf("%w: SES event type %q", ErrIgnored, limit(typ, 32))
	}
	if ev.Mail.MessageID == "" || len(ev.Mail.MessageID) > 256 || len(cb.EventID) > 300 {
		return cb, ev, fmt.Errorf("%w: mail.messageId missing or too long", ErrMalformed)
	}
	cb.Key = key(ev.Mail)
	if !sendkey.Valid(cb.Key) {
		return cb, ev, fmt.Errorf("%w: no %s tag or %s header holding a sendonce key", ErrMalformed, TagKey, HeaderKey)
	}
	if at != "" {
		t, err := time.Parse(time.RFC3339Nano, at)
		if err != nil {
			return cb, ev, fmt.Errorf("%w: timestamp is not RFC 3339", ErrMalformed)
		}
		cb.At = t.UTC()
	}
	return cb, ev, nil
}

// key returns the sendonce key of the email: its tag, else its header.
func key(m Mail) string {
	if vs := m.Tags[TagKey]; len(vs) > 0 {
		return vs[0]
	}
	for _, h := range m.Headers {
		if strings.EqualFold(h.Name, HeaderKey) {
			return h.Value
		}
	}
	return ""
}

func limit(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// Applier applies one callback; *webhook.Handler implements it.
type Applier interface {
	Apply(ctx context.Context, cb webhook.Callback) (webhook.Effect, error)
}

// Handler handles the SNS events of the SES event topic.
type Handler struct {
	apply   Applier
	metrics metrics.Recorder
	log     *slog.Logger
}

// New returns a Handler that applies events through apply (a
// *webhook.Handler over the ledger and the dedup store). m nil means
// metrics.Discard, log nil discards. It returns an error if apply is
// nil.
func New(apply Applier, m metrics.Recorder, log *slog.Logger) (*Handler, error) {
	if apply == nil {
		return nil, errors.New("sesevents: an applier (webhook.Handler) is required")
	}
	if m == nil {
		m = metrics.Discard
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Handler{apply: apply, metrics: m, log: log}, nil
}

// Handle applies every record of e. A record that is malformed or of an
// untracked type is logged, counted (InvalidCallbacks) and skipped: no
// retry can fix it. It returns an error, so that Lambda retries the
// invocation, only when the ledger or the dedup store failed; applying an
// event again is harmless (dedup and ranks).
func (h *Handler) Handle(ctx context.Context, e events.SNSEvent) error {
	var errs []error
	for _, r := range e.Records {
		log := h.log.With("sns_message_id", r.SNS.MessageID)
		cb, ev, err := Parse(r.SNS.Message)
		switch {
		case errors.Is(err, ErrIgnored):
			h.invalid("ignored_status")
			log.InfoContext(ctx, "ses event ignored", "error", err)
			continue
		case err != nil:
			h.invalid("malformed")
			log.WarnContext(ctx, "ses event rejected", "reason", "malformed", "error", err)
			continue
		}
		switch cb.Status {
		case webhook.StatusBounced, webhook.StatusUndelivered:
			h.metrics.Count(MetricBounces, 1, metrics.Dim{Name: "bounce_type", Value: ev.Bounce.BounceType})
		case webhook.StatusComplained:
			h.metrics.Count(MetricComplaints, 1)
		}
		log = log.With("key", cb.Key, "status", string(cb.Status), "event", cb.DedupID(), "ses_message_id", cb.ProviderMessageID)
		out, err := h.apply.Apply(ctx, cb)
		if err != nil {
			log.ErrorContext(ctx, "ses event failed", "error", err)
			errs = append(errs, fmt.Errorf("sesevents: apply %s to %s: %w", cb.Status, cb.Key, err))
			continue
		}
		log.InfoContext(ctx, "ses event handled", "outcome", string(out))
	}
	return errors.Join(errs...)
}

func (h *Handler) invalid(reason string) {
	h.metrics.Count(metrics.InvalidCallbacks, 1,
		metrics.Dim{Name: "provider", Value: string(Provider)}, metrics.Dim{Name: "reason", Value: reason})
}
