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
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/metrics"
)

// DefaultUnitSize is the number of keys in one unit of work.
const DefaultUnitSize = 25

// Unit is one unit of work Find hands out: keys of rows that were due
// when it was found, oldest due first.
type Unit struct {
	Keys []string `json:"keys"`
	// FoundAt is when Find read the rows (for the unit's age in logs).
	FoundAt time.Time `json:"found_at"`
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

// Find reads the attention index's shards, oldest due first, and hands the
// due rows out to q in units of UnitSize keys, at most MaxRows rows, unless
// units are still waiting on q. It returns an error only when the index
// or the queue could not be read at all.
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
	const batch = 10 // SQS SendMessageBatch's limit
	var (
		pending []Unit
		cur     Unit
	)
	flush := func() error {
		if len(pending) == 0 {
			return nil
		}
		n, err := q.Put(ctx, pending)
		for _, u := range pending[:n] {
			rep.Found += len(u.Keys)
		}
		rep.Units += n
		rep.Lost += len(pending) - n
		pending = pending[:0]
		return err
	}
	for {
		if rep.Found+len(cur.Keys)+unitRows(pending) >= r.cfg.MaxRows || ctx.Err() != nil {
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
		if rep.Found+len(cur.Keys)+unitRows(pending) == 0 {
			rep.OldestDueMillis = now.Sub(dueAt(rec)).Milliseconds()
		}
		if len(cur.Keys) == 0 {
			cur.FoundAt = now
		}
		cur.Keys = append(cur.Keys, rec.Key)
		if len(cur.Keys) == r.cfg.UnitSize {
			pending, cur = append(pending, cur), Unit{}
		}
		if len(pending) == batch {
			if err := flush(); err != nil {
				r.dispatch.Logger.Error("hand out units", "error", err, "lost", rep.Lost)
			}
		}
	}
	if len(cur.Keys) > 0 {
		pending = append(pending, cur)
	}
	if err := flush(); err != nil {
		r.dispatch.Logger.Error("hand out units", "error", err, "lost", rep.Lost)
	}
	if rep.Found > 0 {
		r.dispatch.Metrics.Latency(metrics.ReconcileBacklogAge, time.Duration(rep.OldestDueMillis)*time.Millisecond)
	}
	return rep, nil
}

func unitRows(us []Unit) int {
	n := 0
	for _, u := range us {
		n += len(u.Keys)
	}
	return n
}

// ActionNotDue: the row a unit named is settled or not due any more
// (another worker, a sender's redelivery or a duplicate unit got there
// first, or its backoff was extended).
const ActionNotDue Action = "not_due"

// ActionDeferred: a row of the unit was not examined because an earlier
// row of it found the provider's rate spent or the provider down
// (ActionPaced, ActionProviderDown): it stays due in the attention index,
// untouched, and the next Find hands it out again.
const ActionDeferred Action = "deferred"

// Work reconciles the rows of one unit: it reads each row again by key and
// reconciles it if it is still due, as Run does, Concurrency rows at a
// time. done is false when the deadline came before every row was
// examined: the caller returns the unit to the queue (a redelivery redoes
// only what is still due).
//
// Once a row of the unit could not be sent because the provider's rate is
// spent or the provider is down, Work starts no further row of the unit:
// each would wait for a token (up to the pace's wait) or be skipped, and
// the worker would only spend reads and time. The rows it did not start
// are counted as ActionDeferred (not in Examined) and stay due in the
// attention index, where the next Find finds them; done is still true
// (the unit is acknowledged). A unit may hold rows of several channels:
// those wait for the next Find too, a minute at most.
func (r *Reconciler) Work(ctx context.Context, u Unit) (rep Report, done bool) {
	rep = Report{Actions: map[Action]int{}}
	var (
		mu      sync.Mutex
		wg      sync.WaitGroup
		sem     = make(chan struct{}, r.cfg.Concurrency)
		stopped bool
	)
	done = true
	for i, key := range u.Keys {
		if r.nearDeadline(ctx) {
			done = false
			break
		}
		sem <- struct{}{}
		mu.Lock()
		stop := stopped
		mu.Unlock()
		if stop {
			<-sem
			rep.Actions[ActionDeferred] += len(u.Keys) - i
			break
		}
		rep.Examined++
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			a := r.workKey(ctx, key)
			mu.Lock()
			rep.Actions[a]++
			if a == ActionPaced || a == ActionProviderDown {
				stopped = true
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	return rep, done
}

func (r *Reconciler) workKey(ctx context.Context, key string) Action {
	rec, err := r.dispatch.Ledger.Get(ctx, key)
	if errors.Is(err, ledger.ErrNotFound) {
		return ActionNotDue
	}
	if err != nil {
		r.dispatch.Logger.Warn("row left for a later run", "key", key, "error", err)
		return ActionWaiting
	}
	if !rec.Indexed() || ledger.Due(rec).After(r.dispatch.Now()) {
		return ActionNotDue
	}
	return r.reconcile(ctx, rec)
}
