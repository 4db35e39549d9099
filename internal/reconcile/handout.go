package reconcile

// Fan-out: the scheduled run finds the work (Find) and hands it out as
// units on a queue; reconcile workers, started by Lambda's SQS event
// source mapping with the concurrency the template sets, do it (Work).
//
// A unit is a batch of keys, not a shard or a page:
//   - a shard is too coarse: 16 shards would cap the workers at 16, and a
//     shard holding most of a burst would hold the drain back;
//   - a page (a shard and a cursor) is only valid for the index as it was
//     read: a worker reading it later sees rows settled, added or moved
//     and would redo or skip rows;
//   - a batch of keys is self-contained: each worker re-reads each row by
//     key (a strongly consistent GetItem, half a read unit) and decides on
//     the row as it is then, so a unit that is late, duplicated or
//     redelivered acts only on rows still due, through the fenced takeover
//     every change already is. A unit that is lost leaves its rows in the
//     attention index: the next Find hands them out again.
//
// Find tops the queue up rather than flooding it: when units are still
// waiting to be picked up it hands out nothing (the workers are behind,
// and handing the same rows out again would only make duplicates), so at
// most the units in flight are handed out twice.

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/metrics"
	"github.com/sendonce/sendonce/internal/pace"
)

// DefaultUnitSize is the number of keys in one unit of work.
const DefaultUnitSize = 25

// Unit is one unit of work Find hands out: keys of rows of one lane that
// were due when it was found, earliest deadline first (Find).
type Unit struct {
	Keys []string `json:"keys"`
	// Lane is the lane of every row of the unit (Lane); empty in a unit
	// handed out before units had lanes, whose rows Work reads to learn
	// theirs.
	Lane string `json:"lane,omitempty"`
	// FoundAt is when Find read the rows (for the unit's age in logs).
	FoundAt time.Time `json:"found_at"`
	// Concurrency is the rows a worker handles at once on this unit
	// (Tune; zero: Config.Concurrency).
	Concurrency int `json:"concurrency,omitempty"`
	// Hold is the share of the lane's provider rate the hand-out holds
	// for its rows, up to their cut (pace.Hold; Until is set by the
	// worker); nil when the provider is not paced.
	Hold *pace.Hold `json:"hold,omitempty"`
	// ProviderUp is when the lane's provider answered again after an
	// outage (opstate's "up#<provider>", Config.Status): a worker whose
	// container still knows the provider down forgets it
	// (dispatch.Health.Up) rather than defer the unit. Zero: no recovery
	// recorded.
	ProviderUp time.Time `json:"provider_up,omitzero"`
	// Expired is set on a unit of rows whose validity had passed when
	// Find read them: they need no send (a FAILED mark, or a lookup of
	// an ambiguous attempt), so they take none of the provider's rate,
	// and Find hands them out besides the lane's share, after its other
	// units. Before, such rows went last in their lane's units, which a
	// down provider deferred whole: they stayed at the head of the
	// attention index (oldest due) and filled Find's read.
	Expired bool `json:"expired,omitempty"`
}

// ParseUnit reads a unit from a queue message's body.
func ParseUnit(body string) (Unit, error) {
	var u Unit
	if err := json.Unmarshal([]byte(body), &u); err != nil {
		return Unit{}, fmt.Errorf("reconcile: parse unit: %w", err)
	}
	if len(u.Keys) == 0 {
		return Unit{}, errors.New("reconcile: parse unit: no keys")
	}
	for _, k := range u.Keys {
		if k == "" {
			return Unit{}, errors.New("reconcile: parse unit: empty key")
		}
	}
	return u, nil
}

// Queue is where Find hands units out (SQSQueue in production).
type Queue interface {
	// Waiting returns how many units wait to be picked up by a worker
	// (not counting those being worked on).
	Waiting(ctx context.Context) (int, error)
	// Put hands units out. It returns how many were handed out, in order:
	// units after that count were not (and are found again next run).
	Put(ctx context.Context, units []Unit) (int, error)
}

