package simtest

import (
	"cmp"
	"context"
	"runtime"
	"slices"
	"testing/synctest"
	"time"
)

// worker is one simulated Lambda invocation (a sender batch, a reconciler
// run, a webhook callback). Its goroutines share its context; it dies as a
// whole.
type worker struct {
	id         int
	name       string // "s3", "r1", "w2"
	service    string // "sender", "reconciler", "webhook"
	skew       time.Duration
	dead, done bool
	// calm workers meet no faults (the drain phase).
	calm bool
	// deadline is the invocation's deadline, timeout its function's.
	deadline time.Time
	timeout  time.Duration
	// claim is the lease of the claims it takes (its deployment's claim
	// timeout).
	claim time.Duration
	// dep is the deployment its invocation started with.
	dep *deployment
}

type workerKey struct{}

func workerOf(ctx context.Context) *worker {
	w, _ := ctx.Value(workerKey{}).(*worker)
	return w
}

// task is a goroutine parked at a yield point.
type task struct {
	w      *worker
	op     string
	key    string
	resume chan bool // true: exit (cleanup)
	// readyAt is when the call was made; a live worker's call runs within
	// maxCallDelay of it (processing is fast; only hangs take long).
	readyAt time.Time
	// wake, when set, parks the task until the clock reaches it (a
	// provider hang).
	wake time.Time
	seq  int
}

// maxCallDelay bounds how long a live worker's pending call may wait
// before it runs: a healthy Lambda is never paused for long between its
// own calls.
const maxCallDelay = 50 * time.Millisecond

// yield parks the calling goroutine until the scheduler picks it. It
// returns the worker of ctx. A goroutine told to exit (cleanup after the
// run) exits here without running further.
func (w *World) yield(ctx context.Context, op, key string) *worker {
	return w.yieldUntil(ctx, op, key, time.Time{})
}

// yieldUntil is yield that, when wake is set, parks the task until the
// clock reaches it.
func (w *World) yieldUntil(ctx context.Context, op, key string, wake time.Time) *worker {
	wk := workerOf(ctx)
	t := &task{w: wk, op: op, key: key, resume: make(chan bool), wake: wake}
	w.mu.Lock()
	w.arrived = append(w.arrived, t)
	w.signal()
	w.mu.Unlock()
	if <-t.resume {
		runtime.Goexit()
	}
	return wk
}

// settle waits until every goroutine of the bubble is blocked, then files
// the tasks that parked since the last settle, in a deterministic order.
func (w *World) settle() {
	synctest.Wait()
	w.mu.Lock()
	arr := w.arrived
	w.arrived = nil
	fin := w.finished
	w.finished = nil
	w.mu.Unlock()
	slices.SortFunc(arr, func(a, b *task) int {
		return cmp.Or(cmp.Compare(a.w.id, b.w.id), cmp.Compare(a.op, b.op), cmp.Compare(a.key, b.key))
	})
	now := time.Now()
	for _, t := range arr {
		w.seq++
		t.seq = w.seq
		t.readyAt = now
		switch {
		case w.cleanup:
			go func() { t.resume <- true }() // it exits, running its deferred calls
		case t.w.dead:
			w.frozen = append(w.frozen, t)
		case !t.wake.IsZero():
			w.timers = append(w.timers, t)
		default:
			w.runnable = append(w.runnable, t)
		}
	}
	for _, f := range fin {
		f()
	}
}

// resume runs t's call and waits until the bubble is quiet again.
func (w *World) resume(t *task) {
	w.runnable = slices.DeleteFunc(w.runnable, func(x *task) bool { return x == t })
	w.timers = slices.DeleteFunc(w.timers, func(x *task) bool { return x == t })
	t.resume <- false
	w.settle()
}

// kill makes wk die: its parked calls never run.
func (w *World) kill(wk *worker) {
	wk.dead = true
	w.workerEnded(wk)
	freeze := func(t *task) bool {
		if t.w == wk {
			w.frozen = append(w.frozen, t)
		}
		return t.w == wk
	}
	w.runnable = slices.DeleteFunc(w.runnable, freeze)
	w.timers = slices.DeleteFunc(w.timers, freeze)
}

// start runs body as a new worker's invocation and waits until it parks
// or ends.
func (w *World) start(wk *worker, deadline time.Duration, body func(ctx context.Context), after func()) {
	wk.deadline = time.Now().Add(deadline)
	wk.timeout = deadline
	ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), workerKey{}, wk), deadline)
	go func() {
		defer cancel()
		body(ctx)
		w.mu.Lock()
		w.finished = append(w.finished, func() {
			wk.done = true
			w.workerEnded(wk)
			if !wk.dead && after != nil {
				after()
			}
		})
		w.signal()
		w.mu.Unlock()
	}()
	w.settle()
}

// advance moves the virtual clock by up to d (all goroutines are parked
// or asleep). It stops early when a goroutine that slept on a timer of its
// own (a retry pause) wakes and parks or ends: that worker is live, and
// its call must run within maxCallDelay of when it made it, not after the
// whole jump.
func (w *World) advance(d time.Duration) {
	if d <= 0 {
		return
	}
	select {
	case <-w.woke: // from parks already settled
	default:
	}
	t := time.NewTimer(d)
	select {
	case <-t.C:
	case <-w.woke:
		t.Stop()
	}
	w.settle()
}

// advanceTo moves the clock to target, running the calls that become
// runnable meanwhile (the drain, where nothing else is scheduled).
func (w *World) advanceTo(target time.Time) {
	for w.now().Before(target) {
		w.advance(target.Sub(w.now()))
		for len(w.runnable) > 0 {
			w.resume(w.runnable[0])
		}
	}
}

// signal tells an advancing scheduler that a goroutine parked or ended.
// w.mu is held.
func (w *World) signal() {
	select {
	case w.woke <- struct{}{}:
	default:
	}
}

// shutdown makes every parked goroutine exit so that the bubble ends.
func (w *World) shutdown() {
	w.cleanup = true
	for _, list := range [][]*task{w.runnable, w.timers, w.frozen} {
		for _, t := range list {
			go func() { t.resume <- true }() // it exits, running its deferred calls
		}
	}
	w.runnable, w.timers, w.frozen = nil, nil, nil
	for range 1000 {
		synctest.Wait()
		w.mu.Lock()
		n := len(w.arrived)
		w.mu.Unlock()
		if n == 0 {
			return
		}
		w.settle()
	}
}
