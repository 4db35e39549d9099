// Package dispatch performs one attempt of a claimed message: it calls the
// provider with the message's key and records the outcome in the ledger
// under the claim. The sender (first attempts and redeliveries) and the
// reconciler (resends and lookups) share it, so an attempt means the same
// thing wherever it starts.
//
// Provider outcomes map to ledger transitions as follows:
//
//	accepted                      → Mark SENT (with the provider's id)
//	permanent rejection           → Mark FAILED (with the reason)
//	transient, configuration      → Release (nothing was sent; retry later)
//	ambiguous, idempotent sends   → Release (a retry with the same key is harmless)
//	ambiguous, otherwise          → Mark UNCERTAIN (the reconciler resolves it)
//
// A Mark that finds the claim fenced out (ErrFencingLost) after the
// provider accepted, or may have accepted, is a possible duplicate: it is
// counted as FencingLost and logged, never written over the newer claim.
package dispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/metrics"
	"github.com/sendonce/sendonce/internal/provider"
	"github.com/sendonce/sendonce/internal/redact"
)

// Outcome is what an attempt ended in.
type Outcome int

// The outcomes.
const (
	// Sent: the provider accepted; the row is SENT.
	Sent Outcome = iota + 1
	// Failed: permanently rejected; the row is FAILED.
	Failed
	// Uncertain: the provider may have it; the row is UNCERTAIN.
	Uncertain
	// Retry: nothing was sent and the claim was released; the message
	// must be retried (the SQS record is reported failed).
	Retry
	// FencingLost: another worker took the claim over before this one
	// recorded its outcome.
	FencingLost
	// LedgerError: the outcome could not be recorded (the claim stays
	// PENDING until its lease passes; a later takeover resolves it).
	LedgerError
	// NotFound: a lookup found no record at the provider (Lookup only).
	NotFound
)

