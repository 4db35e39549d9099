// Package dispatch performs one attempt of a claimed message: it calls the
// provider with the message's key and records the outcome in the ledger
// under the claim. The sender (first attempts and redeliveries) and the
// reconciler (resends and lookups) share it, so an attempt means the same
// thing wherever it starts.
//
// In the path of one SQS record (docs/architecture.md) an attempt spans
// three steps: Claim takes the key (sendkey.Derive, the step before) with
// ledger.Ledger.Claim, Send calls the channel's provider.Adapter.Send with
// the entry's Message, and records the ledger.Outcome under the claim with
// ledger.Ledger.Mark. sender.Sender.HandleSQS turns the Result into the
// record's place in the batch response (the step after): a Retry is listed
// for SQS to deliver again, any other disposition is acknowledged.
//
// The entry's Message is more than a rename of the row: it keeps only
// what the provider needs (the row's bookkeeping, recipient id and render
// inputs stay behind, so package provider never imports ledger), carries
// the text of this attempt (a stored template's row is rendered again
// first, Render), and adds the time the attempt started, where a lookup
// begins its search.
//
// Provider outcomes map to ledger transitions as follows:
//
//	accepted                      → Mark SENT (with the provider's id)
//	permanent rejection           → Mark FAILED (with the reason)
//	transient, configuration      → Release (nothing was sent; retry later)
//	ambiguous                     → Mark UNCERTAIN (the reconciler resolves it)
//
// A release always means that the attempt sent nothing, so the next
// attempt may go through another provider (AttemptAdapter). An ambiguous
// attempt is never released, not even through a provider that drops
// repeats: the message may be at that provider, and only a retry through
// it (with the same key) is harmless. Through such a provider the
// sender's next receive makes that retry (Result.Repeat, the fast path:
// the row is UNCERTAIN and pinned to the provider, and decide does not
// hand it off); otherwise the reconciler does (decide: the provider drops
// repeats, after a lookup where it can).
//
// A Mark that finds the claim fenced out (ErrFencingLost) after the
// provider accepted, or may have accepted, is a possible duplicate: it is
// counted as FencingLost and logged, never written over the newer claim.
//
// # Lost ledger answers
//
// Claim and TakeOver release the claim they tried to take when the
// ledger's answer was lost (the write may have applied): otherwise an
// applied claim that nobody releases looks, once its lease passes, like a
// worker that died mid-send, and a message that was never sent becomes
// UNCERTAIN. A lost TakeOver of a row whose previous attempt may have sent
// (not released) is not released, because that would claim nothing was
// sent: a takeover of an UNCERTAIN row marks it UNCERTAIN again under the
// claim it tried to take (fenced, tried once), so the row is due for the reconciler
// at once with its lookup window intact, instead of sitting PENDING until
// the new lease passes; a stale PENDING row is stale again once the new
// lease passes.
// Every Release, and every FAILED mark (nothing was delivered
// either), is retried (ReleaseAttempts tries within ReleaseTimeout) under
// a context that survives the invocation's cancellation
// (context.WithoutCancel), so a cancelled invocation still gives its claim
// back.
//
// A claim-taking write ends LostAnswerReserve before the invocation's
// deadline, so the SDK's retries of a lost answer leave the worker the
// time to release.
//
// A release makes the row due for the reconciler after decide.RetryDelay
// of the attempt (its backoff, or the base alone when the provider as a
// whole refused: known down, or paced); a sender's redelivery may take it
// over at once.
//
// A row due for a send is not taken over when the send could not go:
// every provider that may take it is known down (Health.Down), or its
// send rate is spent (Decide takes the send's token first, Pacer). The
// row is then left as it is, nothing written, still due in the attention
// index; a new message is claimed and sent whatever the provider's health.
package dispatch

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/sendonce/sendonce/internal/decide"
	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/metrics"
	"github.com/sendonce/sendonce/internal/pace"
	"github.com/sendonce/sendonce/internal/redact"
	"github.com/sendonce/sendonce/internal/render"
	"github.com/sendonce/sendonce/internal/tracing"
	"github.com/sendonce/sendonce/notify"
	"github.com/sendonce/sendonce/provider"
	"go.opentelemetry.io/otel/codes"
)

// Disposition is what handling one message ended in: an attempt here, a
// delivery in the sender, a row in the reconciler. The state an attempt
// leaves in the row is a ledger.Outcome (docs/architecture.md, the names).
type Disposition int

// The dispositions. Every one but Retry, LedgerError, TakeOverLost, Postponed
// and Skipped leaves nothing more for the caller to do with the message.
const (
	// Sent: the provider accepted; the row is SENT.
	Sent Disposition = iota + 1
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
	// PENDING until its lease passes; a later takeover resolves it), or the
	// takeover's answer was lost.
	LedgerError
	// TakeOverLost: another worker took the row over first, or it is gone
	// (Resolve only).
	TakeOverLost
	// Abandoned: the row is ABANDONED (Resolve only).
	Abandoned
	// Postponed: the row was taken over and released again, due after the
	// backoff (Resolve only).
	Postponed
	// Skipped: the decision needs no ledger write (Resolve only).
	Skipped
	// Duplicate: the message's row was already final, or a newer claim
	// owns it; nothing was done (sender only).
	Duplicate
	// OwnedByReconciler: the row is UNCERTAIN; the reconciler resolves it
	// (sender only).
	OwnedByReconciler
	// Invalid: the request cannot be stored (sender only).
	Invalid
)

