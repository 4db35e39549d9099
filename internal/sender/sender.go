// Package sender is the SQS-triggered sender: for each notification request
// it derives the key, claims it in the ledger before calling the provider,
// sends through the channel's provider with the key, and records the
// outcome (package dispatch).
//
// # The path of one record
//
// Each step of one SQS record's path is owned by one package
// (docs/architecture.md draws the same path):
//
//	body            HandleSQS takes the events.SQSEvent: each record's Body
//	request         notify.Parse validates the body into a notify.Request
//	key             Request.Key derives the idempotency key (sendkey.Derive)
//	claim           Process builds the row's ledger.Entry; dispatch.Dispatcher.Claim
//	                claims the key with it (ledger.Ledger.Claim)
//	provider        dispatch.Dispatcher.Send calls the channel's provider.Adapter.Send
//	                with the entry's provider.Message
//	mark            Dispatcher.Send records the ledger.Outcome under the claim
//	                (ledger.Ledger.Mark) and returns a dispatch.Result
//	batch response  HandleSQS lists the records whose Result is dispatch.Retry
//	                in an events.SQSEventResponse
//
// Between the key and the claim the request is rendered (package render),
// so the claimed row holds what a later attempt sends. A body that does not
// parse leaves the path at the request: it goes to the dead-letter queue.
// A claim that collides with a live row leaves it at the claim, and the
// row decides what follows (package decide, below).
//
// What a delivery finds in the ledger is decided by package decide, the
// one decision the reconciler makes too; for the sender it comes to:
//
//	no live row                     render, claim, send, mark
//	SENT, FAILED, ABANDONED         acknowledge; count DuplicatesPrevented
//	UNCERTAIN                       acknowledge: the reconciler owns it;
//	                                but through a provider that drops
//	                                repeats (the fast path), look up or
//	                                repeat it through that provider with
//	                                the same key, as the reconciler would
//	PENDING, lease live             report the record failed (SQS retries
//	                                later); count InFlightConflicts
//	PENDING, released               take it over (fenced; count Reclaims) and
//	                                send with the same key: nothing was sent
//	PENDING, lease passed           ask the provider first if it can tell
//	                                (about the dead worker's attempt), then
//	                                take over and record what it knows or
//	                                send; a provider that drops repeats is
//	                                sent to; otherwise mark UNCERTAIN
//
// A request that is not valid JSON or breaks the schema goes to the
// dead-letter queue at once with its reason and is acknowledged; a valid
// request whose stored template cannot render it (a missing parameter)
// is FAILED in the ledger with its reason. A request whose template is
// not stored at all is a configuration error, like a channel with no
// provider: nothing is claimed, it is counted (ConfigErrors) and
// retried. A request for a channel with no configured provider is a
// configuration error, never a final failure: its claim is released, it is
// counted (ConfigErrors, alarmed) and the SQS record is reported failed, so
// it is retried and reaches the dead-letter queue with its reason once its
// receives run out; after the deployment is fixed, a redelivery or a
// redrive sends it once.
//
// Lost ledger answers: when the claim's (or a takeover's) answer is lost,
// the sender releases the claim it may have taken before it reports the
// record failed (see package dispatch), so a message that was never sent is
// never mistaken for one a dead worker may have sent.
//
// Deadline: no first attempt starts with less than the dispatcher's
// Budgets().Send() (the provider timeout and the ledger margin) left
// before the invocation's deadline, and no lookup (which may be followed
// by a send) with less than Budgets().TakeOver(). A context already
// cancelled claims nothing: the message is retried.
package sender

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/sendonce/sendonce/internal/decide"
	"github.com/sendonce/sendonce/internal/dispatch"
	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/metrics"
	"github.com/sendonce/sendonce/internal/pace"
	"github.com/sendonce/sendonce/internal/render"
	"github.com/sendonce/sendonce/internal/tracing"
	"github.com/sendonce/sendonce/notify"
	"github.com/sendonce/sendonce/provider"
)

