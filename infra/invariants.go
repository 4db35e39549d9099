package infra

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/sendonce/sendonce/internal/decide"
)

// The margins the invariants demand.
const (
	// VisibilityFactor: the queue's visibility timeout must be at least this
	// many sender timeouts (plus the batching window), AWS's guidance for
	// Lambda SQS event sources, so a batch still running is never handed
	// to a second worker.
	VisibilityFactor = 6
)

// ReconcileHorizon bounds how long after its message's last possible
// redelivery a ledger row may still be reconciled (the schedule times the
// attempts, plus outages). No function reads it, so it is a planning
// bound of the retention invariant rather than a template parameter.
const ReconcileHorizon = 24 * time.Hour

// ErrInvariant is matched (errors.Is) by every error Check returns because
// the parameter values break the invariant (rather than because they
// could not be read).
var ErrInvariant = errors.New("infra: invariant broken")

// The template parameters the invariants relate. cfn-lint rule E9110
// (scripts/cfnlint_rules) checks that each sets the property named here,
// and that the reconciler leaves SENDONCE_MAX_AGE at decide.DefaultMaxAge.
const (
	senderTimeout  = "SenderTimeoutSeconds"           // SenderFunction Timeout
	visibility     = "QueueVisibilityTimeoutSeconds"  // NotificationQueue VisibilityTimeout
	batchingWindow = "MaximumBatchingWindowInSeconds" // the sender's SQS event source
	provider       = "ProviderTimeoutSeconds"         // SENDONCE_PROVIDER_TIMEOUT (sender, reconciler)
	claim          = "ClaimTimeoutSeconds"            // SENDONCE_CLAIM_TIMEOUT (sender, reconciler)
	receives       = "MaxReceiveCount"                // NotificationQueue RedrivePolicy
	queueRetention = "QueueRetentionSeconds"          // NotificationQueue MessageRetentionPeriod
	dlqRetention   = "DLQRetentionSeconds"            // NotificationDLQ MessageRetentionPeriod
	retention      = "RetentionHours"                 // SENDONCE_RETENTION (every function that sets it)
)

// Invariant is one arithmetic property between template parameters: a
// duration they give must be at least another they give.
type Invariant struct {
	// Name identifies the invariant (a test's subtest name).
	Name string
	// Why explains what breaks when it does not hold.
	Why string
	// DeployTime is true when the parameters' allowed ranges and the
	// template's Rules make CloudFormation reject every combination that
	// breaks the invariant. Otherwise only the defaults are known to hold
	// it: Rules cannot do arithmetic, and the parameters it relates take
	// ranges that Rules cannot enumerate.
	DeployTime bool
	// Params are the parameters it relates.
	Params []string
	// Rule is the inequality, for messages.
	Rule string
	// sides returns its two sides; it holds when have >= need.
	sides func(p *params) (have, need time.Duration)
}