var dispositionNames = [...]string{
	Sent: "sent", Failed: "failed", Uncertain: "uncertain", Retry: "retry",
	FencingLost: "fencing_lost", LedgerError: "ledger_error", TakeOverLost: "take_over_lost",
	Abandoned: "abandoned", Postponed: "postponed", Skipped: "skipped",
	Duplicate: "duplicate", OwnedByReconciler: "owned_by_reconciler", Invalid: "invalid",
}

// String returns the disposition's name as logs and reports print it
// ("sent", "owned_by_reconciler", ...).
func (d Disposition) String() string {
	if d > 0 && int(d) < len(dispositionNames) {
		return dispositionNames[d]
	}
	return fmt.Sprintf("Disposition(%d)", int(d))
}

// Result is a disposition with its detail.
type Result struct {
	// Key is the message's idempotency key.
	Key         string
	Disposition Disposition
	// ProviderMessageID is set for Sent.
	ProviderMessageID string
	// Reason explains Failed, Uncertain, Invalid and Retry.
	Reason string
	// Kind is the provider error's kind, when the provider failed.
	Kind provider.Kind
	// Err is the underlying error for Retry, FencingLost and LedgerError.
	Err error
	// Attempt is the attempt number of the claim Resolve took over (0 when
	// it took none).
	Attempt int
	// Released is true when a Retry's claim was released: the attempt
	// provably sent nothing (SendRoute may fail over).
	Released bool
	// Provider is the name of the provider of the attempt, or of the row's
	// latest attempt when no provider was called.
	Provider string
	// Row, for a sender's Duplicate or OwnedByReconciler, is the row the
	// delivery found: what the earlier delivery recorded.
	Row *ledger.Record
	// Repeat is true when an Uncertain attempt went through a provider
	// that drops repeats (the fast path): the row is UNCERTAIN, pinned to
	// that provider, and the sender reports its SQS record failed so that
	// the next receive repeats the message through that provider with
	// the same key (decide: such a row is not handed off), while the
	// reconciler still owns the row if no receive comes.
	Repeat bool
}

// Dispatcher performs attempts: what the sender and the reconciler share,
// built once at start-up by New and handed to both (sender.Config,
// reconcile.Config).
type Dispatcher struct {
	Ledger ledger.Ledger
	// Providers maps a channel ("sms", "email", "push") to its provider,
	// and Fallbacks to the providers tried after it, in order (a route:
	// Route). A row is always resolved against the provider its attempt
	// went through, which must be on its channel's route.
	Providers map[string]provider.Adapter
	Fallbacks map[string][]provider.Adapter
	Metrics   metrics.Recorder
	Logger    *slog.Logger
	// ProviderTimeout bounds one provider call.
	ProviderTimeout time.Duration
	// ClaimTimeout is the lease of a claim; it must cover a worker's worst
	// path (Budgets().TakeOver()).
	ClaimTimeout time.Duration
	// Margin is the time the ledger writes and rendering need around the
	// provider calls of one step; decide.ProcessingMargin when zero.
	Margin time.Duration
	// Settle is how long after an attempt a provider's "no record" answer
	// is trusted; decide.DefaultSettle when zero.
	Settle time.Duration
	// Now is the clock.
	Now func() time.Time
	// Renderer renders a stored template's row again for a resend (the
	// row holds the render inputs, not the text: Render). Nil only where
	// no row holds a stored template's inputs.
	Renderer *render.Renderer
	// RetryBase is the base of the reconciler's backoff of released rows
	// (decide.Backoff); decide.RetryBase when zero.
	RetryBase time.Duration
	// Health is the container's view of which providers keep failing
	// (Pick); New makes one when nil.
	Health *Health
	// Redactor makes the address tokens of the log lines; the process's
	// default (redact.Default) when nil.
	Redactor *redact.Redactor
	// Status, when set, is told each time Health comes to know a
	// provider down, and again every cool-down while it stays down
	// (package opstate records it for `sendonce status`),
	// and each time a provider that was down answers again (state "up",
	// until the time it did: the reconciler's recovery watch reads it).
	Status StatusRecorder
}

// StatusRecorder records a provider's state for operators and the
// reconciler (opstate.Store): state "down" until until, or "up" (it
// answered again after an outage) at until.
type StatusRecorder interface {
	ProviderState(ctx context.Context, provider, state string, until time.Time) error
}

// Address returns the token of address a for a log line (Redactor).
func (d *Dispatcher) Address(a string) string {
	if d.Redactor == nil {
		return redact.Address(a)
	}
	return d.Redactor.Address(a)
}

// New checks d and returns it with the defaults filled in: metrics.Discard
// for a nil Metrics, a logger that discards for a nil Logger, time.Now for
// a nil Now, decide.DefaultSettle for a zero Settle. It returns an error
// when d has no Ledger, or when the claim timeout does not cover a
// takeover's worst path (decide.Budgets.CheckClaim).
func New(d Dispatcher) (*Dispatcher, error) {
	if d.Ledger == nil {
		return nil, errors.New("dispatch: a ledger is required")
	}
	if err := d.Budgets().CheckClaim(d.ClaimTimeout); err != nil {
		return nil, fmt.Errorf("dispatch: %w", err)
	}
	if d.Settle < 0 {
		return nil, errors.New("dispatch: the settle time must not be negative")
	}
	if d.Settle == 0 {
		d.Settle = decide.DefaultSettle
	}
	if d.Metrics == nil {
		d.Metrics = metrics.Discard
	}
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Health == nil {
		d.Health = &Health{Now: d.Now}
	}
	return &d, nil
}