// DefaultClaimTimeout is the lease of a claim unless SENDONCE_CLAIM_TIMEOUT
// says otherwise. The provider timeout and settle defaults are
// decide.DefaultProviderTimeout and decide.DefaultSettle.
const DefaultClaimTimeout = 60 * time.Second

// Config is what a Sender is built from. New validates it.
type Config struct {
	// Dispatcher performs the attempts, with the ledger, the routes, the
	// timeouts and the clock the sender shares with the reconciler
	// (dispatch.New). Its Renderer renders requests. Required.
	Dispatcher *dispatch.Dispatcher
	// DeadLetters receives invalid requests with their reason. Required.
	DeadLetters DeadLetters
	// Concurrency bounds the records of one batch processed at once
	// (default 10).
	Concurrency int
	// Validity is each class's default validity (SENDONCE_VALIDITY,
	// decide.ParseValidity), counted from when the message was first
	// enqueued; a class it does not name has none. A request's
	// expires_at, when earlier, wins (decide.ValidUntil).
	Validity map[string]time.Duration
}

// Sender processes notification requests. It is safe for concurrent use.
type Sender struct {
	cfg      Config
	dispatch *dispatch.Dispatcher
}

// New validates cfg and returns a Sender. It returns an error naming the
// first missing dependency.
func New(cfg Config) (*Sender, error) {
	switch {
	case cfg.Dispatcher == nil:
		return nil, errors.New("sender: a dispatcher is required")
	case cfg.Dispatcher.Renderer == nil:
		return nil, errors.New("sender: a renderer is required")
	case cfg.DeadLetters == nil:
		return nil, errors.New("sender: a dead-letter queue is required")
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 10
	}
	return &Sender{cfg: cfg, dispatch: cfg.Dispatcher}, nil
}

// WithLogger returns a Sender that logs to log (e.g. annotated with the
// Lambda request id) and shares everything else with s.
func (s *Sender) WithLogger(log *slog.Logger) *Sender {
	c := *s
	d := *s.dispatch
	d.Logger = log
	c.dispatch = &d
	return &c
}

// Process handles one valid request end to end and reports what happened:
// a Result whose Disposition is Sent, Failed, Uncertain, Duplicate,
// OwnedByReconciler, Invalid or Retry. Retry means the SQS record must be
// reported failed so that it is delivered again; every other disposition
// acknowledges it.
func (s *Sender) Process(ctx context.Context, req notify.Request) dispatch.Result {
	return s.ProcessEnqueued(ctx, req, time.Time{})
}

