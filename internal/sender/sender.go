// Package sender is the SQS-triggered sender: for each notification request
// it derives the key, claims it in the ledger before calling the provider,
// sends through the channel's provider with the key, and records the
// outcome (package dispatch).
//
// What a delivery finds in the ledger decides what it does:
//
//	no live row                     claim, render, send, mark
//	SENT, FAILED, ABANDONED         acknowledge; count DuplicatesPrevented
//	UNCERTAIN                       acknowledge: the reconciler owns it
//	PENDING, lease live             report the record failed (SQS retries
//	                                later); count InFlightConflicts
//	PENDING, lease passed           take it over (fenced) and count Reclaims;
//	                                then send if the previous claim was
//	                                released or the provider drops repeats,
//	                                look the message up first if the
//	                                provider can tell, else mark UNCERTAIN
//
// A request that is not valid JSON or breaks the schema goes to the
// dead-letter queue at once with its reason and is acknowledged; a valid
// request that cannot be served (unknown template, unconfigured channel) is
// FAILED in the ledger with its reason.
package sender

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/sendonce/sendonce/internal/dispatch"
	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/metrics"
	"github.com/sendonce/sendonce/internal/notify"
	"github.com/sendonce/sendonce/internal/provider"
	"github.com/sendonce/sendonce/internal/redact"
	"github.com/sendonce/sendonce/internal/render"
)

// ProcessingMargin is the time a healthy worker needs around one provider
// call (ledger writes, rendering). The claim timeout must exceed the
// provider timeout by at least this much, and no provider call starts when
// less than the provider timeout plus this margin remains before the
// Lambda's deadline.
const ProcessingMargin = 5 * time.Second

// Defaults of the configuration (CONTRACTS §3).
const (
	DefaultProviderTimeout = 5 * time.Second
	DefaultClaimTimeout    = 60 * time.Second
	// DefaultSettle matches the reconciler's: how long after an attempt a
	// provider's "no record" answer is trusted.
	DefaultSettle = 2 * time.Minute
)