// Decide makes the one decision about row in.Row (decide.Of), resolved
// through p, the first provider of picked (the row's Pick; p is nil when
// none may resolve it); it sets in.Configured and in.Caps from p, and
// in.ProviderDown when Health knows every provider of picked down
// (Health.Down). When the
// decision needs the row's message (a lookup or a send) it renders what
// the row pins (Render: the row's template version, never the tenant's
// latest), and decides again with in.Unrenderable when that fails for
// good; when the decision is to look the message up, it asks p about the
// attempt being resolved and decides again with the answer; when the
// decision is to send through a paced provider (Pacer), it takes the
// send's token before any takeover and decides again with in.Paced when
// none is free and no other provider of picked could take the send (the
// row then waits, nothing written). It returns
// the decision, the lookup's result (for MarkSent and MarkFailed), and
// the row with its message's text for Resolve. It sets in.NoTime when
// less than Budgets().TakeOver() is left before ctx's deadline, so the
// decision itself says what a caller without time for a lookup does. Its
// error is the template store's (render.ErrUnavailable): nothing was
// decided, and the caller comes back later.
func (d *Dispatcher) Decide(ctx context.Context, in decide.Input, picked []provider.Adapter) (decide.Decision, provider.LookupResult, ledger.Record, error) {
	rec := in.Row
	p := First(picked)
	in.Configured = p != nil
	in.ProviderDown = d.allDown(picked)
	// Deadlines are wall-clock time, whatever clock the rows are judged by.
	if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < d.Budgets().TakeOver() {
		in.NoTime = true
	}
	if p != nil {
		in.Caps = p.Capabilities()
	}
	dec := decide.Of(in)
	if dec.Action != decide.LookUp && dec.Action != decide.Send {
		return dec, provider.LookupResult{}, rec, nil
	}
	// The send's token is taken before the takeover (a send the rate
	// refuses then costs no write), once the message is rendered. When
	// another provider of picked could take the send, no token is taken
	// here: the send takes p's, and SendRoute fails over from its paced
	// refusal.
	paced := func(dec decide.Decision) decide.Decision {
		if dec.Action != decide.Send || d.canFailOver(picked) || d.reserve(ctx, p, rec.Key) {
			return dec
		}
		in.Paced = true
		return decide.Of(in)
	}
	e, err := d.Render(ctx, rec.Entry)
	switch {
	case errors.Is(err, render.ErrUnavailable):
		d.Logger.Error("render", "key", rec.Key, "error", err)
		return dec, provider.LookupResult{}, rec, err
	case err != nil:
		in.Unrenderable = err.Error()
		return decide.Of(in), provider.LookupResult{Reason: in.Unrenderable}, rec, nil
	}
	rec.Entry = e
	if dec.Action != decide.LookUp {
		return paced(dec), provider.LookupResult{}, rec, nil
	}
	in.Answer = decide.AskFailed
	var found provider.LookupResult
	if l, ok := p.(provider.Looker); ok {
		in.Answer, found, _ = d.Ask(ctx, rec, p, l)
	}
	// The lookup took time: the send that may follow is judged now, so
	// a message whose validity passed during the lookup is not sent.
	in.Now = d.Now()
	return paced(decide.Of(in)), found, rec, nil
}

// Budgets returns the timings d's steps are judged by: its provider
// timeout and its margin.
func (d *Dispatcher) Budgets() decide.Budgets {
	return decide.Budgets{Provider: d.ProviderTimeout, Margin: d.Margin}
}

// Pacer is a provider adapter whose sends are paced (pace.Adapter).
// Reserve takes the token of message key's next send before the row is
// taken over: a send the provider's rate refuses then costs no ledger
// write (before, it cost the takeover and its release). It returns an
// error when no token is free within the adapter's wait.
type Pacer interface {
	Reserve(ctx context.Context, key string) error
}

// reserve takes the send token of message key from p when p is paced, and
// reports whether the send may go.
func (d *Dispatcher) reserve(ctx context.Context, p provider.Adapter, key string) bool {
	pc, ok := p.(Pacer)
	if !ok {
		return true
	}
	if err := pc.Reserve(ctx, key); err != nil {
		d.Logger.Debug("paced: no send token, the row is left as it is", "key", key, "provider", p.Name(), "reason", provider.ReasonOf(err))
		return false
	}
	return true
}

// canFailOver reports whether picked holds a provider after the first
// that Health does not know down: a send the first's pace refuses fails
// over to it (SendRoute).
func (d *Dispatcher) canFailOver(picked []provider.Adapter) bool {
	for _, q := range picked[min(1, len(picked)):] {
		if q != nil && !d.Health.Down(q.Name()) {
			return true
		}
	}
	return false
}

// allDown reports whether picked holds providers and Health knows every
// one down: each refused its latest sends in a row (Health.Down;
// decide.Input.ProviderDown).
func (d *Dispatcher) allDown(picked []provider.Adapter) bool {
	n := 0
	for _, p := range picked {
		if p == nil {
			continue
		}
		if !d.Health.Down(p.Name()) {
			return false
		}
		n++
	}
	return n > 0
}