// FindReport sums up one Find.
type FindReport struct {
	// Found is the number of due rows handed out.
	Found int `json:"found"`
	// Units is the number of units handed out.
	Units int `json:"units"`
	// Lost is the number of units Put did not hand out.
	Lost int `json:"lost"`
	// Busy is set when Find handed nothing out because units were still
	// waiting (Waiting is their number).
	Busy    bool `json:"busy"`
	Waiting int  `json:"waiting"`
	// OldestDueMillis is how long the oldest row found had been due.
	OldestDueMillis int64 `json:"oldest_due_ms"`
	// Truncated is set when rows were left (MaxRows or the deadline).
	Truncated bool `json:"truncated"`
}

// ScanFactor bounds how far past MaxRows one Find reads the attention
// index: at most ScanFactor × MaxRows rows. Rows of a lane that has its
// share already are read and skipped, so that a lane whose rows sit
// behind another lane's backlog (an email row behind an SMS outage) is
// still handed out in the same run. What it costs: the extra index pages
// (a page of 1,000 rows of about 0.5 KB is about 62 read units,
// eventually consistent), only while more than MaxRows rows are due.
const ScanFactor = 4

// RecentDue is how far back Find's second read of the attention index
// goes when its first, oldest due first, stopped at its limit: two runs
// of the template's schedule, so that every row that became due since
// the run before is read, whatever backlog is older (at most ScanFactor ×
// MaxRows rows more: about 62 read units per 1,000 rows, only while more
// rows are due than the first read takes).
const RecentDue = 2 * time.Minute

// FindReserve is the time Find leaves before its deadline to hand out
// what it read (a SendMessageBatch per 10 units).
const FindReserve = 10 * time.Second

// Lane is the lane of row rec in the hand-out and in Work: its channel
// and the provider of its latest attempt ("sms/twilio"). Rows of one lane
// share a provider's health and rate; a lane whose provider is down or
// paced never holds back another lane's rows.
func Lane(rec ledger.Record) string { return rec.Channel + "/" + rec.Provider }