func (o Outcome) String() string {
	switch o {
	case Sent:
		return "sent"
	case Failed:
		return "failed"
	case Uncertain:
		return "uncertain"
	case Retry:
		return "retry"
	case FencingLost:
		return "fencing_lost"
	case LedgerError:
		return "ledger_error"
	case NotFound:
		return "not_found"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Result is an attempt's outcome with its detail.
type Result struct {
	Outcome Outcome
	// ProviderMessageID is set for Sent.
	ProviderMessageID string
	// Reason explains Failed, Uncertain and Retry.
	Reason string
	// Kind is the provider error's kind, when the provider failed.
	Kind provider.Kind
	// Err is the underlying error for Retry, FencingLost and LedgerError.
	Err error
}

// Dispatcher performs attempts. Its fields are set once at start-up.
type Dispatcher struct {
	Ledger  ledger.Ledger
	Metrics metrics.Recorder
	Logger  *slog.Logger
	// ProviderTimeout bounds one provider call.
	ProviderTimeout time.Duration
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// Service names the caller in metrics and logs ("sender", "reconciler").
	Service string
}

func (d *Dispatcher) now() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now()
}

// Message builds the provider message of a claimed entry.
func Message(c ledger.Claim, e ledger.Entry) provider.Message {
	return provider.Message{
		Key:         e.Key,
		Tenant:      e.Tenant,
		Channel:     e.Channel,
		Class:       e.Class,
		To:          e.Address,
		Subject:     e.Subject,
		Body:        e.Body,
		HTML:        e.HTML,
		AttemptedAt: c.AttemptedAt,
	}
}

// Send calls p with the entry's message under claim c and records the
// outcome. It never returns an error: every path ends in a Result.
func (d *Dispatcher) Send(ctx context.Context, c ledger.Claim, e ledger.Entry, p provider.Sender) Result {
	dims := []metrics.Dim{{Name: "channel", Value: e.Channel}, {Name: "provider", Value: p.Name()}}
	log := d.Logger.With("key", e.Key, "channel", e.Channel, "provider", p.Name(), "attempt", c.Attempt)

	callCtx, cancel := context.WithTimeout(ctx, d.ProviderTimeout)
	start := d.now()
	receipt, err := p.Send(callCtx, Message(c, e))
	cancel()
	d.Metrics.Latency(metrics.SendLatency, d.now().Sub(start), dims...)

	if err == nil {
		return d.mark(ctx, log, c, ledger.Outcome{State: ledger.StateSent, ProviderMessageID: receipt.MessageID}, true, dims)
	}
	kind := provider.KindOf(err)
	reason := provider.ReasonOf(err)
	d.Metrics.Count(metrics.ProviderErrors, 1, append(dims, metrics.Dim{Name: "kind", Value: kind.String()})...)
	switch {
	case kind == provider.Permanent:
		log.Info("provider rejected message", "reason", reason, "to", redact.Address(e.Address))
		r := d.mark(ctx, log, c, ledger.Outcome{State: ledger.StateFailed, Reason: reason}, false, dims)
		r.Kind = kind
		return r
	case kind == provider.Transient || kind == provider.Config ||
		(kind == provider.Ambiguous && p.Capabilities().IdempotentSends):
		if kind == provider.Config {
			log.Error("provider configuration error: message will be retried", "reason", reason)
		} else {
			log.Warn("provider call failed: will retry with the same key", "kind", kind.String(), "reason", reason)
		}
		if rerr := d.Ledger.Release(ctx, c, kind.String()+": "+reason); rerr != nil {
			if errors.Is(rerr, ledger.ErrFencingLost) {
				// Nothing was sent: not a possible duplicate, so not counted
				// as FencingLost.
				log.Warn("claim was taken over before release", "error", rerr)
				return Result{Outcome: FencingLost, Kind: kind, Reason: reason, Err: rerr}
			}
			log.Error("release claim", "error", rerr)
		} else {
			d.Metrics.Count(metrics.Released, 1, dims...)
		}
		return Result{Outcome: Retry, Kind: kind, Reason: reason, Err: err}
	default: // ambiguous, and a repeat is not harmless
		log.Warn("provider outcome ambiguous: recorded as uncertain", "reason", reason)
		d.Metrics.Count(metrics.UncertainAttempts, 1, dims...)
		r := d.mark(ctx, log, c, ledger.Outcome{State: ledger.StateUncertain, Reason: reason}, false, dims)
		r.Kind = kind
		return r
	}
}

// Lookup asks p whether it accepted the entry's message and records what
// it learns: LookupAccepted → SENT, LookupRejected → FAILED. NotFound and a
// failed lookup change nothing (the claim stays with the caller, which
// decides whether to resend, Release or Mark).
func (d *Dispatcher) Lookup(ctx context.Context, c ledger.Claim, e ledger.Entry, p provider.Sender, l provider.Looker) Result {
	dims := []metrics.Dim{{Name: "channel", Value: e.Channel}, {Name: "provider", Value: p.Name()}}
	log := d.Logger.With("key", e.Key, "channel", e.Channel, "provider", p.Name(), "attempt", c.Attempt)
	callCtx, cancel := context.WithTimeout(ctx, d.ProviderTimeout)
	res, err := l.Lookup(callCtx, Message(c, e))
	cancel()
	if err != nil {
		return Result{Outcome: Retry, Kind: provider.KindOf(err), Reason: "lookup: " + provider.ReasonOf(err), Err: err}
	}
	switch res.Status {
	case provider.LookupAccepted:
		log.Info("lookup found the message accepted")
		return d.mark(ctx, log, c, ledger.Outcome{State: ledger.StateSent, ProviderMessageID: res.MessageID}, false, dims)
	case provider.LookupRejected:
		log.Info("lookup found the message rejected", "reason", res.Reason)
		return d.mark(ctx, log, c, ledger.Outcome{State: ledger.StateFailed, ProviderMessageID: res.MessageID, Reason: res.Reason}, false, dims)
	default:
		return Result{Outcome: NotFound}
	}
}

// Mark records o under c and reports the matching Result. sent says the
// provider accepted during this attempt, which makes a lost fence a
// possible duplicate.
func (d *Dispatcher) Mark(ctx context.Context, c ledger.Claim, e ledger.Entry, providerName string, o ledger.Outcome) Result {
	dims := []metrics.Dim{{Name: "channel", Value: e.Channel}, {Name: "provider", Value: providerName}}
	log := d.Logger.With("key", e.Key, "channel", e.Channel, "provider", providerName, "attempt", c.Attempt)
	return d.mark(ctx, log, c, o, false, dims)
}

func (d *Dispatcher) mark(ctx context.Context, log *slog.Logger, c ledger.Claim, o ledger.Outcome, sent bool, dims []metrics.Dim) Result {
	res := Result{ProviderMessageID: o.ProviderMessageID, Reason: o.Reason}
	switch o.State {
	case ledger.StateSent:
		res.Outcome = Sent
	case ledger.StateFailed:
		res.Outcome = Failed
	case ledger.StateUncertain:
		res.Outcome = Uncertain
	}
	err := d.Ledger.Mark(ctx, c, o)
	switch {
	case err == nil:
		if o.State == ledger.StateSent && sent {
			d.Metrics.Count(metrics.Sent, 1, dims...)
		} else if o.State == ledger.StateFailed {
			d.Metrics.Count(metrics.Failed, 1, dims...)
		}
		return res
	case errors.Is(err, ledger.ErrFencingLost):
		// FencingLost counts possible duplicates only: this attempt's
		// provider call accepted (or may have accepted) the message while
		// another worker owns the claim.
		if sent || o.State == ledger.StateUncertain {
			d.Metrics.Count(metrics.FencingLost, 1, dims...)
		}
		if sent {
			log.Error("claim was taken over while this worker sent: possible duplicate", "state", string(o.State), "error", err)
		} else {
			log.Warn("claim was taken over before the outcome was recorded", "state", string(o.State), "error", err)
		}
		return Result{Outcome: FencingLost, Reason: o.Reason, Err: err}
	default:
		log.Error("record outcome", "state", string(o.State), "error", err)
		return Result{Outcome: LedgerError, Reason: o.Reason, Err: err}
	}
}
