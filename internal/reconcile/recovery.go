package reconcile

import (
	"context"
	"strings"
	"time"

	"github.com/sendonce/sendonce/internal/dispatch"
)

// # The scheduled run's watch: a hand-out at a provider's recovery, and
// as soon as the workers have taken the last
//
// The scheduled Find runs once a Schedule (a minute), and hands out
// nothing while units wait. That left the provider idle twice:
//
//   - when a provider that was down answers again, its backlog waited up
//     to a Schedule for the next run (at 5,000 sends a second, a minute
//     is 300,000 sends), and the workers whose container still knew the
//     provider down (their cool-down, dispatch.Health) deferred it;
//   - during a drain, once the workers had taken a hand-out's last unit,
//     the next hand-out came at the next run: up to a Schedule with no
//     rows handed out (the outage simulation measured the provider at
//     83 % of its rate at 5,000/s, most of the rest those gaps).
//
// So the scheduled run stays alive after its Find (Watch, a Watcher's
// Step every WatchPoll) while there is something to watch for: a provider
// recorded down and not up again since, or a backlog (the last hand-out
// left rows due, FindReport.Truncated, or found units waiting, Busy). It
// hands out again at once when a provider is recorded up again since the
// last hand-out, or when the backlog's last hand-out has no unit left
// waiting (the same rule as the scheduled run's) while no provider is
// down, and returns WatchMargin before the next scheduled run (or
// FindReserve before its deadline). And:
//
//   - a sender or worker whose send succeeds after its container knew the
//     provider down records it (dispatch.Dispatcher.Status: opstate's
//     "up#<provider>", the second it did; one write per container per
//     recovery);
//   - every unit of a lane whose provider answered again carries when it
//     did (Unit.ProviderUp): a worker whose container still knows the
//     provider down forgets it (dispatch.Health.Up) and sends, rather
//     than deferring the unit.
//
// Why the run stays alive rather than being invoked by the container
// that sees the recovery: every sender and worker container may see it
// at once, and each would start a Find (hundreds of concurrent hand-outs
// of the same rows), and their roles would need lambda:InvokeFunction;
// one run that watches makes one Find at a time, and its role needs only
// GetItem on the ops# items it already writes (and the queue's
// attributes, which it already reads). What it costs: while a provider
// is down or a backlog drains, the run lasts about a Schedule instead of
// a second (Lambda time: about 55 s a minute at the function's memory),
// reads the providers' item every WatchPoll (one read unit each, about 28
// a minute) and the queue's depth as often (GetQueueAttributes, $0.40 a
// million); nothing when every provider answers and no backlog is left.
// A hand-out as soon as the queue is empty may hand out again the rows of
// the units the workers are on (at most ReconcileWorkerConcurrency
// units): each is read again and found not due, or its second worker's
// takeover fails, as with any duplicated unit.

// WatchPoll is how often a watch reads the providers' states and the
// queue's depth; WatchMargin is how long before the next scheduled run
// it returns.
const (
	WatchPoll   = 2 * time.Second
	WatchMargin = 5 * time.Second
)

// Recovery reads the providers' states (Config.Status) and reports
// whether a provider was recorded down within the last Schedule and has
// not been recorded up since (watch: a recovery is worth watching for),
// and whether a provider was recorded up again at or after since
// (recovered: a hand-out now finds its backlog). Without a Status both
// are false.
func (r *Reconciler) Recovery(ctx context.Context, since time.Time) (watch, recovered bool, err error) {
	if r.cfg.Status == nil {
		return false, false, nil
	}
	ps, err := r.cfg.Status.Providers(ctx)
	if err != nil {
		return false, false, err
	}
	now := r.dispatch.Now()
	cooldown := r.cooldown()
	for _, p := range ps {
		// DownUntil is the latest refusal a container learned the
		// provider down from, plus its cool-down: an up recorded at or
		// after that refusal is newer.
		lastDown := p.DownUntil.Add(-cooldown)
		up := !p.UpAt.IsZero() && !p.UpAt.Before(lastDown.Truncate(time.Second))
		switch {
		case up && !p.UpAt.Before(since.Truncate(time.Second)):
			recovered = true
		case !up && p.DownUntil.After(now.Add(-r.cfg.Schedule)):
			watch = true
		}
	}
	return watch, recovered, nil
}

// Watcher is a scheduled run's watch after its Find (Watch): Step polls
// once.
type Watcher struct {
	r    *Reconciler
	q    Queue
	last time.Time // when the last hand-out began
	// backlog: the last hand-out left rows due.
	backlog bool
	// Report sums the watch's hand-outs (Found, Units, Lost; Truncated
	// and Waiting are the last one's); Finds counts them.
	Report FindReport
	Finds  int
}

