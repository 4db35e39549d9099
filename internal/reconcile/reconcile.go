// Package reconcile resolves the rows a sender could not finish: UNCERTAIN
// attempts (the provider may have the message), released claims (nothing
// was sent; retried with backoff) and PENDING claims whose lease passed
// (their worker died, and SQS may never redeliver them, e.g. after the
// message reached the dead-letter queue).
//
// It is a rescuer in the spirit of river's JobRescuer: each Run reads the
// sparse attention index across all shards, oldest due first, page by
// page (a page emptied by expired rows does not end a shard while it has
// a cursor), does bounded work, and stops before the invocation's
// deadline.
//
// For each row it makes the one decision package decide defines (the
// sender makes the same one), in short:
//
//  1. A released claim (nothing was sent) is resent, once its backoff
//     (decide.RetryAfter, exponential, capped) has passed; with no
//     provider configured for its channel it is postponed (taken over and
//     released again, counted as ConfigErrors), never abandoned for it.
//  2. A row older than MaxAge (from its first claim) is ABANDONED: the
//     only limit a never-sent message meets.
//  3. The provider can look the message up → ask it about the attempt
//     being resolved (from the row's LookupStart). Accepted → SENT; rejected →
//     FAILED; no record → resend, but only once Settle has passed since
//     the attempt (before that a "no record" may be lag, and the row is
//     left for a later run), or at once through a provider that drops
//     repeats.
//  4. The provider drops repeats (idempotent sends) → resend with the same
//     key: a repeat is harmless.
//  5. Otherwise the message class's Policy decides: resend or abandon.
//     Defaults: otp → resend (a duplicate code is harmless, a missing one
//     locks the user out); transactional → abandon unless the provider
//     drops repeats; marketing → abandon (a rare miss beats a paid
//     duplicate). A resend that the provider cannot drop is ABANDONED
//     instead once MaxAttempts attempts may have reached the provider
//     (released attempts do not count).
//
// Every change is a fenced takeover of the row's claim (ledger.TakeOver on
// the ClaimID that was read), so two reconcilers, or a reconciler and a
// sender that got a redelivery, never both act on one row: the loser's
// takeover fails and it moves on.
package reconcile

import (
	"cmp"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/sendonce/sendonce/internal/decide"
	"github.com/sendonce/sendonce/internal/dispatch"
	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/metrics"
	"github.com/sendonce/sendonce/internal/opstate"
	"github.com/sendonce/sendonce/internal/tracing"
	"go.opentelemetry.io/otel/attribute"
)

// Policy is what happens to an ambiguous attempt whose provider can
// neither look it up nor drop a repeat (decide.Policy).
type Policy = decide.Policy

// The policies.
const (
	// Resend sends again with the same key, accepting a possible duplicate.
	Resend = decide.PolicyResend
	// ResendIfIdempotent resends only through a provider that drops
	// repeats; otherwise it abandons.
	ResendIfIdempotent = decide.PolicyResendIfIdempotent
	// Abandon marks the row ABANDONED, accepting a possible miss.
	Abandon = decide.PolicyAbandon
)

// DefaultPolicies are the documented per-class defaults.
var DefaultPolicies = map[string]Policy{
	"otp":           Resend,
	"transactional": ResendIfIdempotent,
	"marketing":     Abandon,
}

// Defaults of the configuration (settle, maximum age and attempts:
// decide.DefaultSettle, decide.DefaultMaxAge, decide.DefaultMaxAttempts).
const (
	DefaultPageSize    = 25
	DefaultMaxRows     = 1000
	DefaultConcurrency = 4
)

// ParsePolicies parses per-class policy overrides written as
// "class=policy,class=policy" (e.g. "marketing=resend,transactional=abandon");
// the empty string yields none.
func ParsePolicies(s string) (map[string]Policy, error) {
	out := map[string]Policy{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		class, policy, ok := strings.Cut(part, "=")
		p := Policy(strings.TrimSpace(policy))
		if !ok || strings.TrimSpace(class) == "" || (p != Resend && p != ResendIfIdempotent && p != Abandon) {
			return nil, fmt.Errorf("reconcile: policy %q: want class=resend|resend-if-idempotent|abandon", part)
		}
		out[strings.TrimSpace(class)] = p
	}
	return out, nil
}

