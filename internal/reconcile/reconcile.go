// Package reconcile resolves the rows a sender could not finish: UNCERTAIN
// attempts (the provider may have the message) and PENDING claims whose
// lease passed (their worker died, and SQS may never redeliver them, e.g.
// after the message reached the dead-letter queue).
//
// It is a rescuer in the spirit of river's JobRescuer: each Run reads the
// sparse attention index across all shards, oldest due first, page by
// page, does bounded work, and stops before the invocation's deadline.
//
// For each row:
//
//  1. Attempts at the limit → ABANDONED.
//  2. A released claim (nothing was sent) → resend.
//  3. The provider can look the message up → ask it (no claim needed to
//     ask). Accepted → SENT; rejected → FAILED; no record → resend, but only
//     once Settle has passed since the attempt (before that a "no record"
//     may be lag, and the row is left for a later run).
//  4. The provider drops repeats (idempotent sends) → resend with the same
//     key: a repeat is harmless.
//  5. Otherwise the message class's Policy decides: resend or abandon.
//     Defaults: otp → resend (a duplicate code is harmless, a missing one
//     locks the user out); transactional → abandon unless the provider
//     drops repeats; marketing → abandon (a rare miss beats a paid
//     duplicate).
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
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/sendonce/sendonce/internal/dispatch"
	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/metrics"
	"github.com/sendonce/sendonce/internal/provider"
)

// Policy is what happens to an ambiguous attempt whose provider can
// neither look it up nor drop a repeat.
type Policy string

// The policies.
const (
	// Resend sends again with the same key, accepting a possible duplicate.
	Resend Policy = "resend"
	// ResendIfIdempotent resends only through a provider that drops
	// repeats; otherwise it abandons.
	ResendIfIdempotent Policy = "resend-if-idempotent"
	// Abandon marks the row ABANDONED, accepting a possible miss.
	Abandon Policy = "abandon"
)

// DefaultPolicies are the documented per-class defaults.
var DefaultPolicies = map[string]Policy{
	"otp":           Resend,
	"transactional": ResendIfIdempotent,
	"marketing":     Abandon,
}

// Defaults of the configuration.
const (
	DefaultSettle      = 2 * time.Minute
	DefaultMaxAttempts = 5
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
	Ledger ledger.Ledger
	// Providers maps a channel to its provider.
	Providers map[string]provider.Sender
	Metrics   metrics.Recorder
	Logger    *slog.Logger
	// ProviderTimeout bounds one provider call.
	ProviderTimeout time.Duration
	// ClaimTimeout is the lease of the reconciler's own claims.
	ClaimTimeout time.Duration
	// Settle is how long after an attempt a provider's "no record" answer
	// is trusted. Default 2 minutes.
	Settle time.Duration
	// MaxAttempts is the number of attempts after which a row is
	// abandoned. Default 5.
	MaxAttempts int
	// Policies overrides DefaultPolicies per class.
	Policies map[string]Policy
	// PageSize is the number of rows read per index query. Default 25.
	PageSize int
	// MaxRows bounds the rows examined in one Run. Default 1000.
	MaxRows int
	// Concurrency bounds the rows handled at once. Default 4.
	Concurrency int
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Reconciler resolves rows that need attention.
type Reconciler struct {
	cfg      Config
	dispatch *dispatch.Dispatcher
}

// New validates cfg, fills in defaults and returns a Reconciler.
func New(cfg Config) (*Reconciler, error) {
	switch {
	case cfg.Ledger == nil:
		return nil, errors.New("reconcile: a ledger is required")
	case cfg.ProviderTimeout <= 0:
		return nil, errors.New("reconcile: the provider timeout must be positive")
	case cfg.ClaimTimeout <= cfg.ProviderTimeout:
		return nil, fmt.Errorf("reconcile: the claim timeout (%s) must exceed the provider timeout (%s)", cfg.ClaimTimeout, cfg.ProviderTimeout)
	case cfg.Settle < 0 || cfg.MaxAttempts < 0 || cfg.PageSize < 0 || cfg.MaxRows < 0 || cfg.Concurrency < 0:
		return nil, errors.New("reconcile: settle, attempts, page size, rows and concurrency must not be negative")
	}
	cfg.Settle = cmp.Or(cfg.Settle, DefaultSettle)
	cfg.MaxAttempts = cmp.Or(cfg.MaxAttempts, DefaultMaxAttempts)
	cfg.PageSize = cmp.Or(cfg.PageSize, DefaultPageSize)
	cfg.MaxRows = cmp.Or(cfg.MaxRows, DefaultMaxRows)
	cfg.Concurrency = cmp.Or(cfg.Concurrency, DefaultConcurrency)
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.Discard
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
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
	return &Reconciler{cfg: cfg, dispatch: &dispatch.Dispatcher{
		Ledger:          cfg.Ledger,
		Metrics:         cfg.Metrics,
		Logger:          cfg.Logger,
		ProviderTimeout: cfg.ProviderTimeout,
		Now:             cfg.Now,
		Service:         "reconciler",
	}}, nil
}

// Action is what a Run did with one row.
type Action string

// The actions.
const (
	ActionReconciledSent   Action = "reconciled_sent"
	ActionReconciledFailed Action = "reconciled_failed"
	ActionResent           Action = "resent"
	ActionAbandoned        Action = "abandoned"
	// ActionWaiting: left for a later run (settling, lookup failed, resend
	// must be retried).
	ActionWaiting Action = "waiting"
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
	now := r.cfg.Now()
	// DueBefore is exclusive and the ledger keeps milliseconds: a row that
	// fell due this very millisecond is due.
	it := &merger{ledger: r.cfg.Ledger, due: now.Add(time.Millisecond), page: r.cfg.PageSize}
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
			rep.Truncated = it.more()
			break
		}
		rec, ok, err := it.next(ctx)
		if err != nil {
			r.cfg.Logger.Error("read attention index", "error", err)
			rep.Truncated = true
			break
		}
		if !ok {
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
		r.cfg.Metrics.Latency(metrics.ReconcileBacklogAge, rep.OldestDue)
	}
	return rep, nil
}