// Render returns e with its message's text: e itself when it carries the
// text (ledger.Entry.Rendered), else e's stored template version rendered
// again on its data, to the same bytes as the first attempt. The error is
// a *render.Error (ErrUnavailable: retry later; otherwise the message
// cannot be rendered any more).
func (d *Dispatcher) Render(ctx context.Context, e ledger.Entry) (ledger.Entry, error) {
	if e.TemplateVersion == 0 && e.Subject == "" && e.Body == "" && e.HTML == "" {
		// Its request could not be rendered when it was first claimed.
		return e, &render.Error{Template: e.Template, Channel: e.Channel, Problem: render.ErrUnknownTemplate,
			Detail: "the row holds no message: its request could not be rendered when first claimed"}
	}
	if e.Rendered() {
		return e, nil
	}
	if d.Renderer == nil {
		return e, &render.Error{Template: e.Template, Channel: e.Channel, Problem: render.ErrUnavailable, Err: errors.New("no renderer is configured")}
	}
	var data map[string]any
	if e.Data != "" {
		dec := json.NewDecoder(strings.NewReader(e.Data))
		dec.UseNumber() // as the request was parsed (package notify)
		if err := dec.Decode(&data); err != nil {
			return e, &render.Error{Template: e.Template, Channel: e.Channel, Problem: render.ErrMissingParam, Detail: "stored data: " + err.Error()}
		}
	}
	msg, err := d.Renderer.RenderVersion(ctx, e.Tenant, e.Template, e.Channel, e.TemplateVersion, e.TemplateLocale, data)
	if err != nil {
		return e, err
	}
	e.Subject, e.Body, e.HTML = msg.Subject, msg.Body, msg.HTML
	return e, nil
}

// Release retries: a Release is tried up to ReleaseAttempts times within
// ReleaseTimeout, whatever happens to the caller's context. A mark of
// SENT, UNCERTAIN or ABANDONED is one write within MarkTimeout, also on a
// context the caller's cancellation does not reach.
const (
	MarkTimeout     = 5 * time.Second
	ReleaseAttempts = 3
	ReleaseTimeout  = 5 * time.Second
	releasePause    = 100 * time.Millisecond
)

// ProviderMessage builds the provider message of entry e for the attempt that
// started at attemptedAt: the claim's own time for a send, the time of the
// attempt being resolved for a lookup.
func ProviderMessage(e ledger.Entry, attemptedAt time.Time) provider.Message {
	return provider.Message{
		Key:         e.Key,
		Tenant:      e.Tenant,
		Channel:     notify.Channel(e.Channel),
		Class:       notify.Class(e.Class),
		To:          e.Address,
		Subject:     e.Subject,
		Body:        e.Body,
		HTML:        e.HTML,
		AttemptedAt: attemptedAt,
	}
}

// Claim claims e for lease. On a conflict it returns the ledger's
// *ledger.ConflictError. When the ledger's answer was lost it releases the
// claim it tried to take (fenced: harmless if the write never applied) and
// returns the error; the caller must retry later.
func (d *Dispatcher) Claim(ctx context.Context, e ledger.Entry, lease time.Duration) (ledger.Claim, error) {
	wctx, cancel := reserve(ctx)
	c, err := d.Ledger.Claim(wctx, e, lease)
	cancel()
	if err == nil {
		return c, nil
	}
	if _, conflict := ledger.AsConflict(err); !conflict && c.ClaimID != "" {
		d.Logger.Error("claim: ledger answer lost; releasing the claim it may have taken", "key", e.Key, "error", err)
		d.releaseLost(ctx, c, e.Channel, "claim")
	}
	return ledger.Claim{}, err
}

// TakeOver takes the claim of cur over for lease. On a conflict or a
// missing row it returns the ledger's error. When the ledger's answer was
// lost it releases the claim it tried to take if cur was released
// (nothing was sent, and nothing is by this worker), and returns the
// error.
func (d *Dispatcher) TakeOver(ctx context.Context, cur ledger.Record, provider string, lease time.Duration) (ledger.Claim, error) {
	wctx, cancel := reserve(ctx)
	c, err := d.Ledger.TakeOver(wctx, cur, provider, lease)
	cancel()
	if err == nil {
		return c, nil
	}
	_, conflict := ledger.AsConflict(err)
	if !conflict && !errors.Is(err, ledger.ErrNotFound) && c.ClaimID != "" {
		if cur.Released {
			d.Logger.Error("take over: ledger answer lost; releasing the claim it may have taken", "key", cur.Key, "error", err)
			d.releaseLost(ctx, c, cur.Channel, "takeover")
		} else if cur.State == ledger.StateUncertain {
			// Releasing would claim that nothing was sent, which the
			// previous attempt cannot promise. The row goes back to what
			// it was: UNCERTAIN, under the claim this worker may hold
			// (fenced, so harmless if the takeover never applied). It is
			// due for the reconciler at once instead of after the new
			// lease, and its LookupFrom still covers the earlier attempt.
			d.Logger.Error("take over: ledger answer lost; marking the row uncertain again under the claim it may have taken", "key", cur.Key, "error", err)
			d.restoreUncertain(ctx, c, cur)
		} else {
			// A stale PENDING row: once the new lease passes (if the
			// write applied) it is a stale PENDING row again, as it was,
			// and its LookupFrom still covers the previous attempt.
			d.Logger.Error("take over: ledger answer lost", "key", cur.Key, "error", err)
		}
	}
	return ledger.Claim{}, err
}