// Config is what a Reconciler is built from. New validates it.
type Config struct {
	// Dispatcher performs the attempts, with the ledger, the routes, the
	// timeouts and the clock the reconciler shares with the sender
	// (dispatch.New). Its Renderer renders a stored template's row again
	// for a resend (rows hold render inputs, not text); without one such
	// a resend waits (template store unavailable). Required.
	Dispatcher *dispatch.Dispatcher
	// MaxAge is how long after its first claim a row is given up
	// (ABANDONED) if still unresolved (SENDONCE_MAX_AGE). Default
	// decide.DefaultMaxAge.
	MaxAge time.Duration
	// MaxAttempts bounds the attempts that may have reached the provider
	// (released attempts do not count) before a resend the provider cannot
	// drop is abandoned instead. Default decide.DefaultMaxAttempts.
	MaxAttempts int
	// Policies overrides DefaultPolicies per class.
	Policies map[string]Policy
	// PageSize is the number of rows read per index query. Default 25.
	PageSize int
	// MaxRows bounds the rows examined in one Run. Default 1000.
	MaxRows int
	// Concurrency bounds the rows handled at once (by Run, or by Work
	// within one unit). Default 4.
	Concurrency int
	// UnitSize is the number of keys Find puts in one unit of work.
	// Default DefaultUnitSize; Find makes the units of a fast provider's
	// lane larger (Tune).
	UnitSize int
	// Schedule is how often Find runs (the template's rate(1 minute)):
	// a lane's hand-out covers what its provider can take in that time
	// (Tune). Default DefaultSchedule.
	Schedule time.Duration
	// Workers is the reconcile workers that run at once (the template's
	// ReconcileWorkerConcurrency). Default DefaultWorkers.
	Workers int
	// MaxRate is the most rows a second the workers are tuned to
	// (Tune). Default Workers × MaxConcurrency ÷ RowTime (15,000 at the
	// defaults: DynamoDB's limits).
	MaxRate int
	// Status, when set, is the providers' recorded states
	// (opstate.Store): Find tells the workers of a lane whose provider
	// answered again after an outage when it did (Unit.ProviderUp), and
	// Watch polls it for a recovery.
	Status ProviderStates
}

// ProviderStates reads the providers' recorded down and up states
// (opstate.Store.Providers).
type ProviderStates interface {
	Providers(ctx context.Context) (map[string]opstate.Provider, error)
}

// Reconciler resolves rows that need attention.
type Reconciler struct {
	cfg      Config
	dispatch *dispatch.Dispatcher
}

// New validates cfg, fills in defaults and returns a Reconciler.
func New(cfg Config) (*Reconciler, error) {
	if cfg.Dispatcher == nil {
		return nil, errors.New("reconcile: a dispatcher is required")
	}
	if cfg.MaxAge < 0 || cfg.MaxAttempts < 0 || cfg.PageSize < 0 || cfg.MaxRows < 0 || cfg.Concurrency < 0 || cfg.UnitSize < 0 || cfg.Schedule < 0 || cfg.Workers < 0 || cfg.MaxRate < 0 {
		return nil, errors.New("reconcile: maximum age, attempts, page size, rows, concurrency, unit size, schedule and workers must not be negative")
	}
	d := cfg.Dispatcher
	cfg.MaxAge = cmp.Or(cfg.MaxAge, decide.DefaultMaxAge)
	cfg.MaxAttempts = cmp.Or(cfg.MaxAttempts, decide.DefaultMaxAttempts)
	cfg.PageSize = cmp.Or(cfg.PageSize, DefaultPageSize)
	cfg.MaxRows = cmp.Or(cfg.MaxRows, DefaultMaxRows)
	cfg.Concurrency = cmp.Or(cfg.Concurrency, DefaultConcurrency)
	cfg.UnitSize = cmp.Or(cfg.UnitSize, DefaultUnitSize)
	cfg.Schedule = cmp.Or(cfg.Schedule, DefaultSchedule)
	cfg.Workers = cmp.Or(cfg.Workers, DefaultWorkers)
	cfg.MaxRate = cmp.Or(cfg.MaxRate, cfg.Workers*MaxConcurrency*int(time.Second/RowTime))
	policies := map[string]Policy{}
	for class, p := range DefaultPolicies {
		policies[class] = p
	}
	for class, p := range cfg.Policies {
		if p != Resend && p != ResendIfIdempotent && p != Abandon {
			return nil, fmt.Errorf("reconcile: class %s: unknown policy %q (want resend, resend-if-idempotent or abandon)", class, p)
		}
		policies[class] = p
	}
	cfg.Policies = policies
	return &Reconciler{cfg: cfg, dispatch: d}, nil
}