// nearDeadline reports whether too little time is left to finish one more
// row: a lookup and a send, each up to the provider timeout, plus margin.
func (r *Reconciler) nearDeadline(ctx context.Context) bool {
	// Deadlines are wall-clock time, whatever clock the rows are judged by.
	deadline, ok := ctx.Deadline()
	return ok && time.Until(deadline) < 2*r.cfg.ProviderTimeout+2*time.Second || ctx.Err() != nil
}

// reconcile decides and performs the action for one row.
func (r *Reconciler) reconcile(ctx context.Context, rec ledger.Record) Action {
	now := r.cfg.Now()
	log := r.cfg.Logger.With("key", rec.Key, "state", string(rec.State), "attempts", rec.Attempts, "class", rec.Class, "channel", rec.Channel)
	dims := []metrics.Dim{{Name: "channel", Value: rec.Channel}}
	if rec.State == ledger.StatePending && !rec.Stale(now) {
		return ActionConflict
	}
	p := r.cfg.Providers[rec.Channel]
	switch {
	case rec.Attempts >= r.cfg.MaxAttempts:
		return r.abandon(ctx, log, rec, dims, fmt.Sprintf("gave up after %d attempts", rec.Attempts))
	case p == nil:
		return r.abandon(ctx, log, rec, dims, "no provider is configured for channel "+rec.Channel)
	case rec.Released:
		return r.resend(ctx, log, rec, p, dims)
	}
	if l, ok := p.(provider.Looker); ok && p.Capabilities().LookupByReference {
		return r.lookup(ctx, log, rec, p, l, dims, now)
	}
	if p.Capabilities().IdempotentSends {
		return r.resend(ctx, log, rec, p, dims)
	}
	switch r.cfg.Policies[rec.Class] {
	case Resend:
		return r.resend(ctx, log, rec, p, dims)
	default: // Abandon, ResendIfIdempotent (the provider is not), unknown class
		return r.abandon(ctx, log, rec, dims, fmt.Sprintf("class %s policy: abandon an ambiguous attempt the provider cannot look up or dedupe", rec.Class))
	}
}

