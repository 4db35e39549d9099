package sendonce

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sendonce/sendonce/internal/decide"
	"github.com/sendonce/sendonce/internal/opstate"
	"github.com/sendonce/sendonce/internal/reconcile"
	"github.com/sendonce/sendonce/internal/render"
	"github.com/sendonce/sendonce/notify"
)

// Policy is what the reconciler does with an ambiguous attempt whose
// provider can neither be asked about it nor drop a repeat.
type Policy string

// The policies.
const (
	// Resend sends again with the same key, accepting a possible
	// duplicate (an OTP: a second code beats none).
	Resend Policy = Policy(decide.PolicyResend)
	// ResendIfIdempotent resends only through a provider that drops
	// repeats, and otherwise gives the message up.
	ResendIfIdempotent Policy = Policy(decide.PolicyResendIfIdempotent)
	// Abandon gives the message up (ABANDONED), accepting a possible miss
	// (marketing: a second copy is worse than none).
	Abandon Policy = Policy(decide.PolicyAbandon)
)

// ParsePolicies parses per-class policies written as
// "class=policy,class=policy" (SENDONCE_RECONCILE_POLICIES), for
// ReconcilerConfig.Policies.
func ParsePolicies(s string) (map[notify.Class]Policy, error) {
	in, err := reconcile.ParsePolicies(s)
	if err != nil {
		return nil, err
	}
	out := make(map[notify.Class]Policy, len(in))
	for class, p := range in {
		out[notify.Class(class)] = Policy(p)
	}
	return out, nil
}

// ReconcilerConfig is what a Reconciler is built from. NewReconciler
// validates it; zero fields take the defaults docs/configuration.md lists.
type ReconcilerConfig struct {
	// Ledger holds the rows to settle. Required.
	Ledger *Ledger
	// Routes are the channels' providers, as the sender's: a row is
	// always settled against the provider its attempt went through.
	Routes Routes
	// Policies overrides the default policy of a class (otp: Resend,
	// transactional: ResendIfIdempotent, marketing: Abandon).
	Policies map[notify.Class]Policy
	// Metrics receives the reconciler's metrics; nil records none.
	Metrics Metrics
	// Logger receives the reconciler's log lines; nil logs nothing.
	Logger *slog.Logger
	// RedactionKey keys the address tokens of its log lines, as the
	// sender's (SenderConfig.RedactionKey).
	RedactionKey []byte
	// ProviderTimeout, ClaimTimeout and LedgerMargin are the sender's
	// (SenderConfig): no row is taken over with less than 2 ×
	// ProviderTimeout + LedgerMargin left before Run's deadline.
	ProviderTimeout time.Duration
	ClaimTimeout    time.Duration
	LedgerMargin    time.Duration
	// Settle is how long after an attempt a provider's "no record" answer
	// is trusted.
	Settle time.Duration
	// MaxAge is how long after its first claim an unsettled row is given
	// up (ABANDONED).
	MaxAge time.Duration
	// RetryBase is the base of the backoff of released rows.
	RetryBase time.Duration
	// MaxAttempts bounds the attempts that may have reached the provider
	// before a resend the provider cannot drop is given up instead.
	MaxAttempts int
	// MaxRows bounds the rows one Run examines, or one Find hands out.
	MaxRows int
	// PageSize is the number of rows read per query of the attention
	// index (25 when zero; the SAM application's Find reads 1,000).
	PageSize int
	// Concurrency bounds the rows settled at once (by Run, or by
	// HandleSQS within one unit of work).
	Concurrency int
}

// Reconciler settles the rows the senders could not finish: uncertain
// attempts, released claims and dead workers' leases. Run it on a
// schedule (the SAM application runs it every minute).
type Reconciler struct {
	r   *reconcile.Reconciler
	log *slog.Logger
	// ops records each run (Run, Find) for `sendonce status`.
	ops opstate.Store
}