// Config is what a Sender is built from. New validates it.
type Config struct {
	Ledger ledger.Ledger
	// Providers maps a channel ("sms", "email", "push") to its provider. A
	// request for a channel not in the map fails permanently.
	Providers map[string]provider.Sender
	Renderer  *render.Renderer
	// DeadLetters receives invalid requests with their reason. Required.
	DeadLetters DeadLetters
	Metrics     metrics.Recorder
	Logger      *slog.Logger
	// ProviderTimeout bounds one provider call.
	ProviderTimeout time.Duration
	// ClaimTimeout is the lease of a claim; it must exceed
	// ProviderTimeout + ProcessingMargin.
	ClaimTimeout time.Duration
	// Settle is how long after an attempt a provider's "no record" answer
	// is trusted when a dead worker's claim is taken over.
	Settle time.Duration
	// Concurrency bounds the records of one batch processed at once.
	Concurrency int
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Sender processes notification requests. It is safe for concurrent use.
type Sender struct {
	cfg      Config
	dispatch *dispatch.Dispatcher
}

// New validates cfg and returns a Sender. It returns an error naming the
// first missing dependency or broken invariant.
func New(cfg Config) (*Sender, error) {
	switch {
	case cfg.Ledger == nil:
		return nil, errors.New("sender: a ledger is required")
	case cfg.Renderer == nil:
		return nil, errors.New("sender: a renderer is required")
	case cfg.DeadLetters == nil:
		return nil, errors.New("sender: a dead-letter queue is required")
	case cfg.ProviderTimeout <= 0:
		return nil, errors.New("sender: the provider timeout must be positive")
	case cfg.ClaimTimeout <= cfg.ProviderTimeout+ProcessingMargin:
		return nil, fmt.Errorf("sender: the claim timeout (%s) must exceed the provider timeout (%s) plus %s of processing time, or a healthy worker's claim could be taken over mid-send",
			cfg.ClaimTimeout, cfg.ProviderTimeout, ProcessingMargin)
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 10
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.Discard
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Settle <= 0 {
		cfg.Settle = DefaultSettle
	}
	return &Sender{cfg: cfg, dispatch: &dispatch.Dispatcher{
		Ledger:          cfg.Ledger,
		Metrics:         cfg.Metrics,
		Logger:          cfg.Logger,
		ProviderTimeout: cfg.ProviderTimeout,
		Now:             cfg.Now,
		Service:         "sender",
	}}, nil
}

// WithLogger returns a Sender that logs to log (e.g. annotated with the
// Lambda request id) and shares everything else with s.
func (s *Sender) WithLogger(log *slog.Logger) *Sender {
	c := *s
	c.cfg.Logger = log
	d := *s.dispatch
	d.Logger = log
	c.dispatch = &d
	return &c
}

// Status is what processing one request ended in.
type Status int

// The statuses. Retry means the SQS record must be reported failed so that
// it is delivered again; every other status acknowledges it.
const (
	StatusSent Status = iota + 1
	StatusFailed
	StatusUncertain
	StatusDuplicate
	StatusOwnedByReconciler
	StatusInvalid
	StatusRetry
)

var statusNames = map[Status]string{
	StatusSent: "sent", StatusFailed: "failed", StatusUncertain: "uncertain",
	StatusDuplicate: "duplicate", StatusOwnedByReconciler: "owned_by_reconciler",
	StatusInvalid: "invalid", StatusRetry: "retry",
}

func (s Status) String() string {
	if n, ok := statusNames[s]; ok {
		return n
	}
	return fmt.Sprintf("Status(%d)", int(s))
}

// Result is the outcome of processing one request.
type Result struct {
	Key    string
	Status Status
	// Reason explains Failed, Uncertain, Invalid and Retry.
	Reason string
}

// Process handles one valid request end to end and reports what happened.
func (s *Sender) Process(ctx context.Context, req notify.Request) Result {
	key := req.Key()
	log := s.cfg.Logger.With("key", key, "channel", string(req.Channel), "tenant", req.TenantID)
	p, ok := s.cfg.Providers[string(req.Channel)]
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
	var unservable string
	if !ok {
		unservable = fmt.Sprintf("no provider is configured for channel %s", req.Channel)
	} else {
		entry.Provider = p.Name()
		msg, err := s.cfg.Renderer.Render(req.Template, string(req.Channel), req.Locale, req.Data)
		if err != nil {
			unservable = err.Error()
		}
		entry.Subject, entry.Body = msg.Subject, msg.Body
	}

	if deadline, ok := ctx.Deadline(); ok && unservable == "" {
		// Deadlines are wall-clock time, whatever clock the ledger uses.
		if left := time.Until(deadline); left < s.cfg.ProviderTimeout+ProcessingMargin {
			return Result{Key: key, Status: StatusRetry, Reason: fmt.Sprintf("only %s left before the deadline: not starting a provider call", left.Round(time.Millisecond))}
		}
	}

	start := s.cfg.Now()
	c, err := s.cfg.Ledger.Claim(ctx, entry, s.cfg.ClaimTimeout)
	s.cfg.Metrics.Latency(metrics.ClaimLatency, s.cfg.Now().Sub(start), metrics.Dim{Name: "channel", Value: entry.Channel})
	if err != nil {
		cur, conflict := ledger.AsConflict(err)
		if !conflict {
			log.Error("claim", "error", err)
			return Result{Key: key, Status: StatusRetry, Reason: "ledger unavailable"}
		}
		return s.redelivered(ctx, log, entry, cur, p)
	}
	if unservable != "" {
		log.Info("request cannot be served", "reason", unservable)
		return s.result(key, s.dispatch.Mark(ctx, c, entry, entry.Provider, ledger.Outcome{State: ledger.StateFailed, Reason: unservable}))
	}
	log.Debug("claimed", "to", redact.Address(entry.Address))
	return s.result(key, s.dispatch.Send(ctx, c, entry, p))
}

// redelivered handles a request whose key already has a live row.
func (s *Sender) redelivered(ctx context.Context, log *slog.Logger, entry ledger.Entry, cur ledger.Record, p provider.Sender) Result {
	key := entry.Key
	dims := metrics.Dim{Name: "channel", Value: entry.Channel}
	now := s.cfg.Now()
	switch {
	case cur.State.Final():
		s.cfg.Metrics.Count(metrics.DuplicatesPrevented, 1, dims)
		log.Info("duplicate delivery acknowledged", "state", string(cur.State))
		return Result{Key: key, Status: StatusDuplicate}
	case cur.State == ledger.StateUncertain:
		s.cfg.Metrics.Count(metrics.DuplicatesPrevented, 1, dims)
		log.Info("redelivery of an uncertain message acknowledged: the reconciler owns it")
		return Result{Key: key, Status: StatusOwnedByReconciler}
	case !cur.Stale(now):
		s.cfg.Metrics.Count(metrics.InFlightConflicts, 1, dims)
		log.Info("message in flight elsewhere: retry later", "lease_until", cur.LeaseUntil)
		return Result{Key: key, Status: StatusRetry, Reason: "in flight in another worker"}
	}
	if p == nil {
		// A stale claim for a channel this deployment no longer serves:
		// leave it to the reconciler's policy rather than guess.
		return Result{Key: key, Status: StatusRetry, Reason: "no provider for the channel of a stale claim"}
	}
	c, err := s.cfg.Ledger.TakeOver(ctx, cur, s.cfg.ClaimTimeout)
	if err != nil {
		if _, conflict := ledger.AsConflict(err); conflict || errors.Is(err, ledger.ErrNotFound) {
			s.cfg.Metrics.Count(metrics.InFlightConflicts, 1, dims)
			return Result{Key: key, Status: StatusRetry, Reason: "another worker took the stale claim over"}
		}
		log.Error("take over stale claim", "error", err)
		return Result{Key: key, Status: StatusRetry, Reason: "ledger unavailable"}
	}
	s.cfg.Metrics.Count(metrics.Reclaims, 1, dims)
	log = log.With("attempt", c.Attempt)
	// The stored entry is what the earlier attempt would have sent; keep
	// sending exactly that.
	stored := cur.Entry
	switch {
	case cur.Released || p.Capabilities().IdempotentSends:
		log.Info("took over a stale claim: sending with the same key", "released", cur.Released)
		return s.result(key, s.dispatch.Send(ctx, c, stored, p))
	}
	if l, ok := p.(provider.Looker); ok && p.Capabilities().LookupByReference {
		if now.Sub(cur.AttemptedAt) >= s.cfg.Settle {
			r := s.dispatch.Lookup(ctx, c, stored, p, l)
			if r.Outcome == dispatch.NotFound {
				log.Info("took over a stale claim: the provider has no record, sending")
				return s.result(key, s.dispatch.Send(ctx, c, stored, p))
			}
			if r.Outcome != dispatch.Retry {
				return s.result(key, r)
			}
		}
	}
	// The dead worker may have sent and the provider cannot tell (or not
	// yet): record the ambiguity and let the reconciler's policy decide.
	s.cfg.Metrics.Count(metrics.UncertainAttempts, 1, dims, metrics.Dim{Name: "provider", Value: p.Name()})
	return s.result(key, s.dispatch.Mark(ctx, c, stored, p.Name(), ledger.Outcome{
		State:  ledger.StateUncertain,
		Reason: "a worker died holding the claim; whether it sent is unknown",
	}))
}

func (s *Sender) result(key string, r dispatch.Result) Result {
	switch r.Outcome {
	case dispatch.Sent:
		return Result{Key: key, Status: StatusSent}
	case dispatch.Failed:
		return Result{Key: key, Status: StatusFailed, Reason: r.Reason}
	case dispatch.Uncertain:
		return Result{Key: key, Status: StatusUncertain, Reason: r.Reason}
	case dispatch.FencingLost:
		// Another worker owns the message now; its outcome stands.
		return Result{Key: key, Status: StatusDuplicate, Reason: "fenced out by a newer claim"}
	default: // Retry, LedgerError
		return Result{Key: key, Status: StatusRetry, Reason: r.Reason}
	}
}