// Find reads the attention index's shards, oldest due first, and hands the
// due rows out to q in units of UnitSize keys, at most MaxRows rows, or
// what the lanes' providers take in a Schedule when that is more (Tune:
// the units of a fast provider's lane are larger, and carry the
// concurrency its workers need), unless units are still waiting on q. It
// returns an error only when the index or the queue could not be read at
// all.
//
// The rows are handed out by lane (Lane: the channel and the provider of
// the row's attempt), each unit holding the rows of one lane, and MaxRows
// is shared between the lanes found (max-min fair: a lane with fewer rows
// than its share gets them all, the rest is shared among the others), so
// the rows of a provider that is down or paced never fill MaxRows while
// another lane has rows due. Find reads up to ScanFactor × MaxRows rows to
// find the other lanes. Within a lane the rows go earliest deadline
// first: by validity (ledger.Entry.ValidUntil; a row without one by its
// aged deadline, pace.Horizon after it was created: pace.Order.Rank),
// then oldest first; except that the UNCERTAIN rows that are not urgent
// go after the rows to send, and that after an outage the rows enqueued
// before the provider answered again go ahead of the newer ones that are
// not urgent (byHandOut). The rows whose validity has passed go in units of
// their own (Unit.Expired), after the others and besides the lane's
// share, at most its cap of them. Each unit of a lane whose provider
// answered again after an outage carries when it did (Unit.ProviderUp,
// from Config.Status).
//
// Each unit of a paced provider's lane carries a hold (Unit.Hold): the
// rate of the lane's rows over the Schedule, up to the latest of them
// earliest deadline first (its cut), and, while an outage's backlog is
// handed out, when the provider answered again (pace.Hold.Backlog). The
// worker that starts the unit records it with the pacer, and sends whose
// deadline is later, or that were enqueued since that recovery, yield
// to it unless urgent (package pace, "Earliest deadline first" and "The
// backlog first after an outage").
func (r *Reconciler) Find(ctx context.Context, q Queue) (FindReport, error) {
	var rep FindReport
	waiting, err := q.Waiting(ctx)
	if err != nil {
		return rep, fmt.Errorf("reconcile: find: queue depth: %w", err)
	}
	rep.Waiting = waiting
	if waiting > 0 {
		rep.Busy = true
		return rep, nil
	}
	now := r.dispatch.Now()
	it := &merger{ledger: r.dispatch.Ledger, due: now.Add(time.Millisecond), page: r.cfg.PageSize, stop: func() bool { return ctx.Err() != nil }}
	if err := it.init(ctx); err != nil {
		return rep, err
	}
	type laneRows struct {
		name string
		tune Tuning
		cap  int // the most rows the lane is handed out
		rows []found
		// dead are the lane's rows whose validity has passed: handed
		// out besides rows, in units of their own (Unit.Expired), at
		// most cap of them.
		dead []found
	}
	var (
		lanes  []*laneRows
		byName = map[string]*laneRows{}
		read   int
		first  = true
		// total is what the lanes are handed out in all: MaxRows, or
		// what their providers take in a Schedule (Tune) when more.
		total, tuned = r.cfg.MaxRows, 0
	)
	scan := r.cfg.MaxRows * ScanFactor
	// The units are handed out once the reading is done: it stops
	// FindReserve before the deadline, so that they still go out.
	deadline, hasDeadline := ctx.Deadline()
	added := map[string]bool{}
	// read reads it until scan rows are read in all; it reports whether
	// it stopped at that limit with rows left.
	readRows := func(it *merger) bool {
		for {
			if read >= scan || ctx.Err() != nil || hasDeadline && time.Until(deadline) < FindReserve {
				rep.Truncated = rep.Truncated || it.more() || it.truncated
				return read >= scan && it.more()
			}
			rec, ok, err := it.next(ctx)
			if err != nil {
				r.dispatch.Logger.Error("read attention index", "error", err)
				rep.Truncated = true
				return false
			}
			if !ok {
				rep.Truncated = rep.Truncated || it.truncated
				return false
			}
			read++
			if first {
				rep.OldestDueMillis = now.Sub(dueAt(rec)).Milliseconds()
				first = false
			}
			name := Lane(rec)
			l := byName[name]
			if l == nil {
				t := Tune(r.cfg, r.laneRate(rec.Channel, rec.Provider))
				l = &laneRows{name: name, tune: t, cap: max(r.cfg.MaxRows, t.Rows)}
				byName[name] = l
				lanes = append(lanes, l)
				// A lane tuned above MaxRows reads (and hands out) that
				// much more.
				scan += l.cap - r.cfg.MaxRows
				tuned += t.Rows
				total = max(r.cfg.MaxRows, tuned)
			}
			f := found{key: rec.Key, validUntil: rec.ValidUntil, since: cmp.Or(rec.CreatedAt, dueAt(rec)), lookup: rec.State == ledger.StateUncertain}
			into := &l.rows
			if expired(now, f) {
				into = &l.dead
			}
			if len(*into) >= l.cap || added[rec.Key] {
				// No lane gets more than its cap: the row is left for a
				// later run.
				rep.Truncated = true
				continue
			}
			added[rec.Key] = true
			*into = append(*into, f)
		}
	}
	if readRows(it) {
		// The scan stopped in a backlog older than the rows that became
		// due lately: those (an email row behind an SMS outage's
		// backlog, whose rows stay due while the provider is down) are
		// read too, from RecentDue before now, up to as many rows again.
		recent := &merger{ledger: r.dispatch.Ledger, due: now.Add(time.Millisecond), from: now.Add(-RecentDue), page: r.cfg.PageSize, stop: func() bool { return ctx.Err() != nil }}
		if err := recent.init(ctx); err != nil {
			r.dispatch.Logger.Error("read attention index (recent rows)", "error", err)
		} else {
			scan += r.cfg.MaxRows * ScanFactor
			readRows(recent)
		}
	}
	// Max-min fair shares of MaxRows.
	sizes := make([]int, len(lanes))
	for i, l := range lanes {
		sizes[i] = len(l.rows)
	}
	shares := fairShares(sizes, total)
	ups := r.ups(ctx)
	var units, deadUnits []Unit
	for i, l := range lanes {
		if shares[i] < len(l.rows) {
			rep.Truncated = true
		}
		_, prov, _ := strings.Cut(l.name, "/")
		up := ups[prov]
		rows := l.rows
		slices.SortStableFunc(rows, func(a, b found) int { return r.byHandOut(now, up, a, b) })
		rows = rows[:shares[i]]
		var hold *pace.Hold
		if live := len(rows); l.tune.Rate > 0 && live != 0 {
			// The rate of the rows that may still be sent over the
			// period, up to the cut: the latest of them in the
			// earliest-deadline-first order.
			cut := rows[0].order()
			var backlog time.Time
			for _, f := range rows {
				if f.order().After(cut) {
					cut = f.order()
				}
				if !f.lookup && f.since.Before(up) {
					// Rows of the outage's backlog are handed out: newer
					// messages yield to them (none once it is gone).
					backlog = up
				}
			}
			rate := int(math.Ceil(float64(live) / r.cfg.Schedule.Seconds()))
			hold = &pace.Hold{Rate: min(rate, l.tune.Rate), Cut: cut, Backlog: backlog}
		}
		conc := 0
		if l.tune.Concurrency > r.cfg.Concurrency {
			conc = l.tune.Concurrency
		}
		size := max(l.tune.UnitSize, r.cfg.UnitSize)
		units = appendUnits(units, rows, size, Unit{Lane: l.name, FoundAt: now, Concurrency: conc, Hold: hold, ProviderUp: up})
		deadUnits = appendUnits(deadUnits, l.dead, size, Unit{Lane: l.name, FoundAt: now, Concurrency: conc, Expired: true, ProviderUp: up})
	}
	units = append(interleave(units), interleave(deadUnits)...)
	const batch = 10 // SQS SendMessageBatch's limit
	for len(units) > 0 {
		pending := units[:min(batch, len(units))]
		units = units[len(pending):]
		n, err := q.Put(ctx, pending)
		for _, u := range pending[:n] {
			rep.Found += len(u.Keys)
		}
		rep.Units += n
		rep.Lost += len(pending) - n
		if err != nil {
			r.dispatch.Logger.Error("hand out units", "error", err, "lost", rep.Lost)
		}
	}
	if rep.Found > 0 {
		r.dispatch.Metrics.Latency(metrics.ReconcileBacklogAge, time.Duration(rep.OldestDueMillis)*time.Millisecond)
	}
	return rep, nil
}

