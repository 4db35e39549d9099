// Package api is the HTTP API (behind an API Gateway HTTP API, payload
// format 2.0) through which clients submit notifications with an
// Idempotency-Key and read their state.
//
// # Routes
//
//	POST /v1/notifications        submit; 202 {"id": <ledger key>, "status": "accepted"}
//	GET  /v1/notifications/{id}   the ledger row's state, for the caller's tenant
//
// Every request carries "Authorization: Bearer <API key>" (package apikey);
// the key names the tenant. Errors are application/problem+json (RFC 9457)
// and never carry internal error text.
//
// # Submitting
//
// The body is a request (docs/request.md) without tenant_id, which is rejected
// (400) when present because the tenant comes from the API key. event_id
// is optional: when given it is used as is, so one business event
// submitted both through the queue and through the API is one message;
// when absent it is derived from the Idempotency-Key (event_id =
// EventID(key)). The same Idempotency-Key with another event_id is a
// mismatch (422) like any other changed field. Two tenants using the same
// Idempotency-Key get independent notifications, and a request enqueued
// twice is deduplicated by the send ledger, whose key derives from tenant,
// event, recipient, channel and template.
//
// The Idempotency-Key (1 to 255 printable ASCII characters) is scoped by
// tenant. The first request with a key creates an idempotency record
// (package idempotency) in flight, in the one table with one conditional
// PutItem (pk "idem#<tenant>#<sha256(key)>"), holding the request's
// fingerprint (SHA-256 of its canonical JSON) and a lease; it then checks
// the rate limits, enqueues the request to SQS and stores its response
// (completed).
// A later request with the same key gets:
//
//   - the same request, completed: the stored status and body again, with
//     "Idempotent-Replayed: true" (no rate limit consumed, nothing enqueued);
//   - a different request: 422 naming the fields that differ;
//   - the same request while the first is in flight: 409 with Retry-After;
//   - the same request after the first died in flight (its lease passed):
//     it takes the record over, fenced on the dead holder's token, and
//     enqueues (the ledger deduplicates if the first had enqueued).
//
// Validation failures store nothing. A request refused for its rate limit,
// or whose enqueue failed, deletes its in-flight record so a retry with the
// same key starts afresh. Records expire after the retention (default 24h,
// SENDONCE_API_RETENTION): by TTL, and by the create condition, which
// treats a record past its TTL as absent.
//
// # Rate limits
//
// Fixed windows per tenant (SENDONCE_API_TENANT_RATE, default 100/1m) and
// per tenant and recipient id (SENDONCE_API_RECIPIENT_RATE, default 5/1m),
// counted in the same table (package ratelimit; pk "rate#...", TTL). Over a
// limit: 429 with Retry-After (the end of the window). The tenant window
// is counted before the recipient window, so a request refused for its
// recipient still counts against the tenant.
//
// # Stores
//
// The handler's stores are injected (Config): the idempotency records
// (idempotency.Records) and the rate windows (ratelimit.Windows), beside
// the API keys (Authenticator, an apikey.Store over apikey.Records) and
// the ledger. Each store has the ledger's shape: an interface in its
// domain package, its DynamoDB implementation in package dynamoX, an
// in-memory one for unit tests in package memX, and one conformance suite
// both pass in package Xtest.
//
// # Reading
//
// GET returns the ledger row of id (ledger.Ledger.Get): state, attempts,
// delivery status and timestamps, never an address or the message. A row of
// another tenant is answered exactly like a missing one (404, same body).
// The row exists once the sender has claimed the message: right after a 202
// the GET may still answer 404 for a moment.
package api

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sendonce/sendonce/internal/api/idempotency"
	"github.com/sendonce/sendonce/internal/api/ratelimit"
	"github.com/sendonce/sendonce/internal/apikey"
	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/metrics"
	"github.com/sendonce/sendonce/internal/redact"
	"github.com/sendonce/sendonce/internal/sendkey"
	"github.com/sendonce/sendonce/internal/tracing"
	"github.com/sendonce/sendonce/notify"
)