// Action is what a Run did with one row.
type Action string

// The actions.
const (
	ActionReconciledSent   Action = "reconciled_sent"
	ActionReconciledFailed Action = "reconciled_failed"
	ActionResent           Action = "resent"
	ActionAbandoned        Action = "abandoned"
	// ActionExpired: the row's message was past its validity and ended
	// final without a send (FAILED, or ABANDONED when an earlier attempt
	// may have been sent); counted as Expired, never as Abandoned or
	// ReconciledFailed.
	ActionExpired Action = "expired"
	// ActionPostponed: a released row whose channel has no provider was
	// released again, due after its backoff (a configuration error).
	ActionPostponed Action = "postponed"
	// ActionWaiting: left for a later run (settling, lookup failed, resend
	// must be retried).
	ActionWaiting Action = "waiting"
	// ActionPaced: a send was due but the provider's send rate is spent
	// (decide.CausePaced): the row was left as it is, nothing written.
	ActionPaced Action = "paced"
	// ActionProviderDown: a send was due but every provider that may take
	// it is known down (decide.CauseProviderDown): the row was left as it
	// is, nothing written.
	ActionProviderDown Action = "provider_down"
	// ActionConflict: another worker holds or took the row.
	ActionConflict Action = "conflict"
	ActionError    Action = "error"
)

// Report sums up one Run.
type Report struct {
	Examined int
	Actions  map[Action]int
	// OldestDue is how long the oldest row seen had been due.
	OldestDue time.Duration
	// Truncated is true when the run stopped early (deadline or MaxRows)
	// with rows left.
	Truncated bool
}

// Summary is a Report in the JSON shape the function returns.
type Summary struct {
	Examined        int            `json:"examined"`
	Actions         map[string]int `json:"actions"`
	OldestDueMillis int64          `json:"oldest_due_ms"`
	Truncated       bool           `json:"truncated"`
}

// Summary returns rep as a Summary.
func (rep Report) Summary() Summary {
	s := Summary{Examined: rep.Examined, Actions: map[string]int{}, OldestDueMillis: rep.OldestDue.Milliseconds(), Truncated: rep.Truncated}
	for a, n := range rep.Actions {
		s.Actions[string(a)] = n
	}
	return s
}