// found is what Find keeps of a row it read: a backlog of rows read
// past MaxRows costs little memory.
type found struct {
	key        string
	validUntil time.Time
	// since is when the row was created (its message's first claim), or
	// became due when that is unknown.
	since time.Time
	// lookup: the row is UNCERTAIN, its attempt may have reached the
	// provider; the worker asks the provider before any send.
	lookup bool
}

// order is f's place in the earliest-deadline-first order (pace.Order).
func (f found) order() pace.Order { return pace.Order{Deadline: f.validUntil, Since: f.since} }

// byHandOut is the order of a lane's rows in the hand-out at now, up
// being when the lane's provider answered again after an outage (zero:
// none known):
//
//  0. the rows that are urgent by the next run (their validity within
//     pace.Urgent of now + Schedule), whatever they need;
//  1. the rows to send that were enqueued before up (the outage's
//     backlog);
//  2. the other rows to send;
//  3. the UNCERTAIN rows, whose worker asks the provider first.
//
// Each class goes earliest deadline first (byDeadline). The provider's
// rate is what a drain lacks, and a look-up does not spend it: after an
// outage, the recovery's ambiguous attempts (a tenth of the sends in make
// sim-outage) are due again after the settle time, and, in deadline
// order among the backlog, they took the workers' time while the
// provider waited for sends (at 15,000/s, 1,138 such rows ahead of the
// backlog's last 237). An UNCERTAIN row that is not urgent waits for the
// rows to send of its hand-out, and for the drain while the hand-out is
// cut at its lane's cap. Without up, classes 1 and 2 are one: earliest
// deadline first, except that a message without validity never goes
// ahead of an urgent one (package pace, "The backlog first after an
// outage").
func (r *Reconciler) byHandOut(now, up time.Time, a, b found) int {
	class := func(f found) int {
		switch {
		case f.order().Urgent(now, pace.Urgent+r.cfg.Schedule):
			return 0
		case f.lookup:
			return 3
		case !up.IsZero() && f.since.Before(up):
			return 1
		}
		return 2
	}
	return cmp.Or(cmp.Compare(class(a), class(b)), byDeadline(now, a, b))
}