// Paths served.
const (
	CollectionPath = "/v1/notifications"
	itemPrefix     = CollectionPath + "/"
)

// Defaults of Config: those of the idempotency records.
const (
	DefaultRetention = idempotency.DefaultRetention
	DefaultLease     = idempotency.DefaultLease
)

// Default rate limits.
var (
	DefaultTenantRate    = ratelimit.Rate{Limit: 100, Window: time.Minute}
	DefaultRecipientRate = ratelimit.Rate{Limit: 5, Window: time.Minute}
)

// Authenticator maps an API key to its tenant (package apikey's Store).
type Authenticator interface {
	// Authenticate returns the key's tenant, an error matching
	// apikey.ErrUnauthorized for a bad key, or another error when the
	// lookup failed.
	Authenticate(ctx context.Context, key string) (tenant string, err error)
}

// LedgerReader is the part of ledger.Ledger the API reads.
type LedgerReader interface {
	Get(ctx context.Context, key string) (ledger.Record, error)
}

// Queue is the part of the SQS client the API uses.
type Queue interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

// Config is what a Handler needs. Zero durations and rates take the
// defaults; Metrics defaults to metrics.Discard, Logger to discard, Now to
// time.Now.
type Config struct {
	Keys     Authenticator
	Ledger   LedgerReader
	Queue    Queue
	QueueURL string
	// Idempotency keeps the idempotency records
	// (dynamoidempotency.Records; memidempotency.Records in unit tests).
	Idempotency idempotency.Records
	// RateWindows counts the rate limits (dynamoratelimit.Windows;
	// memratelimit.Windows in unit tests).
	RateWindows ratelimit.Windows

	Retention     time.Duration
	Lease         time.Duration
	TenantRate    ratelimit.Rate
	RecipientRate ratelimit.Rate

	// Metrics records the API's metrics; nil means metrics.Discard.
	Metrics metrics.Recorder
	// Logger receives one line per request; nil discards.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Handler serves the API. It is safe for concurrent use.
type Handler struct {
	cfg     Config
	idem    *idempotency.Store
	limiter *ratelimit.Limiter
	log     *slog.Logger
}

// ErrConfig is matched by every error New returns.
var ErrConfig = errors.New("api: invalid configuration")

// New validates cfg, fills in defaults and returns a Handler. It returns
// an error matching ErrConfig that names the missing or wrong setting.
func New(cfg Config) (*Handler, error) {
	switch {
	case cfg.Keys == nil:
		return nil, fmt.Errorf("%w: Keys is required", ErrConfig)
	case cfg.Ledger == nil:
		return nil, fmt.Errorf("%w: Ledger is required", ErrConfig)
	case cfg.Queue == nil || cfg.QueueURL == "":
		return nil, fmt.Errorf("%w: Queue and QueueURL are required", ErrConfig)
	case cfg.Idempotency == nil || cfg.RateWindows == nil:
		return nil, fmt.Errorf("%w: Idempotency and RateWindows are required", ErrConfig)
	}
	if cfg.Retention == 0 {
		cfg.Retention = DefaultRetention
	}
	if cfg.Lease == 0 {
		cfg.Lease = DefaultLease
	}
	if cfg.TenantRate == (ratelimit.Rate{}) {
		cfg.TenantRate = DefaultTenantRate
	}
	if cfg.RecipientRate == (ratelimit.Rate{}) {
		cfg.RecipientRate = DefaultRecipientRate
	}
	if cfg.Lease < time.Second || cfg.Retention <= cfg.Lease {
		return nil, fmt.Errorf("%w: lease (%s) must be at least 1s and retention (%s) longer than it", ErrConfig, cfg.Lease, cfg.Retention)
	}
	for _, r := range []ratelimit.Rate{cfg.TenantRate, cfg.RecipientRate} {
		if r.Limit < 1 || r.Window < time.Second || r.Window%time.Second != 0 {
			return nil, fmt.Errorf("%w: rate %s: want a positive limit per whole seconds", ErrConfig, r)
		}
	}
	cfg.Metrics = cmp.Or(cfg.Metrics, metrics.Discard)
	cfg.Logger = cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Handler{
		cfg:     cfg,
		idem:    idempotency.New(cfg.Idempotency, idempotency.Config{Lease: cfg.Lease, Retention: cfg.Retention, Now: cfg.Now}),
		limiter: ratelimit.New(cfg.RateWindows, ratelimit.Config{Now: cfg.Now}),
		log:     cfg.Logger,
	}, nil
}

// Handle serves one API Gateway HTTP API (payload 2.0) request. It never
// returns an error: every failure is an HTTP response (a 5xx for a failed
// dependency, logged with its detail).
func (h *Handler) Handle(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	method := req.RequestContext.HTTP.Method
	path := stripStage(req.RawPath, req.RequestContext.Stage)
	log := h.log.With("correlation_id", req.RequestContext.RequestID, "method", method)
	var (
		resp  events.APIGatewayV2HTTPResponse
		route string
	)
	switch {
	case path == CollectionPath:
		route = "submit"
		if method != http.MethodPost {
			resp = methodNotAllowed(http.MethodPost)
			break
		}
		resp = h.submit(ctx, log, req)
	case strings.HasPrefix(path, itemPrefix) && !strings.Contains(path[len(itemPrefix):], "/") && len(path) > len(itemPrefix):
		route = "get"
		if method != http.MethodGet {
			resp = methodNotAllowed(http.MethodGet)
			break
		}
		resp = h.get(ctx, log, req, path[len(itemPrefix):])
	default:
		route = "unknown"
		p := problemNoRoute
		resp = p.response()
	}
	h.cfg.Metrics.Count(metrics.APIRequests, 1, metrics.Dim{Name: "route", Value: route}, metrics.Dim{Name: "status", Value: fmt.Sprintf("%dxx", resp.StatusCode/100)})
	log.Info("request served", "route", route, "status", resp.StatusCode)
	return resp, nil
}

// stripStage removes a named stage's prefix from rawPath (API Gateway keeps
// it there for stages other than $default).
func stripStage(rawPath, stage string) string {
	if stage != "" && stage != "$default" && strings.HasPrefix(rawPath, "/"+stage+"/") {
		return rawPath[len(stage)+1:]
	}
	return rawPath
}

func methodNotAllowed(allow string) events.APIGatewayV2HTTPResponse {
	p := problem{Status: http.StatusMethodNotAllowed, Type: typeMethodNotAllowed, Title: "Method Not Allowed",
		Detail: "this resource allows " + allow + " only", header: map[string]string{"Allow": allow}}
	return p.response()
}

// authenticate returns the caller's tenant, or the response to send.
func (h *Handler) authenticate(ctx context.Context, log *slog.Logger, headers map[string]string) (string, *events.APIGatewayV2HTTPResponse) {
	tok := bearerToken(headers)
	if tok == "" {
		p := problem{Status: http.StatusUnauthorized, Type: typeUnauthorized, Title: "Unauthorized",
			Detail: "send an API key as Authorization: Bearer <key>", header: map[string]string{"WWW-Authenticate": `Bearer realm="sendonce"`}}
		r := p.response()
		return "", &r
	}
	tenant, err := h.cfg.Keys.Authenticate(ctx, tok)
	if errors.Is(err, apikey.ErrUnauthorized) {
		log.Info("API key rejected", "key_id", apikey.ID(tok))
		p := problem{Status: http.StatusUnauthorized, Type: typeUnauthorized, Title: "Unauthorized",
			Detail: "the API key is not valid", header: map[string]string{"WWW-Authenticate": `Bearer realm="sendonce", error="invalid_token"`}}
		r := p.response()
		return "", &r
	}
	if err != nil {
		log.Error("authentication failed", "error", err)
		r := problemUnavailable.response()
		return "", &r
	}
	return tenant, nil
}

func (h *Handler) unavailable(log *slog.Logger, msg string, err error) events.APIGatewayV2HTTPResponse {
	log.Error(msg, "error", err)
	return problemUnavailable.response()
}

// accepted is the body of a 202.
type accepted struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

func (h *Handler) submit(ctx context.Context, log *slog.Logger, req events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
	tenant, denied := h.authenticate(ctx, log, req.Headers)
	if denied != nil {
		return *denied
	}
	log = log.With("tenant", tenant)
	sub, p := parseSubmission(tenant, req.Headers, req.Body, req.IsBase64Encoded)
	if p != nil {
		h.cfg.Metrics.Count(metrics.InvalidRequests, 1)
		log.Info("request invalid", "status", p.Status, "detail", p.Detail)
		return p.response()
	}
	r := sub.req
	key := r.Key()
	log = log.With("key", key, "recipient", redact.Address(r.Address()))

	begun, err := h.idem.Begin(ctx, tenant, sub.key, fingerprint(r, sub.key), key)
	if err != nil {
		return h.unavailable(log, "idempotency store failed", err)
	}
	switch begun.Verdict {
	case idempotency.Replay:
		h.cfg.Metrics.Count(metrics.APIReplays, 1)
		resp := jsonResponse(begun.Status, begun.Body)
		resp.Headers["Idempotent-Replayed"] = "true"
		if begun.LedgerKey != "" && begun.Status == http.StatusAccepted {
			resp.Headers["Location"] = itemPrefix + begun.LedgerKey
		}
		return resp
	case idempotency.Mismatch:
		h.cfg.Metrics.Count(metrics.InvalidRequests, 1)
		log.Info("idempotency key reused with another request", "fields", begun.Differ)
		p := problem{Status: http.StatusUnprocessableEntity, Type: typeKeyMismatch, Title: "Idempotency-Key reused",
			Detail: "this Idempotency-Key was first used with a different request; these fields differ: " + strings.Join(begun.Differ, ", "),
			Fields: begun.Differ}
		return p.response()
	case idempotency.InFlight:
		p := problem{Status: http.StatusConflict, Type: typeKeyInFlight, Title: "Request in progress",
			Detail: "a request with this Idempotency-Key is still being processed; retry later", retryAfter: begun.RetryAfter}
		return p.response()
	}
	if begun.TookOver {
		log.Warn("took over a dead in-flight request")
	}

	// From here the record is ours: complete it or abandon it.
	abandon := func() {
		if err := h.idem.Abandon(context.WithoutCancel(ctx), tenant, sub.key, begun.Token); err != nil {
			log.Error("abandoning the idempotency record failed", "error", err)
		}
	}
	for _, l := range []struct {
		scope, subject string
		rate           ratelimit.Rate
	}{
		{"tenant", tenant, h.cfg.TenantRate},
		{"recipient", tenant + "\x00" + r.Recipient.ID, h.cfg.RecipientRate},
	} {
		ok, wait, err := h.limiter.Allow(ctx, l.scope, l.subject, l.rate)
		if err != nil {
			abandon()
			return h.unavailable(log, "rate limiter failed", err)
		}
		if !ok {
			abandon()
			h.cfg.Metrics.Count(metrics.RateLimited, 1, metrics.Dim{Name: "scope", Value: l.scope})
			log.Info("request rate limited", "scope", l.scope)
			p := problem{Status: http.StatusTooManyRequests, Type: typeRateLimited, Title: "Too Many Requests",
				Detail: fmt.Sprintf("the %s rate limit of %d requests per %s is reached; retry after the window", l.scope, l.rate.Limit, l.rate.Window), retryAfter: wait}
			return p.response()
		}
	}

	msg, _ := json.Marshal(r)
	if len(msg) > notify.MaxBodySize {
		abandon()
		p := problem{Status: http.StatusRequestEntityTooLarge, Type: typeTooLarge, Title: "Request body too large",
			Detail: fmt.Sprintf("the request as enqueued would be more than %d bytes", notify.MaxBodySize)}
		return p.response()
	}
	in := &sqs.SendMessageInput{QueueUrl: aws.String(h.cfg.QueueURL), MessageBody: aws.String(string(msg))}
	if strings.HasSuffix(h.cfg.QueueURL, ".fifo") {
		in.MessageGroupId = aws.String(r.MessageGroup())
		in.MessageDeduplicationId = aws.String(key)
	}
	// The message carries its trace (package tracing): the sender's spans
	// join it.
	qctx, span := tracing.StartProducer(ctx, tracing.SpanEnqueue, tracing.AttrKey.String(key), tracing.AttrChannel.String(string(r.Channel)))
	tracing.SetHeader(qctx, in)
	_, err = h.cfg.Queue.SendMessage(qctx, in)
	tracing.End(span, err)
	if err != nil {
		abandon()
		return h.unavailable(log, "enqueue failed", err)
	}

	body, _ := json.Marshal(accepted{ID: key, Status: "accepted"})
	if err := h.idem.Complete(context.WithoutCancel(ctx), tenant, sub.key, begun.Token, http.StatusAccepted, string(body)); err != nil {
		// The request is enqueued; a retry re-enqueues at worst, and the
		// ledger deduplicates that.
		log.Warn("storing the idempotent response failed", "error", err)
	}
	log.Info("request accepted", "channel", r.Channel, "template", r.Template)
	resp := jsonResponse(http.StatusAccepted, string(body))
	resp.Headers["Location"] = itemPrefix + key
	return resp
}

func jsonResponse(status int, body string) events.APIGatewayV2HTTPResponse {
	return events.APIGatewayV2HTTPResponse{
		StatusCode: status,
		Headers:    map[string]string{"Content-Type": "application/json", "Cache-Control": "no-store"},
		Body:       body,
	}
}

// Notification is the body of GET /v1/notifications/{id}: the state of a
// notification, never its address or message.
type Notification struct {
	ID                string     `json:"id"`
	State             string     `json:"state"`
	Channel           string     `json:"channel"`
	Template          string     `json:"template"`
	Class             string     `json:"class,omitempty"`
	RecipientID       string     `json:"recipient_id"`
	Attempts          int        `json:"attempts"`
	ProviderMessageID string     `json:"provider_message_id,omitempty"`
	Delivery          *Delivery  `json:"delivery,omitempty"`
	CreatedAt         time.Time  `json:"created_at"`
	UpdatedAt         time.Time  `json:"updated_at"`
	AttemptedAt       *time.Time `json:"attempted_at,omitempty"`
}

// Delivery is the latest delivery status a provider reported.
type Delivery struct {
	Status string    `json:"status"`
	At     time.Time `json:"at"`
}

func (h *Handler) get(ctx context.Context, log *slog.Logger, req events.APIGatewayV2HTTPRequest, id string) events.APIGatewayV2HTTPResponse {
	tenant, denied := h.authenticate(ctx, log, req.Headers)
	if denied != nil {
		return *denied
	}
	if !sendkey.Valid(id) {
		return problemNotFound.response()
	}
	rec, err := h.cfg.Ledger.Get(ctx, id)
	if errors.Is(err, ledger.ErrNotFound) {
		return problemNotFound.response()
	}
	if err != nil {
		return h.unavailable(log.With("key", id), "ledger read failed", err)
	}
	if rec.Tenant != tenant {
		log.Info("read of another tenant's notification", "tenant", tenant, "key", id)
		return problemNotFound.response()
	}
	st := Notification{
		ID: rec.Key, State: string(rec.State), Channel: rec.Channel, Template: rec.Template, Class: rec.Class,
		RecipientID: rec.RecipientID, Attempts: rec.Attempts, ProviderMessageID: rec.ProviderMessageID,
		CreatedAt: rec.CreatedAt.UTC(), UpdatedAt: rec.UpdatedAt.UTC(),
	}
	if !rec.AttemptedAt.IsZero() {
		at := rec.AttemptedAt.UTC()
		st.AttemptedAt = &at
	}
	if rec.DeliveryStatus != "" {
		st.Delivery = &Delivery{Status: rec.DeliveryStatus, At: rec.DeliveryAt.UTC()}
	}
	b, _ := json.Marshal(st)
	return jsonResponse(http.StatusOK, string(b))
}