// restoreUncertain records UNCERTAIN under claim c, which a takeover of
// an UNCERTAIN row tried to take and whose answer was lost, counted as
// any UNCERTAIN mark is (UncertainAttempts; FencingLost when fenced out,
// which here means the takeover never applied or another worker has the
// row, and changes nothing). Any other failure leaves the row PENDING
// until the new lease passes, as before.
func (d *Dispatcher) restoreUncertain(ctx context.Context, c ledger.Claim, cur ledger.Record) {
	const reason = "ledger: a takeover's answer was lost before the provider call; the earlier attempt's outcome is unknown"
	dims := []metrics.Dim{{Name: "channel", Value: cur.Channel}, {Name: "provider", Value: cur.Provider}}
	log := d.Logger.With("key", cur.Key, "channel", cur.Channel, "attempt", c.Attempt)
	d.Metrics.Count(metrics.UncertainAttempts, 1, dims...)
	d.mark(context.WithoutCancel(ctx), log, c, ledger.Outcome{State: ledger.StateUncertain, Reason: reason}, false, dims)
}

// LostAnswerReserve is the time a claim-taking write (Claim, TakeOver)
// leaves before the invocation's deadline: the SDK's retries of a lost
// answer must not run into the deadline, where the function is stopped
// before it could release (or mark again) the claim it may have taken,
// and a message never sent would look like one a dead worker may have
// sent.
const LostAnswerReserve = 2 * time.Second

// reserve returns ctx bounded to LostAnswerReserve before its deadline
// (ctx itself when it has none).
func reserve(ctx context.Context) (context.Context, context.CancelFunc) {
	deadline, ok := ctx.Deadline()
	if !ok {
		return ctx, func() {}
	}
	return context.WithDeadline(ctx, deadline.Add(-LostAnswerReserve))
}

func (d *Dispatcher) releaseLost(ctx context.Context, c ledger.Claim, channel, op string) {
	reason := "ledger: the " + op + "'s answer was lost before the provider call: nothing was sent"
	if err := d.Release(ctx, c, reason, d.RetryAt(c)); err == nil {
		d.Metrics.Count(metrics.Released, 1, metrics.Dim{Name: "channel", Value: channel})
	}
}

// RetryAt is when the reconciler retries a row whose claim c is released:
// after decide.Backoff with d.RetryBase.
func (d *Dispatcher) RetryAt(c ledger.Claim) time.Time {
	return d.retryAt(c, decide.CauseNone)
}

// retryAt is when the reconciler retries a row whose claim c is released
// for cause (decide.RetryDelay with d.RetryBase): a refusal of a provider
// known down, or of the pace, does not grow the row's backoff.
func (d *Dispatcher) retryAt(c ledger.Claim, cause decide.Cause) time.Time {
	return d.Now().Add(decide.RetryDelay(cmp.Or(d.RetryBase, decide.RetryBase), c.Attempt, cause))
}

// Release gives claim c up with reason, due for the reconciler at
// retryAt. It retries a failed Release (ReleaseAttempts within
// ReleaseTimeout) under a context that survives ctx's cancellation, and
// returns nil once released, an error matching ledger.ErrFencingLost when
// c no longer holds the row (also when its write never applied), or the
// last error.
func (d *Dispatcher) Release(ctx context.Context, c ledger.Claim, reason string, retryAt time.Time) error {
	err := d.retry(ctx, "release claim", c.Key, func(ctx context.Context) error {
		return d.Ledger.Release(ctx, c, reason, retryAt)
	})
	if err != nil && !errors.Is(err, ledger.ErrFencingLost) {
		d.Logger.Error("release claim failed: the row stays PENDING until its lease passes", "key", c.Key, "error", err)
	}
	return err
}

// retry runs a write that records that nothing was delivered (a Release, a
// FAILED mark) up to ReleaseAttempts times within ReleaseTimeout, under a
// context that survives ctx's cancellation, until it succeeds or finds the
// claim fenced out. Unrecorded, the claim stays PENDING until its lease
// passes, and a takeover must then treat the attempt as one that may have
// sent.
func (d *Dispatcher) retry(ctx context.Context, op, key string, write func(context.Context) error) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ReleaseTimeout)
	defer cancel()
	var err error
	for i := range ReleaseAttempts {
		if i > 0 {
			select {
			case <-rctx.Done():
				return err
			case <-time.After(releasePause << (i - 1)):
			}
		}
		if err = write(rctx); err == nil || errors.Is(err, ledger.ErrFencingLost) {
			return err
		}
		d.Logger.Warn(op+" failed: retrying", "key", key, "try", i+1, "error", err)
	}
	return err
}

// Send calls p with the entry's message under claim c and records the
// outcome. It never returns an error: every path ends in a Result. A
// send through a provider other than the first of the channel's route
// (Route) is counted as Failovers, from e.Provider (the provider of the
// row's latest attempt) when that is another, else from the route's
// first.
func (d *Dispatcher) Send(ctx context.Context, c ledger.Claim, e ledger.Entry, p provider.Adapter) Result {
	r := d.send(ctx, c, e, p)
	r.Provider = p.Name()
	return r
}