// byDeadline orders rows earliest deadline first at now: by validity, a
// row without one by its aged deadline (pace.Order.Rank: pace.Horizon
// after it was created), then oldest first; a row whose validity has
// passed goes after all of them (it can no longer be sent: it needs only
// its FAILED mark, which can wait, and it takes no worker's time from a
// row that can still be saved).
func byDeadline(now time.Time, a, b found) int {
	switch ea, eb := expired(now, a), expired(now, b); {
	case ea != eb:
		if ea {
			return 1
		}
		return -1
	case a.order().After(b.order()):
		return 1
	case b.order().After(a.order()):
		return -1
	}
	return 0
}

// expired reports whether row f's validity has passed at now.
func expired(now time.Time, f found) bool {
	return !f.validUntil.IsZero() && !now.Before(f.validUntil)
}

// fairShares divides total between demands max-min fairly: a demand
// below its equal share gets all of it, and what it leaves is shared
// among the others.
func fairShares(demands []int, total int) []int {
	out := make([]int, len(demands))
	left := total
	open := 0
	for _, d := range demands {
		if d > 0 {
			open++
		}
	}
	for open > 0 && left > 0 {
		share := max(1, left/open)
		progressed := false
		for i, d := range demands {
			if out[i] >= d || left == 0 {
				continue
			}
			give := min(share, d-out[i], left)
			out[i] += give
			left -= give
			progressed = progressed || give > 0
			if out[i] >= d {
				open--
			}
		}
		if !progressed {
			break
		}
	}
	return out
}

// interleave orders units round-robin by lane (units keeps each lane's
// order), so that workers taking them in order serve every lane.
func interleave(units []Unit) []Unit {
	var order []string
	byLane := map[string][]Unit{}
	for _, u := range units {
		if _, ok := byLane[u.Lane]; !ok {
			order = append(order, u.Lane)
		}
		byLane[u.Lane] = append(byLane[u.Lane], u)
	}
	out := make([]Unit, 0, len(units))
	for len(out) < len(units) {
		for _, l := range order {
			if us := byLane[l]; len(us) > 0 {
				out = append(out, us[0])
				byLane[l] = us[1:]
			}
		}
	}
	return out
}

// ActionNotDue: the row a unit named is settled or not due any more
// (another worker, a sender's redelivery or a duplicate unit got there
// first, or its backoff was extended).
const ActionNotDue Action = "not_due"

// ActionDeferred: a row of the unit was not examined because an earlier
// row of its lane found the provider's rate spent or the provider down
// (ActionPaced, ActionProviderDown): it stays due in the attention index,
// untouched, and the next Find hands it out again.
const ActionDeferred Action = "deferred"