// Run reconciles due rows until none are left, MaxRows were examined, or
// ctx's deadline is near. It returns an error only when the attention
// index could not be read at all.
func (r *Reconciler) Run(ctx context.Context) (Report, error) {
	rep := Report{Actions: map[Action]int{}}
	now := r.dispatch.Now()
	// DueBefore is exclusive and the ledger keeps milliseconds: a row that
	// fell due this very millisecond is due.
	it := &merger{ledger: r.dispatch.Ledger, due: now.Add(time.Millisecond), page: r.cfg.PageSize, stop: func() bool { return r.nearDeadline(ctx) }}
	if err := it.init(ctx); err != nil {
		return rep, err
	}
	var (
		mu  sync.Mutex
		wg  sync.WaitGroup
		sem = make(chan struct{}, r.cfg.Concurrency)
	)
	for {
		if rep.Examined >= r.cfg.MaxRows || r.nearDeadline(ctx) {
			rep.Truncated = it.more() || it.truncated
			break
		}
		rec, ok, err := it.next(ctx)
		if err != nil {
			r.dispatch.Logger.Error("read attention index", "error", err)
			rep.Truncated = true
			break
		}
		if !ok {
			rep.Truncated = it.truncated
			break
		}
		if rep.Examined == 0 {
			rep.OldestDue = now.Sub(dueAt(rec))
		}
		rep.Examined++
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			a := r.reconcile(ctx, rec)
			mu.Lock()
			rep.Actions[a]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	if rep.Examined > 0 {
		r.dispatch.Metrics.Latency(metrics.ReconcileBacklogAge, rep.OldestDue)
	}
	return rep, nil
}

// nearDeadline reports whether too little time is left to finish one more
// row: the worst path, a lookup and then a send (its dispatcher's Budgets).
func (r *Reconciler) nearDeadline(ctx context.Context) bool {
	// Deadlines are wall-clock time, whatever clock the rows are judged by.
	deadline, ok := ctx.Deadline()
	return ok && time.Until(deadline) < r.dispatch.Budgets().TakeOver() || ctx.Err() != nil
}

// reconcile decides (decide.Of) and performs the action for one row.
func (r *Reconciler) reconcile(ctx context.Context, rec ledger.Record) (act Action) {
	// The row's span joins (and links to) the trace of the delivery that
	// first claimed it: one message, one trace.
	ctx, span := tracing.StartMessage(ctx, tracing.SpanReconcile, rec.Trace, tracing.AttrKey.String(rec.Key), tracing.AttrChannel.String(rec.Channel))
	defer func() {
		span.SetAttributes(attribute.String("sendonce.action", string(act)))
		span.End()
	}()
	log := r.dispatch.Logger.With("key", rec.Key, "state", string(rec.State), "attempts", rec.Attempts, "class", rec.Class, "channel", rec.Channel)
	dims := []metrics.Dim{{Name: "channel", Value: rec.Channel}}
	// The row is resolved against the provider its attempt went through
	// and with the message it pins (dispatch.Decide).
	picked := r.dispatch.Pick(rec, r.dispatch.Route(rec.Channel))
	in := decide.Input{
		Caller: decide.Reconciler, Row: rec, Now: r.dispatch.Now(),
		Policy: r.cfg.Policies[rec.Class], Settle: r.dispatch.Settle, MaxAge: r.cfg.MaxAge, MaxAttempts: r.cfg.MaxAttempts,
	}
	d, found, rec, err := r.dispatch.Decide(ctx, in, picked)
	if err != nil {
		log.Warn("row left for a later run", "error", err)
		return ActionWaiting
	}
	switch d.Action {
	case decide.Acknowledge, decide.HandOff:
		return ActionConflict // the row changed since it was listed
	case decide.Wait:
		if d.Cause == decide.CauseInFlight {
			return ActionConflict
		}
		switch d.Cause {
		case decide.CausePaced:
			log.Debug("row left for a later run: paced", "why", d.Reason)
			return ActionPaced
		case decide.CauseProviderDown:
			log.Debug("row left for a later run: provider down", "why", d.Reason)
			return ActionProviderDown
		}
		if d.Cause == decide.CauseNoProvider {
			// The provider the attempt went through no longer serves the
			// channel (or none does): the row waits, counted and alarmed.
			r.dispatch.Metrics.Count(metrics.ConfigErrors, 1, dims...)
			log.Error("no provider serves the row: it waits", "reason", d.Reason, "provider", rec.Provider)
			return ActionWaiting
		}
		log.Debug("row left for a later run", "why", d.Reason)
		return ActionWaiting
	}
	res := r.dispatch.Resolve(ctx, rec, d, picked, found, r.dispatch.ClaimTimeout)
	if (res.Disposition == dispatch.Failed || res.Disposition == dispatch.Abandoned) && decide.IsExpired(d.Reason) {
		// Counted by the dispatcher's mark (Expired).
		log.Info("expired: never sent", "valid_until", rec.ValidUntil, "state", res.Disposition.String(), "reason", d.Reason)
		return ActionExpired
	}
	switch res.Disposition {
	case dispatch.Sent:
		if d.Action == decide.MarkSent {
			r.dispatch.Metrics.Count(metrics.ReconciledSent, 1, dims...)
			log.Info("reconciled by lookup", "action", string(ActionReconciledSent), "provider_message_id", found.MessageID)
			return ActionReconciledSent
		}
		r.dispatch.Metrics.Count(metrics.Resent, 1, dims...)
		log.Info("resent", "attempt", res.Attempt, "why", d.Reason)
		return ActionResent
	case dispatch.Failed:
		r.dispatch.Metrics.Count(metrics.ReconciledFailed, 1, dims...)
		log.Info("reconciled as failed", "reason", res.Reason)
		return ActionReconciledFailed
	case dispatch.Abandoned:
		r.dispatch.Metrics.Count(metrics.Abandoned, 1, dims...)
		log.Warn("abandoned", "reason", d.Reason)
		return ActionAbandoned
	case dispatch.Postponed:
		r.dispatch.Metrics.Count(metrics.ConfigErrors, 1, dims...)
		log.Error("no provider is configured for the channel: retried later", "reason", d.Reason)
		return ActionPostponed
	case dispatch.Uncertain, dispatch.Retry:
		return ActionWaiting
	case dispatch.TakeOverLost, dispatch.FencingLost:
		return ActionConflict
	}
	return ActionError
}

// dueAt is when a row became due (ledger.Due).
func dueAt(r ledger.Record) time.Time { return ledger.Due(r) }

// merger reads every shard of the attention index page by page and yields
// rows globally oldest due first (a k-way merge of the shards' ordered
// pages).
type merger struct {
	ledger ledger.Ledger
	due    time.Time
	from   time.Time // zero: from the oldest
	page   int
	heads  headHeap
	// stop reports that the run's budget is spent: no more pages are read.
	stop func() bool
	// truncated is set when a shard was left with a cursor unread.
	truncated bool
}

type shardHead struct {
	shard  int
	rows   []ledger.Record
	cursor string
}

type headHeap []*shardHead

func (h headHeap) Len() int           { return len(h) }
func (h headHeap) Less(i, j int) bool { return dueAt(h[i].rows[0]).Before(dueAt(h[j].rows[0])) }
func (h headHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *headHeap) Push(x any)        { *h = append(*h, x.(*shardHead)) }
func (h *headHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func (m *merger) init(ctx context.Context) error {
	for s := range ledger.AttentionShards {
		h := &shardHead{shard: s}
		if err := m.fill(ctx, h); err != nil {
			return fmt.Errorf("reconcile: read shard %d: %w", s, err)
		}
		if len(h.rows) > 0 {
			m.heads = append(m.heads, h)
		}
	}
	heap.Init(&m.heads)
	return nil
}

// fill reads h's next page, and further pages while they come back empty
// with a cursor (expired rows are filtered after the limit, so a page may
// hold none), until the run's budget is spent.
func (m *merger) fill(ctx context.Context, h *shardHead) error {
	for {
		pg, err := m.ledger.Attention(ctx, ledger.AttentionQuery{Shard: h.shard, DueBefore: m.due, DueFrom: m.from, Limit: m.page, Cursor: h.cursor})
		if err != nil {
			return err
		}
		h.rows, h.cursor = pg.Records, pg.Cursor
		if len(h.rows) > 0 || h.cursor == "" {
			return nil
		}
		if m.stop != nil && m.stop() {
			m.truncated = true
			return nil
		}
	}
}

func (m *merger) more() bool { return len(m.heads) > 0 }

func (m *merger) next(ctx context.Context) (ledger.Record, bool, error) {
	if len(m.heads) == 0 {
		return ledger.Record{}, false, nil
	}
	h := m.heads[0]
	rec := h.rows[0]
	h.rows = h.rows[1:]
	if len(h.rows) == 0 && h.cursor != "" {
		if err := m.fill(ctx, h); err != nil {
			return rec, true, fmt.Errorf("reconcile: read shard %d: %w", h.shard, err)
		}
	}
	if len(h.rows) == 0 {
		heap.Pop(&m.heads)
	} else {
		heap.Fix(&m.heads, 0)
	}
	return rec, true, nil
}