func (d *Dispatcher) send(ctx context.Context, c ledger.Claim, e ledger.Entry, p provider.Adapter) Result {
	dims := []metrics.Dim{{Name: "channel", Value: e.Channel}, {Name: "provider", Value: p.Name()}}
	log := d.Logger.With("key", e.Key, "channel", e.Channel, "provider", p.Name(), "attempt", c.Attempt)

	if from, ok := d.failover(e, p); ok {
		d.Metrics.Count(metrics.Failovers, 1, metrics.Dim{Name: "channel", Value: e.Channel},
			metrics.Dim{Name: "from", Value: from}, metrics.Dim{Name: "to", Value: p.Name()})
		log.Warn("failover: sending through a provider other than the route's first", "from", from, "to", p.Name())
	}
	callCtx, cancel := context.WithTimeout(ctx, d.ProviderTimeout)
	// The provider's span: its name and the outcome's kind, never the
	// address.
	callCtx, span := tracing.Start(callCtx, tracing.SpanProvider, tracing.AttrKey.String(e.Key), tracing.AttrChannel.String(e.Channel), tracing.AttrProvider.String(p.Name()))
	start := d.Now()
	receipt, err := p.Send(callCtx, ProviderMessage(e, c.AttemptedAt))
	span.SetAttributes(tracing.AttrOutcome.String(outcome(err)))
	if err != nil {
		span.SetStatus(codes.Error, provider.KindOf(err).String())
	}
	span.End()
	cancel()
	took := d.Now().Sub(start)
	d.Metrics.Latency(metrics.SendLatency, took, dims...)
	log.Info("provider answered", "outcome", outcome(err), "reason", provider.ReasonOf(err), "latency_ms", took.Milliseconds())
	paced := pace.IsPaced(err)
	if !paced {
		// A refusal of this side's own pace says nothing about the
		// provider's health.
		wasDown, refusing := d.Health.Down(p.Name()), d.Health.Refusing(p.Name())
		d.Health.Observe(p.Name(), err)
		if until, news := d.Health.downNews(p.Name()); news && d.Status != nil {
			if !wasDown {
				log.Warn("provider known down: its latest sends in a row were refused", "until", until)
			}
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			if serr := d.Status.ProviderState(sctx, p.Name(), "down", until); serr != nil {
				log.Warn("record the provider's state", "error", serr)
			}
			cancel()
		}
		if refusing && err == nil && d.Status != nil {
			// The provider answers again after an outage: the reconciler
			// hands its backlog out at once (reconcile.Reconciler.Watch),
			// not at its next scheduled run.
			log.Warn("provider answers again after refusing its latest sends")
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			if serr := d.Status.ProviderState(sctx, p.Name(), "up", d.Now()); serr != nil {
				log.Warn("record the provider's state", "error", serr)
			}
			cancel()
		}
	}

	if err == nil {
		r := d.mark(ctx, log, c, ledger.Outcome{State: ledger.StateSent, ProviderMessageID: receipt.MessageID}, true, dims)
		if r.Disposition == Sent {
			d.recordOwner(ctx, p, e.Key, receipt.MessageID)
		}
		return r
	}
	kind := provider.KindOf(err)
	reason := provider.ReasonOf(err)
	d.Metrics.Count(metrics.ProviderErrors, 1, append(dims, metrics.Dim{Name: "kind", Value: kind.String()})...)
	switch {
	case kind == provider.Permanent:
		log.Info("provider rejected message", "reason", reason, "to", d.Address(e.Address))
		r := d.mark(ctx, log, c, ledger.Outcome{State: ledger.StateFailed, Reason: reason}, false, dims)
		r.Kind = kind
		return r
	case kind == provider.Transient || kind == provider.Config:
		if kind == provider.Config {
			log.Error("provider configuration error: message will be retried", "reason", reason)
		} else {
			log.Warn("provider call failed: will retry with the same key", "kind", kind.String(), "reason", reason)
		}
		// Released for the provider as a whole (paced, or known down
		// now), the row does not back off further (decide.RetryDelay).
		cause := decide.CauseNone
		switch {
		case paced:
			cause = decide.CausePaced
		case d.Health.Down(p.Name()):
			cause = decide.CauseProviderDown
		}
		if rerr := d.Release(ctx, c, kind.String()+": "+reason, d.retryAt(c, cause)); rerr != nil {
			if errors.Is(rerr, ledger.ErrFencingLost) {
				// Nothing was sent: not a possible duplicate, so not counted
				// as FencingLost.
				log.Warn("claim was taken over before release", "error", rerr)
				return Result{Key: c.Key, Disposition: FencingLost, Kind: kind, Reason: reason, Err: rerr}
			}
		} else {
			d.Metrics.Count(metrics.Released, 1, dims...)
			return Result{Key: c.Key, Disposition: Retry, Kind: kind, Reason: reason, Err: err, Released: true}
		}
		return Result{Key: c.Key, Disposition: Retry, Kind: kind, Reason: reason, Err: err}
	default: // ambiguous: the message may be at the provider
		log.Warn("provider outcome ambiguous: recorded as uncertain", "reason", reason)
		d.Metrics.Count(metrics.UncertainAttempts, 1, dims...)
		r := d.mark(ctx, log, c, ledger.Outcome{State: ledger.StateUncertain, Reason: reason}, false, dims)
		r.Kind = kind
		r.Repeat = r.Disposition == Uncertain && p.Capabilities().IdempotentSends
		return r
	}
}

// Ask asks l (provider.Looker.Lookup) about the attempt of row rec that is being resolved (the
// row as read, before any takeover: from its LookupStart, the earliest
// attempt that may have sent, never a takeover's claim time). It records nothing and needs no claim: a lookup sends
// nothing. It returns the answer for decide.Of, with the provider's
// result (AskFailed and the error when the provider could not be
// asked).
func (d *Dispatcher) Ask(ctx context.Context, rec ledger.Record, p provider.Adapter, l provider.Looker) (decide.Answer, provider.LookupResult, error) {
	// A lookup may match on the text: render the row's inputs first.
	e, err := d.Render(ctx, rec.Entry)
	if err != nil {
		d.Logger.Warn("lookup: render", "key", rec.Key, "provider", p.Name(), "error", err)
		return decide.AskFailed, provider.LookupResult{}, err
	}
	m := ProviderMessage(e, rec.LookupStart())
	m.AttemptedUntil, m.ProviderMessageID = rec.LeaseUntil, rec.ProviderMessageID
	callCtx, cancel := context.WithTimeout(ctx, d.ProviderTimeout)
	res, err := l.Lookup(callCtx, m)
	cancel()
	if err != nil {
		d.Logger.Warn("lookup failed", "key", rec.Key, "provider", p.Name(), "reason", provider.ReasonOf(err))
		return decide.AskFailed, res, err
	}
	if res.Status == provider.LookupUnproven && d.excluded(ctx, p, rec.Key, res.Candidates) {
		return decide.NoRecord, provider.LookupResult{Status: provider.LookupNotFound,
			Reason: "every message that matches by content is another key's (proof by exclusion)"}, nil
	}
	return decide.AnswerOf(res.Status), res, nil
}