// NewReconciler validates cfg and returns a Reconciler.
func NewReconciler(cfg ReconcilerConfig) (*Reconciler, error) {
	if cfg.Ledger == nil {
		return nil, errors.New("sendonce: new reconciler: a ledger is required")
	}
	policies := make(map[string]reconcile.Policy, len(cfg.Policies))
	for class, p := range cfg.Policies {
		policies[string(class)] = reconcile.Policy(p)
	}
	// A resend renders a stored template's version again (versions are
	// immutable: no cache applies to them).
	d, err := newDispatcher(cfg.Ledger, cfg.Routes, render.Config{}, cfg.Metrics, cfg.Logger, timing{
		provider: cfg.ProviderTimeout, claim: cfg.ClaimTimeout, settle: cfg.Settle, retryBase: cfg.RetryBase, margin: cfg.LedgerMargin, redactionKey: cfg.RedactionKey,
	})
	if err != nil {
		return nil, fmt.Errorf("sendonce: new reconciler: %w", err)
	}
	rcfg := reconcile.Config{
		Dispatcher:  d,
		Policies:    policies,
		MaxAge:      cfg.MaxAge,
		MaxAttempts: cfg.MaxAttempts,
		MaxRows:     cfg.MaxRows,
		PageSize:    cfg.PageSize,
		Concurrency: cfg.Concurrency,
	}
	if cfg.Ledger.db != nil {
		// The providers' down and up states (Find, Watch).
		rcfg.Status = opstate.Store{DB: cfg.Ledger.db, Table: cfg.Ledger.table}
	}
	r, err := reconcile.New(rcfg)
	if err != nil {
		return nil, fmt.Errorf("sendonce: new reconciler: %w", err)
	}
	rc := &Reconciler{r: r, log: logger(cfg.Logger)}
	if cfg.Ledger.db != nil {
		rc.ops = opstate.Store{DB: cfg.Ledger.db, Table: cfg.Ledger.table}
	}
	return rc, nil
}

// ReconcileReport sums up one Run, in the JSON shape the SAM
// application's reconciler function returns.
type ReconcileReport struct {
	// Examined is the number of rows the run looked at.
	Examined int `json:"examined"`
	// Actions counts what the run did with the rows, by action.
	Actions map[Action]int `json:"actions"`
	// OldestDueMillis is how long the oldest row seen had been due.
	OldestDueMillis int64 `json:"oldest_due_ms"`
	// Truncated is true when the run stopped early (its deadline or
	// MaxRows) with rows left for the next.
	Truncated bool `json:"truncated"`
}

// Action is what a reconciler did with one row, as ReconcileReport
// counts it.
type Action string

// The actions.
const (
	// ActionReconciledSent: a lookup found the message sent; the row is SENT.
	ActionReconciledSent Action = Action(reconcile.ActionReconciledSent)
	// ActionReconciledFailed: a lookup found it failed; the row is FAILED.
	ActionReconciledFailed Action = Action(reconcile.ActionReconciledFailed)
	// ActionResent: sent again with the same key.
	ActionResent Action = Action(reconcile.ActionResent)
	// ActionAbandoned: given up under the class's policy or the row's age.
	ActionAbandoned Action = Action(reconcile.ActionAbandoned)
	// ActionExpired: past its validity; ended without a send.
	ActionExpired Action = Action(reconcile.ActionExpired)
	// ActionPostponed: its channel has no provider; due again after its
	// backoff (a configuration error).
	ActionPostponed Action = Action(reconcile.ActionPostponed)
	// ActionWaiting: left for a later run (settling, a lookup failed).
	ActionWaiting Action = Action(reconcile.ActionWaiting)
	// ActionPaced: the provider's send rate was spent; left as it is.
	ActionPaced Action = Action(reconcile.ActionPaced)
	// ActionProviderDown: every provider that may take it is known down;
	// left as it is.
	ActionProviderDown Action = Action(reconcile.ActionProviderDown)
	// ActionConflict: another worker holds or took the row.
	ActionConflict Action = Action(reconcile.ActionConflict)
	// ActionError: the ledger failed; the row is due again.
	ActionError Action = Action(reconcile.ActionError)
	// ActionNotDue: a handed-out row was settled or not due any more.
	ActionNotDue Action = Action(reconcile.ActionNotDue)
	// ActionDeferred: a handed-out row was left for the next hand-out
	// (an earlier row of its lane found the provider paced or down).
	ActionDeferred Action = Action(reconcile.ActionDeferred)
)