// ProcessEnqueued is Process for a message first enqueued at enqueued
// (zero: now), from which its class's default validity counts
// (Config.Validity). Past its validity (or its request's expires_at) the
// message is never sent: its row ends FAILED with a reason starting
// decide.ReasonExpired, and the Result is Failed (acknowledged).
func (s *Sender) ProcessEnqueued(ctx context.Context, req notify.Request, enqueued time.Time) dispatch.Result {
	key := req.Key()
	if err := ctx.Err(); err != nil {
		// Nothing was claimed and nothing is: every ledger call would
		// fail on ctx, each logging an error for a message that is
		// simply delivered again.
		return dispatch.Result{Key: key, Disposition: dispatch.Retry, Reason: "not started: " + err.Error(), Err: err}
	}
	log := s.dispatch.Logger.With("key", key, "channel", string(req.Channel), "tenant", req.TenantID)
	route := s.dispatch.Route(string(req.Channel))
	// A new message may take any provider of the route: the first that is
	// not cooling down.
	picked := s.dispatch.Pick(ledger.Record{}, route)
	configured := len(picked) > 0
	entry := ledger.Entry{
		Key:         key,
		Tenant:      req.TenantID,
		Channel:     string(req.Channel),
		Class:       string(req.Class),
		Template:    req.Template,
		RecipientID: req.Recipient.ID,
		Address:     req.Address(),
		EventID:     req.EventID,
	}
	if enqueued.IsZero() {
		enqueued = s.dispatch.Now()
	}
	// The reconciler's spans join the message's trace through the row.
	entry.Trace = tracing.Header(ctx)
	entry.ValidUntil = decide.ValidUntil(req.Expiry(), enqueued, s.cfg.Validity[string(req.Class)])
	// Its place in the earliest-deadline-first order of the provider's
	// rate: behind the reconcile workers' hold when its deadline is
	// later than the backlog's they hold the rate for (package pace).
	ctx = pace.WithOrder(ctx, pace.Order{Deadline: entry.ValidUntil, Since: enqueued})
	if configured {
		entry.Provider = picked[0].Name()
	}
	// The message is rendered whether or not its channel is served yet: the
	// row then holds what a later attempt sends once it is.
	var unservable string
	rctx, span := tracing.Start(ctx, tracing.SpanRender, tracing.AttrKey.String(key))
	msg, err := s.dispatch.Renderer.RenderRequest(rctx, req)
	tracing.End(span, err)
	if errors.Is(err, render.ErrUnavailable) {
		log.Error("render", "error", err)
		return dispatch.Result{Key: key, Disposition: dispatch.Retry, Reason: "template store unavailable"}
	} else if errors.Is(err, render.ErrUnknownTemplate) {
		return s.unknownTemplate(ctx, log, key, req, err, route)
	} else if err != nil {
		unservable = err.Error()
	}
	// The row holds the render inputs, never a rendered copy: a
	// pre-rendered request's content, or the stored template's version,
	// locale and data (a resend renders them again: dispatch.Render). The
	// first attempt sends what was rendered here.
	entry.TemplateVersion, entry.TemplateLocale = msg.TemplateVersion, msg.TemplateLocale
	rendered := entry
	rendered.Subject, rendered.Body, rendered.HTML = msg.Subject, msg.Body, msg.HTML
	switch {
	case req.Content != nil || msg.TemplateVersion == 0:
		entry = rendered
	case len(req.Data) > 0:
		var data strings.Builder
		enc := json.NewEncoder(&data)
		enc.SetEscapeHTML(false) // "<" stays 1 byte, not 6: the row is billed by size
		if err := enc.Encode(req.Data); err != nil {
			// Parsed from JSON: it marshals back.
			return dispatch.Result{Key: key, Disposition: dispatch.Invalid, Reason: "data: " + err.Error()}
		}
		entry.Data = strings.TrimSuffix(data.String(), "\n")
	}

	// The one decision (package decide) about a message with no row yet:
	// send it, or record why not.
	var p provider.Adapter
	if configured {
		p = picked[0]
	}
	in := decide.Input{Caller: decide.Sender, Row: ledger.Record{Entry: entry}, Now: s.dispatch.Now(), Configured: configured, Unrenderable: unservable}
	if p != nil {
		in.Caps = p.Capabilities()
	}
	first := decide.Of(in)

	if deadline, ok := ctx.Deadline(); ok && first.Action == decide.Send {
		// Deadlines are wall-clock time, whatever clock the ledger uses.
		if left := time.Until(deadline); left < s.dispatch.Budgets().Send() {
			return dispatch.Result{Key: key, Disposition: dispatch.Retry, Reason: fmt.Sprintf("only %s left before the deadline: not starting a provider call", left.Round(time.Millisecond))}
		}
	}

	start := s.dispatch.Now()
	cctx, span := tracing.Start(ctx, tracing.SpanClaim, tracing.AttrKey.String(key))
	c, err := s.dispatch.Claim(cctx, entry, s.dispatch.ClaimTimeout)
	tracing.End(span, err)
	s.dispatch.Metrics.Latency(metrics.ClaimLatency, s.dispatch.Now().Sub(start), metrics.Dim{Name: "channel", Value: entry.Channel})
	if err != nil {
		cur, conflict := ledger.AsConflict(err)
		if !conflict {
			log.Error("claim", "error", err)
			return dispatch.Result{Key: key, Disposition: dispatch.Retry, Reason: "ledger unavailable"}
		}
		return s.redelivered(ctx, log, cur, route)
	}
	switch first.Action {
	case decide.Expire:
		log.Info("expired before its first attempt: never sent", "valid_until", entry.ValidUntil)
		return forBatch(s.dispatch.Mark(ctx, c, entry, entry.Provider, ledger.Outcome{State: ledger.StateFailed, Reason: first.Reason}))
	case decide.MarkFailed:
		log.Info("request cannot be served", "reason", unservable)
		return forBatch(s.dispatch.Mark(ctx, c, entry, entry.Provider, ledger.Outcome{State: ledger.StateFailed, Reason: unservable}))
	case decide.Wait:
		return s.unconfigured(ctx, log, c, entry)
	}
	log.Debug("claimed", "to", s.dispatch.Address(entry.Address))
	return forBatch(s.dispatch.SendRoute(ctx, c, rendered, nil, picked))
}

