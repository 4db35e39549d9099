package reconcile

import (
	"cmp"
	"context"
	"math"
	"strings"
	"time"

	"github.com/sendonce/sendonce/internal/pace"
)

// # The self-tuning drain
//
// After an outage the provider's rate is the only resource, and the
// template's defaults must keep it busy whatever that rate is, with no
// arithmetic by an operator. So Find sizes each lane's hand-out, and the
// workers' concurrency, from the rate of the lane's provider
// (SENDONCE_PROVIDER_RATES, the rate the pacer keeps):
//
//   - the rows a worker settles a second are its concurrency ÷ RowTime,
//     so a lane whose provider takes R sends a second needs a concurrency
//     of R × RowTime ÷ Workers in each of the Workers workers; Find puts
//     it in the lane's units (Unit.Concurrency, at least Config.Concurrency,
//     at most MaxConcurrency), and makes the units MaxUnitRounds times
//     as large (at least Config.UnitSize, at most MaxUnitSize keys), so
//     that a worker's rows keep its concurrency busy;
//   - a lane's hand-out is what its provider takes in HandOutRounds
//     Schedules, at the rate the workers can reach (Tune.Rate), and at
//     least its fair share of MaxRows: MaxRows is a floor, not the
//     ceiling it was;
//   - MaxConcurrency keeps the drain within DynamoDB's limits that
//     docs/scale.md lists: Workers (10) × MaxConcurrency ÷ RowTime is
//     15,000 rows a second. The table's default 40,000 write units a
//     second take it (about 2.1 writes a row: 31,500), and the attention
//     index's 64 shards (ledger.AttentionShards; a settled row writes
//     the index two or three times: 30,000 to 45,000 writes a second,
//     about 700 a shard of the 1,000 a partition takes). It was 120
//     (6,000 rows a second) while the index had 16 shards. Lambda: the
//     workers are still Workers executions; a worker's rows at once are
//     goroutines of one execution.
//
// A lane whose provider is not paced keeps the defaults: its rate is
// unknown, and MaxRows bounds its hand-out as before.

// Tuning defaults and bounds.
const (
	// DefaultSchedule is Find's period in the template (rate(1 minute)).
	DefaultSchedule = time.Minute
	// DefaultWorkers is the template's ReconcileWorkerConcurrency.
	DefaultWorkers = 10
	// RowTime is a row's time in a worker: a GetItem, a takeover, the
	// provider's call and a mark (150–350 ms measured, docs/scale.md).
	RowTime = 200 * time.Millisecond
	// MaxConcurrency bounds a worker's rows at once (DynamoDB's
	// limits, above).
	MaxConcurrency = 300
	// MaxUnitRounds is how many rounds of its concurrency a unit holds.
	MaxUnitRounds = 4
	// MaxUnitSize bounds a unit's keys (about 70 bytes each: 84 KB of
	// SQS's 256 KB).
	MaxUnitSize = 1200
	// HandOutRounds is how many Schedules of the provider's rate a lane
	// is handed out: more than one, so that the workers still have rows
	// when the next run comes (it hands out nothing while units wait),
	// although some rows need no send (settled meanwhile, or a lookup).
	HandOutRounds = 2
)

// Tuning is how Find hands out one lane (Tune).
type Tuning struct {
	// Rate is the sends a second the lane's workers aim at: the
	// provider's rate, at most what the workers reach at
	// MaxConcurrency; zero when the provider is not paced.
	Rate int
	// Concurrency is a worker's rows at once on the lane's units.
	Concurrency int
	// UnitSize is the keys of one of the lane's units.
	UnitSize int
	// Rows is the lane's hand-out in one Find (before the fair share of
	// MaxRows, which may raise it).
	Rows int
}

// Tune returns the tuning of a lane whose provider's configured rate is
// rate sends a second (zero: not paced), under cfg (New's defaults
// filled in).
func Tune(cfg Config, rate int) Tuning {
	if rate <= 0 {
		return Tuning{Concurrency: cfg.Concurrency, UnitSize: cfg.UnitSize}
	}
	maxRate := cmp.Or(cfg.MaxRate, cfg.Workers*MaxConcurrency*int(time.Second/RowTime))
	t := Tuning{Rate: min(rate, maxRate)}
	need := int(math.Ceil(float64(t.Rate) * RowTime.Seconds() / float64(cfg.Workers)))
	t.Concurrency = min(max(need, cfg.Concurrency), MaxConcurrency)
	t.UnitSize = min(max(t.Concurrency*MaxUnitRounds, cfg.UnitSize), MaxUnitSize)
	t.Rows = int(float64(t.Rate)*cfg.Schedule.Seconds()) * HandOutRounds
	return t
}

// Rater is a provider adapter that knows its configured rate
// (pace.Adapter).
type Rater interface {
	Rate() int
}

// laneRate returns the configured rate of lane's provider, zero when it
// is not paced (or not configured).
func (r *Reconciler) laneRate(channel, providerName string) int {
	for _, p := range r.dispatch.Route(channel) {
		if p == nil || p.Name() != providerName {
			continue
		}
		if rt, ok := p.(Rater); ok {
			return rt.Rate()
		}
	}
	return 0
}

// holder is a provider adapter whose rate the workers can hold for the
// backlog (pace.Adapter.Hold).
type holder interface {
	Hold(ctx context.Context, h pace.Hold) error
}

// hold records u's hold (Unit.Hold) with its provider's pacer, until
// until (HoldFor from now when a unit starts): while the worker starts units of the lane, sends
// that come after the hand-out's cut yield to them (pace, "Earliest
// deadline first"). A hold that cannot be written is logged: the
// backlog then competes with new messages first come, as before.
func (r *Reconciler) hold(ctx context.Context, u Unit, until time.Time) {
	if u.Hold == nil || u.Hold.Rate <= 0 {
		return
	}
	channel, name, ok := strings.Cut(u.Lane, "/")
	if !ok {
		return
	}
	for _, p := range r.dispatch.Route(channel) {
		if p == nil || p.Name() != name {
			continue
		}
		if h, ok := p.(holder); ok {
			hd := *u.Hold
			hd.Until = until
			if err := h.Hold(ctx, hd); err != nil {
				r.dispatch.Logger.Warn("hold the provider's rate for the backlog", "lane", u.Lane, "error", err)
			}
		}
		return
	}
}

// Config returns r's configuration, with New's defaults filled in.
func (r *Reconciler) Config() Config { return r.cfg }