// Work reconciles the rows of one unit: it reads each row again by key and
// reconciles it if it is still due, as Run does, Concurrency rows at a
// time. done is false when the deadline came before every row was
// examined: the caller returns the unit to the queue (a redelivery redoes
// only what is still due).
//
// Once a row could not be sent because its provider's rate is spent or
// the provider is down, Work starts no further row of that row's lane
// (Lane): each would wait for a token (up to the pace's wait) or be
// skipped, and the worker would only spend reads and time. Rows of other
// lanes go on: a unit never stops on another provider's row. The rows it
// did not start are counted as ActionDeferred (not in Examined) and stay
// due in the attention index, where the next Find finds them; done is
// still true (the unit is acknowledged). A unit of one lane (Unit.Lane,
// as Find hands them out) is deferred without a read; the rows of a unit
// without a lane are read first, to learn theirs.
//
// Work handles Unit.Concurrency rows at once when Find tuned the unit
// above Config.Concurrency (at most MaxConcurrency), and records the
// unit's hold (Unit.Hold) with its provider's pacer for pace.HoldFor
// before its first row.
func (r *Reconciler) Work(ctx context.Context, u Unit) (rep Report, done bool) {
	rep = Report{Actions: map[Action]int{}}
	r.providerUp(u)
	r.hold(ctx, u, r.dispatch.Now().Add(pace.HoldFor))
	var (
		mu      sync.Mutex
		wg      sync.WaitGroup
		sem     = make(chan struct{}, max(r.cfg.Concurrency, min(u.Concurrency, MaxConcurrency)))
		stopped = map[string]bool{}
	)
	isStopped := func(lane string) bool {
		mu.Lock()
		defer mu.Unlock()
		return stopped[lane]
	}
	done = true
	for _, key := range u.Keys {
		if r.nearDeadline(ctx) {
			done = false
			break
		}
		sem <- struct{}{}
		if u.Lane != "" && isStopped(u.Lane) {
			<-sem
			mu.Lock()
			rep.Actions[ActionDeferred]++
			mu.Unlock()
			continue
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			a, lane := r.workKey(ctx, key, isStopped)
			mu.Lock()
			defer mu.Unlock()
			rep.Actions[a]++
			if a != ActionDeferred {
				rep.Examined++
			}
			if a == ActionPaced || a == ActionProviderDown {
				stopped[lane] = true
				if u.Lane != "" {
					stopped[u.Lane] = true
				}
			}
		}()
	}
	wg.Wait()
	return rep, done
}

// workKey reads key's row again and reconciles it when it is still due
// and its lane (returned) is not stopped (ActionDeferred).
func (r *Reconciler) workKey(ctx context.Context, key string, stopped func(lane string) bool) (Action, string) {
	rec, err := r.dispatch.Ledger.Get(ctx, key)
	if errors.Is(err, ledger.ErrNotFound) {
		return ActionNotDue, ""
	}
	if err != nil {
		r.dispatch.Logger.Warn("row left for a later run", "key", key, "error", err)
		return ActionWaiting, ""
	}
	if !rec.Indexed() || ledger.Due(rec).After(r.dispatch.Now()) {
		return ActionNotDue, Lane(rec)
	}
	lane := Lane(rec)
	if stopped(lane) {
		return ActionDeferred, lane
	}
	return r.reconcile(ctx, rec), lane
}

// appendUnits appends to units the rows in units of at most size keys,
// each a copy of proto with its keys.
func appendUnits(units []Unit, rows []found, size int, proto Unit) []Unit {
	for chunk := range slices.Chunk(rows, size) {
		u := proto
		u.Keys = make([]string, 0, len(chunk))
		for _, f := range chunk {
			u.Keys = append(u.Keys, f.key)
		}
		units = append(units, u)
	}
	return units
}