// NewWatcher returns the watch of a run whose Find began at at and
// reported rep.
func (r *Reconciler) NewWatcher(q Queue, at time.Time, rep FindReport) *Watcher {
	// A Find that handed nothing out because units wait (Busy) found a
	// backlog too.
	return &Watcher{r: r, q: q, last: at, backlog: rep.Truncated || rep.Busy}
}

// Step polls once: it hands out (Find) when a provider was recorded up
// again since the last hand-out began, or when the last hand-out left a
// backlog, no unit waits and no provider is down (its rows would be
// deferred at once: while one is, the backlog waits for the recovery or
// the next scheduled run). It reports whether there is still
// something to watch for: a provider down and not up since, or a
// backlog. A Status or queue that cannot be read ends the watch
// (logged): the next scheduled run hands out as before.
func (w *Watcher) Step(ctx context.Context) (bool, error) {
	watch, recovered, err := w.r.Recovery(ctx, w.last)
	if err != nil {
		w.r.dispatch.Logger.Warn("watch: read the providers' states", "error", err)
		return false, nil
	}
	find := recovered
	if !find && !watch && w.backlog {
		// While a provider is down its rows are deferred as soon as
		// they are handed out: the backlog waits for the recovery
		// (or the next scheduled run), not for the queue.
		n, err := w.q.Waiting(ctx)
		if err != nil {
			w.r.dispatch.Logger.Warn("watch: read the queue's depth", "error", err)
			return false, nil
		}
		find = n == 0
	}
	if find {
		at := w.r.dispatch.Now()
		rep, err := w.r.Find(ctx, w.q)
		if err != nil {
			return false, err
		}
		w.Finds++
		w.Report.Found += rep.Found
		w.Report.Units += rep.Units
		w.Report.Lost += rep.Lost
		w.Report.Truncated, w.Report.Waiting = rep.Truncated, rep.Waiting
		w.last, w.backlog = at, rep.Truncated || rep.Busy
	}
	return watch || w.backlog, nil
}

// Watch is what the scheduled run does after its Find, which began at
// since and reported rep: a Watcher's Step every WatchPoll while there
// is something to watch for, until until (the next scheduled run less
// WatchMargin) or ctx's deadline less FindReserve, whichever is first.
// It returns the watch's hand-outs (Watcher.Report, Watcher.Finds).
func (r *Reconciler) Watch(ctx context.Context, q Queue, since time.Time, rep FindReport, until time.Time) (FindReport, int, error) {
	if d, ok := ctx.Deadline(); ok && d.Add(-FindReserve).Before(until) {
		until = d.Add(-FindReserve)
	}
	w := r.NewWatcher(q, since, rep)
	for {
		more, err := w.Step(ctx)
		if err != nil || !more || !r.dispatch.Now().Add(WatchPoll).Before(until) {
			return w.Report, w.Finds, err
		}
		t := time.NewTimer(WatchPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return w.Report, w.Finds, nil
		case <-t.C:
		}
	}
}

// ups returns when each provider answered again after its latest
// outage, for the providers that did (Config.Status; none without one,
// or when it cannot be read: logged).
func (r *Reconciler) ups(ctx context.Context) map[string]time.Time {
	if r.cfg.Status == nil {
		return nil
	}
	ps, err := r.cfg.Status.Providers(ctx)
	if err != nil {
		r.dispatch.Logger.Warn("read the providers' states", "error", err)
		return nil
	}
	out := map[string]time.Time{}
	for name, p := range ps {
		if !p.UpAt.IsZero() && !p.UpAt.Before(p.DownUntil.Add(-r.cooldown()).Truncate(time.Second)) {
			out[name] = p.UpAt
		}
	}
	return out
}

// cooldown is the workers' cool-down of a provider known down
// (dispatch.Health).
func (r *Reconciler) cooldown() time.Duration {
	if h := r.dispatch.Health; h != nil && h.Cooldown > 0 {
		return h.Cooldown
	}
	return dispatch.DefaultHealthCooldown
}

// providerUp tells this container that the lane of u's provider answered
// again at u.ProviderUp (dispatch.Health.Up).
func (r *Reconciler) providerUp(u Unit) {
	if u.ProviderUp.IsZero() {
		return
	}
	if _, name, ok := strings.Cut(u.Lane, "/"); ok {
		r.dispatch.Health.Up(name, u.ProviderUp)
	}
}