// searchesByContent reports whether p's lookups may answer unproven: a
// provider that can be looked up but takes no key to drop repeats with
// (Twilio, looked up by recipient and text). The ids of its messages are
// recorded in the ledger's owner index (ledger.OwnerIndex), for proofs
// by exclusion.
func searchesByContent(p provider.Adapter) bool {
	c := p.Capabilities()
	return c.LookupByReference && !c.IdempotentSends
}

// recordOwner records in the ledger's owner index that p's message id is
// key's, for a provider whose lookups search by content. A failure is
// logged and costs only a later proof by exclusion (the answer then stays
// unproven).
func (d *Dispatcher) recordOwner(ctx context.Context, p provider.Adapter, key, id string) {
	oi, ok := d.Ledger.(ledger.OwnerIndex)
	if !ok || id == "" || !searchesByContent(p) {
		return
	}
	if err := oi.RecordOwner(context.WithoutCancel(ctx), p.Name(), id, key); err != nil {
		d.Logger.Warn("record the owner of a provider message id", "key", key, "provider", p.Name(), "error", err)
	}
}

// excluded reports whether every candidate of an unproven content search
// is recorded in the ledger's owner index for a key other than key: then
// none of them is key's message, and the complete search proves that the
// provider does not have it (a proof by exclusion). One request to the
// index for the candidates (ledger.OwnerIndex.Owners); any candidate it
// does not hold, or holds for key, leaves the answer unproven.
func (d *Dispatcher) excluded(ctx context.Context, p provider.Adapter, key string, candidates []string) bool {
	oi, ok := d.Ledger.(ledger.OwnerIndex)
	if !ok || len(candidates) == 0 {
		return false
	}
	owners, err := oi.Owners(ctx, p.Name(), candidates)
	if err != nil {
		d.Logger.Warn("owner index unavailable: the lookup stays unproven", "key", key, "provider", p.Name(), "error", err)
		return false
	}
	for _, id := range candidates {
		if o, ok := owners[id]; !ok || o == key {
			return false
		}
	}
	d.Logger.Info("proof by exclusion: every message that matches by content is another key's", "key", key, "provider", p.Name(), "candidates", len(candidates))
	return true
}

// Mark records o under c and reports the matching Result, for an outcome
// reached without a provider call in this attempt (a lookup's answer, a
// reconciler's policy, a request that cannot be served): a lost fence is
// then counted as FencingLost only for an UNCERTAIN outcome. e and
// providerName label the logs and metrics.
func (d *Dispatcher) Mark(ctx context.Context, c ledger.Claim, e ledger.Entry, providerName string, o ledger.Outcome) Result {
	dims := []metrics.Dim{{Name: "channel", Value: e.Channel}, {Name: "provider", Value: providerName}}
	log := d.Logger.With("key", e.Key, "channel", e.Channel, "provider", providerName, "attempt", c.Attempt)
	r := d.mark(ctx, log, c, o, false, dims)
	r.Provider = providerName
	return r
}

func (d *Dispatcher) mark(ctx context.Context, log *slog.Logger, c ledger.Claim, o ledger.Outcome, sent bool, dims []metrics.Dim) (res Result) {
	ctx, span := tracing.Start(ctx, tracing.SpanMark, tracing.AttrKey.String(c.Key), tracing.AttrState.String(string(o.State)))
	defer func() { tracing.End(span, res.Err) }()
	res = Result{Key: c.Key, ProviderMessageID: o.ProviderMessageID, Reason: o.Reason}
	switch o.State {
	case ledger.StateSent:
		res.Disposition = Sent
	case ledger.StateFailed:
		res.Disposition = Failed
	case ledger.StateUncertain:
		res.Disposition = Uncertain
	case ledger.StateAbandoned:
		res.Disposition = Abandoned
	}
	var err error
	if o.State == ledger.StateFailed {
		// Nothing was delivered: retried like a Release, or a takeover
		// would later take the attempt for one that may have sent.
		err = d.retry(ctx, "record FAILED", c.Key, func(ctx context.Context) error { return d.Ledger.Mark(ctx, c, o) })
	} else {
		// The outcome of a call that reached the provider is recorded
		// whatever became of the caller's context: a cancelled caller
		// would otherwise leave the row held until its lease passes, and
		// the message's fate to a takeover's guess.
		mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), MarkTimeout)
		err = d.Ledger.Mark(mctx, c, o)
		cancel()
	}
	switch {
	case err == nil:
		switch {
		case o.State == ledger.StateSent && sent:
			d.Metrics.Count(metrics.Sent, 1, dims...)
		case o.State.Final() && o.State != ledger.StateSent && decide.IsExpired(o.Reason):
			// Its validity passed: counted on its own, never as a
			// provider's rejection or a policy's give-up.
			d.Metrics.Count(metrics.Expired, 1, dims...)
		case o.State == ledger.StateFailed:
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
		return Result{Key: c.Key, Disposition: FencingLost, Reason: o.Reason, Err: err}
	default:
		log.Error("record outcome", "state", string(o.State), "error", err)
		return Result{Key: c.Key, Disposition: LedgerError, Reason: o.Reason, Err: err}
	}
}