// unknownTemplate handles a request whose stored template is missing (or
// stored invalid): a configuration error, never a final failure. Nothing
// is claimed, the error is counted (ConfigErrors, alarmed) and the record
// is retried, so it reaches the dead-letter queue with its reason once
// its receives run out; once the template is put, a redelivery or a
// redrive sends it. A key that already has a row (a redelivery of a
// message sent before its template was deleted) is handled as any
// redelivery is.
func (s *Sender) unknownTemplate(ctx context.Context, log *slog.Logger, key string, req notify.Request, err error, route []provider.Adapter) dispatch.Result {
	cur, gerr := s.dispatch.Ledger.Get(ctx, key)
	switch {
	case gerr == nil:
		return s.redelivered(ctx, log, cur, route)
	case !errors.Is(gerr, ledger.ErrNotFound):
		log.Error("read row", "error", gerr)
		return dispatch.Result{Key: key, Disposition: dispatch.Retry, Reason: "ledger unavailable"}
	}
	reason := "config: " + err.Error()
	s.dispatch.Metrics.Count(metrics.ConfigErrors, 1, metrics.Dim{Name: "channel", Value: string(req.Channel)})
	log.Error("the request's template is not stored: the message will be retried", "template", req.Template, "reason", reason)
	return dispatch.Result{Key: key, Disposition: dispatch.Retry, Reason: reason}
}

// unconfigured gives up the claim of a message whose channel has no
// provider: a configuration error, never a final failure. The claim is
// released (the row keeps the rendered message), the error is counted
// (ConfigErrors) and the SQS record is retried, so it reaches the
// dead-letter queue with its reason once its receives run out; once the
// channel is configured, a redelivery or a redrive sends it.
func (s *Sender) unconfigured(ctx context.Context, log *slog.Logger, c ledger.Claim, entry ledger.Entry) dispatch.Result {
	reason := "config: no provider is configured for channel " + entry.Channel
	s.dispatch.Metrics.Count(metrics.ConfigErrors, 1, metrics.Dim{Name: "channel", Value: entry.Channel})
	log.Error("no provider is configured for the channel: the message will be retried", "reason", reason)
	if err := s.dispatch.Release(ctx, c, reason, s.dispatch.RetryAt(c)); err == nil {
		s.dispatch.Metrics.Count(metrics.Released, 1, metrics.Dim{Name: "channel", Value: entry.Channel})
	}
	return dispatch.Result{Key: entry.Key, Disposition: dispatch.Retry, Reason: reason}
}