func (r *Reconciler) lookup(ctx context.Context, log *slog.Logger, rec ledger.Record, p provider.Sender, l provider.Looker, dims []metrics.Dim, now time.Time) Action {
	callCtx, cancel := context.WithTimeout(ctx, r.cfg.ProviderTimeout)
	res, err := l.Lookup(callCtx, dispatch.Message(ledger.Claim{Key: rec.Key, AttemptedAt: rec.AttemptedAt}, rec.Entry))
	cancel()
	if err != nil {
		log.Warn("lookup failed: row left for the next run", "reason", provider.ReasonOf(err))
		return ActionWaiting
	}
	switch res.Status {
	case provider.LookupAccepted, provider.LookupRejected:
		c, ok := r.takeOver(ctx, log, rec)
		if !ok {
			return ActionConflict
		}
		o := ledger.Outcome{State: ledger.StateSent, ProviderMessageID: res.MessageID}
		metric, action := metrics.ReconciledSent, ActionReconciledSent
		if res.Status == provider.LookupRejected {
			o = ledger.Outcome{State: ledger.StateFailed, ProviderMessageID: res.MessageID, Reason: res.Reason}
			metric, action = metrics.ReconciledFailed, ActionReconciledFailed
		}
		if d := r.dispatch.Mark(ctx, c, rec.Entry, p.Name(), o); d.Outcome != dispatch.Sent && d.Outcome != dispatch.Failed {
			return ActionError
		}
		r.cfg.Metrics.Count(metric, 1, dims...)
		log.Info("reconciled by lookup", "action", string(action), "provider_message_id", res.MessageID)
		return action
	}
	if since := now.Sub(rec.AttemptedAt); since < r.cfg.Settle {
		log.Debug("no record at the provider yet: settling", "since_attempt", since)
		return ActionWaiting
	}
	return r.resend(ctx, log, rec, p, dims)
}

func (r *Reconciler) resend(ctx context.Context, log *slog.Logger, rec ledger.Record, p provider.Sender, dims []metrics.Dim) Action {
	c, ok := r.takeOver(ctx, log, rec)
	if !ok {
		return ActionConflict
	}
	res := r.dispatch.Send(ctx, c, rec.Entry, p)
	switch res.Outcome {
	case dispatch.Sent:
		r.cfg.Metrics.Count(metrics.Resent, 1, dims...)
		log.Info("resent", "attempt", c.Attempt)
		return ActionResent
	case dispatch.Failed:
		r.cfg.Metrics.Count(metrics.ReconciledFailed, 1, dims...)
		log.Info("resend rejected", "reason", res.Reason)
		return ActionReconciledFailed
	case dispatch.Uncertain, dispatch.Retry:
		return ActionWaiting
	case dispatch.FencingLost:
		return ActionConflict
	default:
		return ActionError
	}
}

func (r *Reconciler) abandon(ctx context.Context, log *slog.Logger, rec ledger.Record, dims []metrics.Dim, reason string) Action {
	c, ok := r.takeOver(ctx, log, rec)
	if !ok {
		return ActionConflict
	}
	d := r.dispatch.Mark(ctx, c, rec.Entry, rec.Provider, ledger.Outcome{State: ledger.StateAbandoned, Reason: reason})
	if d.Err != nil {
		return ActionError
	}
	r.cfg.Metrics.Count(metrics.Abandoned, 1, dims...)
	log.Warn("abandoned", "reason", reason)
	return ActionAbandoned
}

// takeOver claims rec for this reconciler, fenced on the ClaimID read.
func (r *Reconciler) takeOver(ctx context.Context, log *slog.Logger, rec ledger.Record) (ledger.Claim, bool) {
	c, err := r.cfg.Ledger.TakeOver(ctx, rec, r.cfg.ClaimTimeout)
	if err != nil {
		if _, conflict := ledger.AsConflict(err); conflict || errors.Is(err, ledger.ErrNotFound) {
			log.Info("row changed since it was read: another worker has it")
		} else {
			log.Error("take over", "error", err)
		}
		return ledger.Claim{}, false
	}
	return c, true
}

// dueAt is when a row became due: a PENDING row when its lease passed, an
// UNCERTAIN row when it was marked.
func dueAt(r ledger.Record) time.Time {
	if r.State == ledger.StatePending {
		return r.LeaseUntil
	}
	return r.UpdatedAt
}

// merger reads every shard of the attention index page by page and yields
// rows globally oldest due first (a k-way merge of the shards' ordered
// pages).
type merger struct {
	ledger ledger.Ledger
	due    time.Time
	page   int
	heads  headHeap
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

func (m *merger) fill(ctx context.Context, h *shardHead) error {
	pg, err := m.ledger.Attention(ctx, ledger.AttentionQuery{Shard: h.shard, DueBefore: m.due, Limit: m.page, Cursor: h.cursor})
	if err != nil {
		return err
	}
	h.rows, h.cursor = pg.Records, pg.Cursor
	return nil
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
