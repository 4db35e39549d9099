package simtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/ledger/memledger"
	"github.com/sendonce/sendonce/internal/metrics"
)

// Store faults.
const (
	faultNone     = ""
	faultLost     = "store_answer_lost"
	faultFail     = "store_write_failed"
	faultThrottle = "store_throttled"
	faultRead     = "store_read_failed"
)

// simLedger is a fault-injecting ledger.Ledger around the in-memory
// ledger. Every call is a yield point. It also records what happened for
// the invariants.
type simLedger struct {
	w     *World
	inner *memledger.Ledger
}

// writeFault picks the fault a write meets.
func (w *World) writeFault(wk *worker) string {
	if wk == nil || wk.calm || w.calm {
		return faultNone
	}
	now := w.now()
	if now.Before(w.storeStormUntil) && now.After(w.storeStormFrom) && w.rng.IntN(2) == 0 {
		return faultThrottle
	}
	x := w.rng.Float64() / w.sc.intensity
	switch {
	case x < 0.03:
		return faultLost
	case x < 0.05:
		return faultFail
	case x < 0.06:
		return faultThrottle
	}
	return faultNone
}

func (w *World) readFault(wk *worker) string {
	if wk == nil || wk.calm || w.calm {
		return faultNone
	}
	if w.rng.Float64()/w.sc.intensity < 0.02 {
		return faultRead
	}
	return faultNone
}

// refused reports whether a write that meets fault f does not apply.
func refused(f string) bool { return f == faultFail || f == faultThrottle }

// faultErr counts fault f and returns the error the store's client gets
// from op (what the SDK surfaces after its own retries).
func (w *World) faultErr(op, f string) error {
	w.faults[f]++
	return fmt.Errorf("simulated store: %s: %s", op, f)
}

// begin parks the call, then takes the world lock for its execution.
func (l *simLedger) begin(ctx context.Context, op, key string) (*worker, *World) {
	wk := l.w.yield(ctx, op, key)
	l.w.mu.Lock()
	l.w.cur = wk
	return wk, l.w
}

func (l *simLedger) end() {
	l.w.cur = nil
	l.w.mu.Unlock()
}

// unapplied is the claim a client tried to take with a write that did
// not apply (its id never applied): dynamoledger returns it with the
// error.
func (w *World) unapplied(key string, attempt int, lease time.Duration) ledger.Claim {
	now := w.ledgerNow()
	return ledger.Claim{Key: key, ClaimID: w.newClaimID(), Attempt: attempt, LeaseUntil: now.Add(lease), AttemptedAt: now}
}

// checkLatest checks that a write (op) applied under claim id holds key's
// latest claim. w.mu is held.
func (w *World) checkLatest(op, key, id string) {
	if latest := w.truth(key).claimID; latest != "" && id != latest {
		w.violate(InvStaleClaim, key, fmt.Sprintf("%s applied under claim %s, but the row's latest claim is %s", op, id, latest))
	}
}

func (l *simLedger) Claim(ctx context.Context, e ledger.Entry, lease time.Duration) (ledger.Claim, error) {
	wk, w := l.begin(ctx, "claim", e.Key)
	defer l.end()
	kt := w.truth(e.Key)
	f := w.writeFault(wk)
	if refused(f) {
		w.tracef(e.Key, "%s claim %s: %s", wk.name, w.short(e.Key), f)
		return w.unapplied(e.Key, 1, lease), w.faultErr("claim", f)
	}
	c, err := l.inner.Claim(ctx, e, lease)
	if err == nil {
		kt.claimID = c.ClaimID
		w.attempts[c.ClaimID] = &attempt{claimID: c.ClaimID, worker: wk, key: e.Key}
	}
	cur, conflict := ledger.AsConflict(err)
	switch {
	case err == nil && f == faultLost:
		w.tracef(e.Key, "%s claim %s: applied (attempt 1), answer lost", wk.name, w.short(e.Key))
		return c, w.faultErr("claim", f)
	case err == nil:
		w.held[heldKey{wk.id, e.Key}] = c.ClaimID
		w.tracef(e.Key, "%s claim %s: ok (attempt 1)", wk.name, w.short(e.Key))
	case conflict:
		if wk.service == "sender" && (cur.State.Final() || cur.State == ledger.StateUncertain && !w.senderRepeats(wk, cur)) {
			w.expect("sender", metrics.DuplicatesPrevented)
		}
		w.noteStale(wk, cur)
		w.tracef(e.Key, "%s claim %s: conflict (%s, attempt %d, released=%v)", wk.name, w.short(e.Key), cur.State, cur.Attempts, cur.Released)
	default:
		w.tracef(e.Key, "%s claim %s: error %v", wk.name, w.short(e.Key), err)
	}
	return c, err
}