// Resolve performs decision dec (decide.Of) on row rec as read: a fenced
// takeover of rec for lease, then what the action asks for, with the
// stored entry (what the earlier attempt would have sent). found is the
// lookup's answer for MarkSent and MarkFailed. route is the Pick of
// providers for rec: its first resolves the row, and a Send fails over
// to the rest while an attempt provably sends nothing (SendRoute).
// Acknowledge, HandOff, Wait and LookUp need no write: Resolve returns
// Skipped for them. A takeover
// that loses to another worker, or finds the row gone, is TakeOverLost.
func (d *Dispatcher) Resolve(ctx context.Context, rec ledger.Record, dec decide.Decision, route []provider.Adapter, found provider.LookupResult, lease time.Duration) Result {
	p := First(route)
	switch dec.Action {
	case decide.Send, decide.MarkSent, decide.MarkFailed, decide.MarkUncertain, decide.Abandon, decide.Postpone, decide.Expire:
	default:
		return Result{Key: rec.Key, Disposition: Skipped, Reason: dec.Reason}
	}
	if dec.Action == decide.Send && p == nil {
		return Result{Key: rec.Key, Disposition: Skipped, Reason: "no provider"}
	}
	// The takeover records the new attempt's provider (Pick's choice:
	// the row's own while an earlier attempt may have sent).
	next := ""
	if p != nil && dec.Action != decide.Expire {
		// An expired row keeps the provider of its latest attempt: no
		// new one is tried.
		next = p.Name()
	}
	c, err := d.TakeOver(ctx, rec, next, lease)
	if err != nil {
		if _, conflict := ledger.AsConflict(err); conflict || errors.Is(err, ledger.ErrNotFound) {
			d.Logger.Info("row changed since it was read: another worker has it", "key", rec.Key)
			return Result{Key: rec.Key, Disposition: TakeOverLost, Reason: "another worker took the row over", Err: err}
		}
		return Result{Key: rec.Key, Disposition: LedgerError, Reason: "ledger unavailable", Err: err}
	}
	name := rec.Provider
	if p != nil {
		name = p.Name()
	}
	var r Result
	switch dec.Action {
	case decide.Send:
		d.Logger.Info("took the row over: sending with the same key", "key", rec.Key, "attempt", c.Attempt, "why", dec.Reason)
		e, err := d.Render(ctx, rec.Entry)
		switch {
		case errors.Is(err, render.ErrUnavailable):
			d.Logger.Error("render", "key", rec.Key, "error", err)
			r = Result{Disposition: Retry, Reason: "template store unavailable", Err: err}
			if rerr := d.Release(ctx, c, "render: "+err.Error(), d.RetryAt(c)); rerr != nil {
				r = Result{Disposition: LedgerError, Reason: r.Reason, Err: rerr}
			}
		case err != nil:
			r = d.Mark(ctx, c, rec.Entry, name, ledger.Outcome{State: ledger.StateFailed, Reason: err.Error()})
		default:
			r = d.SendRoute(ctx, c, e, ledger.NextHistory(rec), route)
		}
	case decide.MarkSent:
		r = d.Mark(ctx, c, rec.Entry, name, ledger.Outcome{State: ledger.StateSent, ProviderMessageID: found.MessageID})
		if r.Disposition == Sent && p != nil {
			d.recordOwner(ctx, p, rec.Key, found.MessageID)
		}
	case decide.MarkFailed:
		r = d.Mark(ctx, c, rec.Entry, name, ledger.Outcome{State: ledger.StateFailed, ProviderMessageID: found.MessageID, Reason: found.Reason})
	case decide.MarkUncertain:
		d.Metrics.Count(metrics.UncertainAttempts, 1, metrics.Dim{Name: "channel", Value: rec.Channel}, metrics.Dim{Name: "provider", Value: name})
		r = d.Mark(ctx, c, rec.Entry, name, ledger.Outcome{State: ledger.StateUncertain, Reason: dec.Reason})
	case decide.Abandon:
		r = d.Mark(ctx, c, rec.Entry, name, ledger.Outcome{State: ledger.StateAbandoned, Reason: dec.Reason})
	case decide.Expire:
		d.Logger.Info("expired: recorded as failed, never sent", "key", rec.Key, "valid_until", rec.ValidUntil, "why", dec.Reason)
		r = d.Mark(ctx, c, rec.Entry, rec.Provider, ledger.Outcome{State: ledger.StateFailed, Reason: dec.Reason})
	case decide.Postpone:
		r = Result{Disposition: Postponed, Reason: dec.Reason}
		if err := d.Release(ctx, c, dec.Reason, d.RetryAt(c)); err != nil {
			r = Result{Disposition: LedgerError, Reason: dec.Reason, Err: err}
		}
	}
	r.Key, r.Attempt = rec.Key, max(r.Attempt, c.Attempt)
	return r
}

// outcome names what a provider's answer err was: "accepted" (nil), else
// its kind ("permanent", "transient", "config", "ambiguous"). The log
// line "provider answered" carries it as outcome.
func outcome(err error) string {
	if err == nil {
		return "accepted"
	}
	return provider.KindOf(err).String()
}