// Run settles the rows due now, up to MaxRows and ctx's deadline. An
// error means the run could not read the ledger; rows it settled before
// stay settled.
func (r *Reconciler) Run(ctx context.Context) (ReconcileReport, error) {
	rep, err := r.r.Run(ctx)
	out := ReconcileReport{Examined: rep.Examined, Actions: make(map[Action]int, len(rep.Actions)), OldestDueMillis: rep.OldestDue.Milliseconds(), Truncated: rep.Truncated}
	for a, n := range rep.Actions {
		out.Actions[Action(a)] = n
	}
	if err == nil {
		r.recordRun(ctx, out)
	}
	return out, err
}

// ReconcileQueue is the queue a Reconciler hands units of work out to
// (Find) and reconcile workers take them from (HandleSQS): in the SAM
// application, the SQS queue ReconcileUnitQueue.
type ReconcileQueue struct {
	q reconcile.Queue
}

// NewSQSReconcileQueue returns the ReconcileQueue of the SQS queue at
// queueURL.
func NewSQSReconcileQueue(client *sqs.Client, queueURL string) *ReconcileQueue {
	return &ReconcileQueue{q: &reconcile.SQSQueue{Client: client, QueueURL: queueURL}}
}

// FindReport sums up one Find, in the JSON shape the SAM application's
// reconciler function returns when it hands the work out.
type FindReport struct {
	// Found is the number of due rows handed out.
	Found int `json:"found"`
	// Units is the number of units handed out.
	Units int `json:"units"`
	// Lost is the number of units the queue did not take.
	Lost int `json:"lost"`
	// Busy is set when Find handed nothing out because units were still
	// waiting on the queue (Waiting is their number).
	Busy    bool `json:"busy"`
	Waiting int  `json:"waiting"`
	// OldestDueMillis is how long the oldest row found had been due.
	OldestDueMillis int64 `json:"oldest_due_ms"`
	// Truncated is set when rows were left (MaxRows or the deadline).
	Truncated bool `json:"truncated"`
}

// Find reads the rows due now from the attention index, oldest first, and
// hands them out to q in units of 25 keys, up to MaxRows rows; while units
// are still waiting on q it hands out nothing (the workers are behind).
// A unit that is lost or handed out twice is harmless: its rows stay in
// the index until settled, and every change is a fenced takeover.
func (r *Reconciler) Find(ctx context.Context, q *ReconcileQueue) (FindReport, error) {
	rep, err := r.r.Find(ctx, q.q)
	if err == nil {
		r.recordRun(ctx, FindReport(rep))
	}
	return FindReport(rep), err
}

// Watch is what the scheduled run does after its Find, which began at
// since and reported rep: while a provider is recorded down and has not
// answered again since, or rep left rows due, it stays alive, reading
// the providers' states and q's depth every 2 seconds, and hands out
// again at once when a provider answers again after an outage or when
// the workers have taken every unit; it returns 5 seconds before the
// next scheduled run (a minute after since) or before ctx's deadline.
// It returns what it handed out (zero when nothing), and watches
// nothing on a ledger not on DynamoDB. The SAM application's reconciler
// function calls it after each Find: a recovered provider's backlog is
// handed out within seconds, not at the next run.
func (r *Reconciler) Watch(ctx context.Context, q *ReconcileQueue, since time.Time, rep FindReport) (FindReport, error) {
	out, finds, err := r.r.Watch(ctx, q.q, since, reconcile.FindReport(rep), since.Add(reconcile.DefaultSchedule-reconcile.WatchMargin))
	if finds > 0 && err == nil {
		r.recordRun(ctx, FindReport(out))
	}
	return FindReport(out), err
}

// recordRun records a run that ended now with its report, for `sendonce
// status` (package opstate; a ledger on DynamoDB only). A failure to
// record is logged, never the run's.
func (r *Reconciler) recordRun(ctx context.Context, report any) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	if err := r.ops.ReconcileRun(ctx, time.Now(), report); err != nil {
		r.log.Warn("record the reconcile run", "error", err)
	}
}

// HandleSQS is a reconcile worker's step: each record of ev is a unit
// Find handed out; each row it names is read again and settled if it is
// still due, as Run does. A unit its deadline interrupted is returned as a
// batch item failure, so SQS hands it out again.
func (r *Reconciler) HandleSQS(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	return r.r.HandleSQS(ctx, ev, r.log), nil
}