func (l *simLedger) TakeOver(ctx context.Context, cur ledger.Record, provider string, lease time.Duration) (ledger.Claim, error) {
	wk, w := l.begin(ctx, "takeover", cur.Key)
	defer l.end()
	delete(w.staleSeen, heldKey{wk.id, cur.Key})
	kt := w.truth(cur.Key)
	f := w.writeFault(wk)
	if refused(f) {
		w.tracef(cur.Key, "%s takeover %s: %s", wk.name, w.short(cur.Key), f)
		return w.unapplied(cur.Key, cur.Attempts+1, lease), w.faultErr("takeover", f)
	}
	before, _ := l.inner.Get(ctx, cur.Key)
	c, err := l.inner.TakeOver(ctx, cur, provider, lease)
	if err != nil {
		w.tracef(cur.Key, "%s takeover %s: %v", wk.name, w.short(cur.Key), err)
		return c, err
	}
	w.checkLatest("TakeOver", cur.Key, cur.ClaimID)
	kt.claimID = c.ClaimID
	a := &attempt{claimID: c.ClaimID, worker: wk, key: cur.Key}
	w.attempts[c.ClaimID] = a
	// A resend the class policy allows (policyResend) starts a policy
	// chain: one decision that accepts one possible duplicate. The
	// attempts that take it over after it continue the chain: a released
	// one sent nothing, and one that may have sent is looked up or resent
	// in its place. A chain may deliver once.
	prev := w.attempts[cur.ClaimID]
	if w.policyResend(wk, before) {
		w.chains++
		a.chain = w.chains
	} else if prev != nil {
		a.chain = prev.chain
	}
	if f == faultLost {
		w.tracef(cur.Key, "%s takeover %s: applied (attempt %d), answer lost", wk.name, w.short(cur.Key), c.Attempt)
		return c, w.faultErr("takeover", f)
	}
	w.held[heldKey{wk.id, cur.Key}] = c.ClaimID
	// A failover (dispatch.SendRoute) takes over the worker's own released
	// claim for the route's next provider: the sender counts one Reclaims
	// for the route. (Its send is a Failovers when that provider is not
	// the route's first: simProvider.call.)
	switch {
	case prev != nil && prev.worker == wk && prev.released:
		w.faults["failovers"]++
		if prev.reclaim == reclaimReleased {
			prev.reclaim = reclaimNone
			a.reclaim = reclaimPending
		}
	case wk.service == "sender":
		a.reclaim = reclaimPending
	}
	w.tracef(cur.Key, "%s takeover %s from %s: ok (attempt %d)", wk.name, w.short(cur.Key), cur.State, c.Attempt)
	return c, nil
}

func (l *simLedger) Mark(ctx context.Context, c ledger.Claim, o ledger.Outcome) (err error) {
	if o.State == ledger.StateUncertain {
		// The caller counted it before the call, whatever becomes of it.
		l.w.mu.Lock()
		l.w.expect(workerOf(ctx).service, metrics.UncertainAttempts)
		l.w.mu.Unlock()
	}
	wk, w := l.begin(ctx, "mark", c.Key)
	defer l.end()
	delete(w.staleSeen, heldKey{wk.id, c.Key})
	a := w.attempts[c.ClaimID]
	defer func() {
		// Nothing was delivered under a FAILED mark: the dispatcher
		// retries a failed one as it retries a Release.
		if o.State == ledger.StateFailed && err != nil && !errors.Is(err, ledger.ErrFencingLost) {
			w.recordFailed(a)
		} else {
			w.reclaimDone(a)
		}
	}()
	f := w.writeFault(wk)
	if refused(f) {
		w.tracef(c.Key, "%s mark %s %s: %s", wk.name, w.short(c.Key), o.State, f)
		return w.faultErr("mark", f)
	}
	kt := w.truth(c.Key)
	before, _ := l.inner.Get(ctx, c.Key)
	err = l.inner.Mark(ctx, c, o)
	expired := err == nil && w.expiredMark(c.Key, before, o) // validity.go
	if err == nil {
		w.checkLatest("Mark "+string(o.State), c.Key, c.ClaimID)
		if a != nil {
			a.ended = true
		}
		switch o.State {
		case ledger.StateSent:
			if len(kt.deliveries) == 0 {
				w.violate(InvSentUndelivered, c.Key, "row marked SENT but no provider ever accepted the message")
			} else if id := o.ProviderMessageID; id != "" && !slices.ContainsFunc(kt.deliveries, func(d delivery) bool { return d.id == id }) {
				w.violate(InvSentUndelivered, c.Key, fmt.Sprintf("row marked SENT with provider message %s, which is not one of its own", id))
			}
		case ledger.StateFailed:
			if !expired {
				w.checkFailed(c.Key, before, o.Reason)
			}
		case ledger.StateAbandoned:
			if !kt.maybeDelivered(w) && w.now().Sub(before.CreatedAt) < maxAge {
				w.violate(InvAbandoned, c.Key, fmt.Sprintf("ABANDONED (%q, attempt %d) though no provider call could have delivered it", o.Reason, c.Attempt))
			}
		}
	}
	switch {
	case err == nil && f == faultLost:
		w.tracef(c.Key, "%s mark %s %s: applied, answer lost", wk.name, w.short(c.Key), o.State)
		return w.faultErr("mark", f)
	case err == nil && expired:
		w.expect(wk.service, metrics.Expired)
	case err == nil:
		w.expectMark(wk, a, o.State)
		w.tracef(c.Key, "%s mark %s %s: ok", wk.name, w.short(c.Key), o.State)
	case errors.Is(err, ledger.ErrFencingLost):
		if (a != nil && a.receipt && o.State == ledger.StateSent) || o.State == ledger.StateUncertain {
			w.expect(wk.service, metrics.FencingLost)
		}
		w.tracef(c.Key, "%s mark %s %s: fenced out", wk.name, w.short(c.Key), o.State)
	default:
		w.tracef(c.Key, "%s mark %s %s: %v", wk.name, w.short(c.Key), o.State, err)
	}
	return err
}