// Invariants lists the arithmetic invariants template.yaml must hold.
var Invariants = []Invariant{
	{"VisibilityCoversSenderTimeout", "a batch still running becomes visible again and a second worker takes it", true,
		[]string{visibility, senderTimeout}, "visibility ≥ 6 × sender timeout",
		func(p *params) (time.Duration, time.Duration) {
			return p.sec(visibility), VisibilityFactor * p.sec(senderTimeout)
		}},
	{"VisibilityCoversBatchingWindow", "a batch gathered for the whole window and then running becomes visible again", false,
		[]string{visibility, senderTimeout, batchingWindow}, "visibility ≥ 6 × sender timeout + batching window",
		func(p *params) (time.Duration, time.Duration) {
			return p.sec(visibility), VisibilityFactor*p.sec(senderTimeout) + p.sec(batchingWindow)
		}},
	{"ClaimOutlivesProviderCall", "a second worker takes the key over while the first is still sending", true,
		[]string{claim, provider}, "claim ≥ decide.TakeOverBudget(provider timeout) = 2 × provider timeout + margin",
		func(p *params) (time.Duration, time.Duration) {
			return p.sec(claim), decide.TakeOverBudget(p.sec(provider))
		}},
	// Receives come at 0, V, ..., (N-1)·V after the first; a claim is
	// taken up to one sender timeout (plus the batching window) after the
	// receive that delivered it, and lives one claim timeout. The last
	// receive takes a dead worker's claim over only if it comes after the
	// lease passed: (N-1)·V ≥ claim + sender timeout + batching window.
	// Otherwise the message is dead-lettered as an unindexed first claim.
	{"RedeliveryOutlivesClaim", "the last receive of a message whose first worker died lands on a live lease, and the message is dead-lettered as an unindexed first claim", true,
		[]string{receives, visibility, claim, senderTimeout, batchingWindow}, "(maxReceiveCount − 1) × visibility ≥ claim + sender timeout + batching window",
		func(p *params) (time.Duration, time.Duration) {
			return time.Duration(p.n(receives)-1) * p.sec(visibility), p.sec(claim) + p.sec(senderTimeout) + p.sec(batchingWindow)
		}},
	{"LedgerOutlivesMessages", "a late redelivery finds no ledger row and sends again", false,
		[]string{retention, queueRetention, dlqRetention}, "ledger retention ≥ queue + DLQ retention + reconcile horizon",
		func(p *params) (time.Duration, time.Duration) {
			return p.hours(retention), p.sec(queueRetention) + p.sec(dlqRetention) + ReconcileHorizon
		}},
	{"DLQOutlivesQueue", "a dead-lettered message expires before anyone can look at it", false,
		[]string{dlqRetention, queueRetention}, "DLQ retention ≥ queue retention",
		func(p *params) (time.Duration, time.Duration) { return p.sec(dlqRetention), p.sec(queueRetention) }},
	{"MaxAgeCoversRedelivery", "the reconciler abandons a message SQS may still deliver", false,
		[]string{queueRetention, dlqRetention}, "reconciler max age (decide.DefaultMaxAge) ≥ queue + DLQ retention",
		func(p *params) (time.Duration, time.Duration) {
			return decide.DefaultMaxAge, p.sec(queueRetention) + p.sec(dlqRetention)
		}},
	{"RetentionOutlivesMaxAge", "a row the reconciler still works on expires", false,
		[]string{retention}, "ledger retention ≥ reconciler max age (decide.DefaultMaxAge) + reconcile horizon",
		func(p *params) (time.Duration, time.Duration) {
			return p.hours(retention), decide.DefaultMaxAge + ReconcileHorizon
		}},
}

// params reads an invariant's parameters from one set of values.
type params struct {
	inv *Invariant
	v   Values
	err error // the first parameter that is not an integer or not in inv.Params
}

func (p *params) n(name string) int {
	x, err := strconv.Atoi(p.v[name])
	if err != nil || !slices.Contains(p.inv.Params, name) {
		p.err = cmp.Or(p.err, fmt.Errorf("%w: %s: parameter %s = %q", ErrUnresolved, p.inv.Name, name, p.v[name]))
	}
	return x
}

func (p *params) sec(name string) time.Duration   { return time.Duration(p.n(name)) * time.Second }
func (p *params) hours(name string) time.Duration { return time.Duration(p.n(name)) * time.Hour }

// Check returns nil when parameter values p hold inv, an error matching
// ErrInvariant when they break it, and an error matching ErrUnresolved
// when one of inv's parameters has no integer value.
func (inv Invariant) Check(p Values) error {
	in := &params{inv: &inv, v: p}
	have, need := inv.sides(in)
	if in.err != nil {
		return in.err
	}
	if have < need {
		vals := ""
		for _, name := range inv.Params {
			vals += name + "=" + p[name] + " "
		}
		return fmt.Errorf("%w: %s: %s: %v < %v", ErrInvariant, vals[:len(vals)-1], inv.Rule, have, need)
	}
	return nil
}

// Counterexamples returns every combination of the extremes (Extremes) of
// inv's parameters that the template's Rules accept and that breaks inv;
// every other parameter keeps its default.
func (t *Template) Counterexamples(inv Invariant) ([]Values, error) {
	var bad []Values
	for _, p := range t.combinations(inv.Params) {
		err := inv.Check(p)
		if err != nil && !errors.Is(err, ErrInvariant) {
			return nil, err
		}
		if vs, verr := t.Violations(p); verr != nil {
			return nil, verr
		} else if err != nil && len(vs) == 0 {
			bad = append(bad, p)
		}
	}
	return bad, nil
}