// redelivered handles a request whose key already has a live row: one
// decision (package decide, through dispatch.Decide), then its action
// (dispatch.Resolve). The row is resolved against the provider its
// attempt went through (dispatch.Pick over route, the providers that
// serve the channel now) and with the message it pins: the request's own render,
// against the tenant's latest templates, plays no part.
func (s *Sender) redelivered(ctx context.Context, log *slog.Logger, cur ledger.Record, route []provider.Adapter) dispatch.Result {
	key := cur.Key
	dims := metrics.Dim{Name: "channel", Value: cur.Channel}
	picked := s.dispatch.Pick(cur, route)
	in := decide.Input{Caller: decide.Sender, Row: cur, Now: s.dispatch.Now(), Settle: s.dispatch.Settle}
	d, found, rec, err := s.dispatch.Decide(ctx, in, picked)
	if err != nil {
		return dispatch.Result{Key: key, Disposition: dispatch.Retry, Reason: "template store unavailable"}
	}
	switch d.Action {
	case decide.Acknowledge:
		s.dispatch.Metrics.Count(metrics.DuplicatesPrevented, 1, dims)
		log.Info("duplicate delivery acknowledged", "state", string(cur.State))
		return dispatch.Result{Key: key, Disposition: dispatch.Duplicate, Provider: cur.Provider, ProviderMessageID: cur.ProviderMessageID, Row: &cur}
	case decide.HandOff:
		s.dispatch.Metrics.Count(metrics.DuplicatesPrevented, 1, dims)
		log.Info("redelivery of an uncertain message acknowledged: the reconciler owns it")
		return dispatch.Result{Key: key, Disposition: dispatch.OwnedByReconciler, Provider: cur.Provider, ProviderMessageID: cur.ProviderMessageID, Row: &cur}
	case decide.Wait:
		switch d.Cause {
		case decide.CauseInFlight:
			s.dispatch.Metrics.Count(metrics.InFlightConflicts, 1, dims)
			log.Info("message in flight elsewhere: retry later", "lease_until", cur.LeaseUntil)
		case decide.CauseNoProvider:
			s.dispatch.Metrics.Count(metrics.ConfigErrors, 1, dims)
			log.Error("no provider serves the row: the message will be retried", "reason", d.Reason, "provider", cur.Provider)
		default:
			log.Info("redelivery left for later", "reason", d.Reason, "cause", d.Cause.String())
		}
		return dispatch.Result{Key: key, Disposition: dispatch.Retry, Reason: d.Reason}
	}
	if d.Cause == decide.CauseNoProvider {
		// A stale first claim whose provider is gone, marked UNCERTAIN for
		// the reconciler (decide's Wait†): counted like every row that
		// waits for a provider.
		s.dispatch.Metrics.Count(metrics.ConfigErrors, 1, dims)
		log.Error("no provider serves the row: marked uncertain for the reconciler", "reason", d.Reason, "provider", cur.Provider)
	}
	r := s.dispatch.Resolve(ctx, rec, d, picked, found, s.dispatch.ClaimTimeout)
	if r.Attempt > 0 {
		s.dispatch.Metrics.Count(metrics.Reclaims, 1, dims)
	}
	if r.Disposition == dispatch.TakeOverLost {
		s.dispatch.Metrics.Count(metrics.InFlightConflicts, 1, dims)
		return dispatch.Result{Key: key, Disposition: dispatch.Retry, Reason: "another worker took the stale claim over"}
	}
	return forBatch(r)
}

// forBatch reports r, the dispatcher's Result, as the batch handles it: Sent, Failed and Uncertain acknowledge the record; a newer
// claim that fenced this one out owns the message (Duplicate, also
// acknowledged); anything else is retried.
func forBatch(r dispatch.Result) dispatch.Result {
	switch r.Disposition {
	case dispatch.Sent, dispatch.Failed, dispatch.Uncertain:
	case dispatch.FencingLost:
		// Another worker owns the message now; its outcome stands.
		r.Disposition, r.Reason = dispatch.Duplicate, "fenced out by a newer claim"
	default: // Retry, LedgerError, Postponed, Skipped
		r.Disposition = dispatch.Retry
	}
	return r
}