func (l *simLedger) Release(ctx context.Context, c ledger.Claim, reason string, retryAt time.Time) error {
	wk, w := l.begin(ctx, "release", c.Key)
	defer l.end()
	f := w.writeFault(wk)
	a := w.attempts[c.ClaimID]
	if refused(f) {
		w.recordFailed(a)
		w.tracef(c.Key, "%s release %s: %s", wk.name, w.short(c.Key), f)
		return w.faultErr("release", f)
	}
	err := l.inner.Release(ctx, c, reason, retryAt)
	if err == nil {
		w.checkLatest("Release", c.Key, c.ClaimID)
		if a != nil {
			a.released = true
			a.ended = true
		}
	}
	switch {
	case err == nil && f == faultLost:
		w.tracef(c.Key, "%s release %s: applied, answer lost", wk.name, w.short(c.Key))
		w.recordFailed(a) // the dispatcher retries: fenced, or a no-op
		return w.faultErr("release", f)
	case err == nil:
		// A reconciler that postpones a released row whose provider is
		// not configured releases it again and counts a configuration
		// error, not a release (reconcile: ActionPostponed).
		if wk.service != "reconciler" || !strings.HasPrefix(reason, "config: no provider is configured") {
			w.expect(wk.service, metrics.Released)
		}
		if a != nil && a.reclaim == reclaimPending {
			a.reclaim = reclaimReleased // it may fail over yet
		}
		w.tracef(c.Key, "%s release %s: ok (%s)", wk.name, w.short(c.Key), reason)
		return nil
	case errors.Is(err, ledger.ErrFencingLost):
		w.reclaimDone(a)
	default:
		w.recordFailed(a)
	}
	w.tracef(c.Key, "%s release %s: %v", wk.name, w.short(c.Key), err)
	return err
}

func (l *simLedger) Get(ctx context.Context, key string) (ledger.Record, error) {
	wk, w := l.begin(ctx, "get", key)
	defer l.end()
	if f := w.readFault(wk); f != faultNone {
		return ledger.Record{}, w.faultErr("get", f)
	}
	return l.inner.Get(ctx, key)
}

func (l *simLedger) ApplyDelivery(ctx context.Context, key string, d ledger.Delivery) (bool, error) {
	wk, w := l.begin(ctx, "apply", key)
	defer l.end()
	f := w.writeFault(wk)
	if refused(f) {
		return false, w.faultErr("apply delivery", f)
	}
	applied, err := l.inner.ApplyDelivery(ctx, key, d)
	if f == faultLost && err == nil {
		return false, w.faultErr("apply delivery", f)
	}
	if err == nil && applied {
		w.expect("webhook", metrics.CallbacksApplied)
	}
	w.tracef(key, "%s apply %s %s: applied=%v err=%v", wk.name, d.Status, w.short(key), applied, err)
	return applied, err
}

// Attention serves one page of memledger's attention index, which pages as
// DynamoDB's Query with a filter does (the limit applies before the expiry
// filter; ledgertest checks it of both ledgers).
func (l *simLedger) Attention(ctx context.Context, q ledger.AttentionQuery) (ledger.AttentionPage, error) {
	wk, w := l.begin(ctx, "attention", fmt.Sprintf("%02d", q.Shard))
	defer l.end()
	if f := w.readFault(wk); f != faultNone {
		return ledger.AttentionPage{}, w.faultErr("attention", f)
	}
	return l.inner.Attention(ctx, q)
}
