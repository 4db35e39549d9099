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

// errStore is what the store returns when a call failed at the network
// or was throttled (what the SDK surfaces after its own retries).
var (
	errStoreLost     = errors.New("simulated store: no answer (the request may have been applied)")
	errStoreFailed   = errors.New("simulated store: request failed")
	errStoreThrottle = errors.New("simulated store: ProvisionedThroughputExceededException")
)

// simLedger is a fault-injecting ledger.Ledger around the in-memory
// ledger. Every call is a yield point. It also records what happened for
// the invariants.
type simLedger struct {
	w     *World
	inner *memledger.Ledger
}

var _ ledger.Ledger = (*simLedger)(nil)

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

func (w *World) faultErr(f string) error {
	w.faults[f]++
	switch f {
	case faultLost:
		return errStoreLost
	case faultThrottle:
		return errStoreThrottle
	}
	return errStoreFailed
}

// begin parks the call, then takes the world lock for its execution.
func (l *simLedger) begin(ctx context.Context, op, key string) *worker {
	wk := l.w.yield(ctx, op, key)
	l.w.mu.Lock()
	l.w.cur = wk
	return wk
}

func (l *simLedger) end() {
	l.w.metricsDirty.Store(true) // pending counts may have settled
	l.w.cur = nil
	l.w.mu.Unlock()
}

func (l *simLedger) Claim(ctx context.Context, e ledger.Entry, lease time.Duration) (ledger.Claim, error) {
	wk := l.begin(ctx, "claim", e.Key)
	defer l.end()
	w := l.w
	kt := w.truth(e.Key)
	f := w.writeFault(wk)
	now := w.ledgerNow()
	if f == faultFail || f == faultThrottle {
		w.tracef(e.Key, "%s claim %s: %s", wk.name, w.short(e.Key), f)
		// The claim the client tried to take (its id never applied).
		return ledger.Claim{Key: e.Key, ClaimID: w.newClaimID(), Attempt: 1, LeaseUntil: now.Add(lease), AttemptedAt: now}, fmt.Errorf("simledger: claim: %w", w.faultErr(f))
	}
	c, err := l.inner.Claim(ctx, e, lease)
	if err == nil {
		kt.claimID = c.ClaimID
		w.attempts[c.ClaimID] = &attempt{claimID: c.ClaimID, worker: wk, key: e.Key}
	}
	if f == faultLost && err == nil {
		kt.lostClaim = true
		w.tracef(e.Key, "%s claim %s: applied (attempt 1), answer lost", wk.name, w.short(e.Key))
		return c, fmt.Errorf("simledger: claim: %w", w.faultErr(f))
	}
	if err == nil {
		w.held[heldKey{wk.id, e.Key}] = c.ClaimID
		w.attempts[c.ClaimID].acked = true
		w.tracef(e.Key, "%s claim %s: ok (attempt 1)", wk.name, w.short(e.Key))
	} else if cur, ok := ledger.AsConflict(err); ok {
		w.observeConflict(wk, cur)
		w.noteStale(wk, cur)
		w.tracef(e.Key, "%s claim %s: conflict (%s, attempt %d, released=%v)", wk.name, w.short(e.Key), cur.State, cur.Attempts, cur.Released)
	} else {
		w.tracef(e.Key, "%s claim %s: error %v", wk.name, w.short(e.Key), err)
	}
	return c, err
}

func (l *simLedger) TakeOver(ctx context.Context, cur ledger.Record, provider string, lease time.Duration) (ledger.Claim, error) {
	wk := l.begin(ctx, "takeover", cur.Key)
	defer l.end()
	w := l.w
	delete(w.staleSeen, heldKey{wk.id, cur.Key})
	kt := w.truth(cur.Key)
	f := w.writeFault(wk)
	now := w.ledgerNow()
	if f == faultFail || f == faultThrottle {
		w.tracef(cur.Key, "%s takeover %s: %s", wk.name, w.short(cur.Key), f)
		return ledger.Claim{Key: cur.Key, ClaimID: w.newClaimID(), Attempt: cur.Attempts + 1, LeaseUntil: now.Add(lease), AttemptedAt: now}, fmt.Errorf("simledger: takeover: %w", w.faultErr(f))
	}
	latest := kt.claimID
	before, _ := l.inner.Get(ctx, cur.Key)
	c, err := l.inner.TakeOver(ctx, cur, provider, lease)
	if err == nil {
		if latest != "" && cur.ClaimID != latest {
			w.violate(InvStaleClaim, cur.Key, fmt.Sprintf("TakeOver applied over claim %s, but the row's latest claim is %s", cur.ClaimID, latest))
		}
		kt.claimID = c.ClaimID
		a := &attempt{claimID: c.ClaimID, worker: wk, key: cur.Key}
		// A resend the class policy allows (policyResend) starts a policy
		// chain: one decision that accepts one possible duplicate. The
		// attempts that take it over after it continue the chain: a
		// released one sent nothing, and one that may have sent is looked
		// up or resent in its place. A chain may deliver once.
		if w.policyResend(wk, before) {
			w.chains++
			a.chain = w.chains
		} else if p := w.attempts[cur.ClaimID]; p != nil {
			a.chain = p.chain
		}
		w.attempts[c.ClaimID] = a
	}
	if f == faultLost && err == nil {
		kt.lostTakeOver = true
		w.tracef(cur.Key, "%s takeover %s: applied (attempt %d), answer lost", wk.name, w.short(cur.Key), c.Attempt)
		return c, fmt.Errorf("simledger: takeover: %w", w.faultErr(f))
	}
	if err == nil {
		w.held[heldKey{wk.id, cur.Key}] = c.ClaimID
		w.attempts[c.ClaimID].acked = true
		// A failover (dispatch.SendRoute) takes over the worker's own
		// released claim for the route's next provider: counted as
		// Failovers, and the sender counts one Reclaims for the route.
		prev := w.attempts[cur.ClaimID]
		switch {
		case prev != nil && prev.worker == wk && prev.released:
			w.expect(wk.service, metrics.Failovers)
			w.faults["failovers"]++
			if prev.reclaim == reclaimReleased {
				prev.reclaim = reclaimNone
				w.attempts[c.ClaimID].reclaim = reclaimPending
			}
		case wk.service == "sender":
			w.attempts[c.ClaimID].reclaim = reclaimPending
		}
		w.tracef(cur.Key, "%s takeover %s from %s: ok (attempt %d)", wk.name, w.short(cur.Key), cur.State, c.Attempt)
	} else {
		w.tracef(cur.Key, "%s takeover %s: %v", wk.name, w.short(cur.Key), short(err))
	}
	return c, err
}

func (l *simLedger) Mark(ctx context.Context, c ledger.Claim, o ledger.Outcome) (err error) {
	if o.State == ledger.StateUncertain {
		// The caller counted it before the call, whatever becomes of it.
		l.w.mu.Lock()
		l.w.expect(workerOf(ctx).service, metrics.UncertainAttempts)
		l.w.mu.Unlock()
	}
	wk := l.begin(ctx, "mark", c.Key)
	defer l.end()
	w := l.w
	delete(w.staleSeen, heldKey{wk.id, c.Key})
	if o.State == ledger.StateFailed {
		// Nothing was delivered: the dispatcher retries a failed FAILED
		// mark as it retries a Release.
		a := w.attempts[c.ClaimID]
		defer func() {
			switch {
			case err == nil || errors.Is(err, ledger.ErrFencingLost):
				w.reclaimDone(a)
			default:
				w.recordFailed(a)
			}
		}()
	} else {
		defer w.reclaimDone(w.attempts[c.ClaimID])
	}
	f := w.writeFault(wk)
	if f == faultFail || f == faultThrottle {
		w.tracef(c.Key, "%s mark %s %s: %s", wk.name, w.short(c.Key), o.State, f)
		return fmt.Errorf("simledger: mark: %w", w.faultErr(f))
	}
	kt := w.truth(c.Key)
	latest := kt.claimID
	before, _ := l.inner.Get(ctx, c.Key)
	err = l.inner.Mark(ctx, c, o)
	a := w.attempts[c.ClaimID]
	expired := err == nil && w.expiredMark(wk, c.Key, before, o) // validity.go
	if err == nil {
		if c.ClaimID != latest {
			w.violate(InvStaleClaim, c.Key, fmt.Sprintf("Mark %s applied under claim %s, but the row's latest claim is %s", o.State, c.ClaimID, latest))
		}
		w.checkTransition(before, c.Key)
		if a != nil {
			a.ended = true
		}
		switch o.State {
		case ledger.StateSent:
			if kt.delivered() == 0 {
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
				w.violate(InvAbandoned, c.Key, fmt.Sprintf("ABANDONED (%q, attempt %d) though no provider call could have delivered it%s", o.Reason, c.Attempt, kt.cause(o.Reason)))
			}
		}
	}
	if f == faultLost && err == nil {
		w.tracef(c.Key, "%s mark %s %s: applied, answer lost", wk.name, w.short(c.Key), o.State)
		return fmt.Errorf("simledger: mark: %w", w.faultErr(f))
	}
	switch {
	case err == nil && expired:
		w.expectExpired(wk)
	case err == nil:
		w.expectMark(wk, a, o.State)
		w.tracef(c.Key, "%s mark %s %s: ok", wk.name, w.short(c.Key), o.State)
	case errors.Is(err, ledger.ErrFencingLost):
		if (a != nil && a.receipt && o.State == ledger.StateSent) || o.State == ledger.StateUncertain {
			w.expect(wk.service, metrics.FencingLost)
		}
		w.tracef(c.Key, "%s mark %s %s: fenced out", wk.name, w.short(c.Key), o.State)
	default:
		w.tracef(c.Key, "%s mark %s %s: %v", wk.name, w.short(c.Key), o.State, short(err))
	}
	return err
}

func (l *simLedger) Release(ctx context.Context, c ledger.Claim, reason string, retryAt time.Time) error {
	wk := l.begin(ctx, "release", c.Key)
	defer l.end()
	w := l.w
	kt := w.truth(c.Key)
	f := w.writeFault(wk)
	a := w.attempts[c.ClaimID]
	if f == faultFail || f == faultThrottle {
		kt.releaseFailed = true
		w.recordFailed(a)
		w.tracef(c.Key, "%s release %s: %s", wk.name, w.short(c.Key), f)
		return fmt.Errorf("simledger: release: %w", w.faultErr(f))
	}
	latest := kt.claimID
	before, _ := l.inner.Get(ctx, c.Key)
	err := l.inner.Release(ctx, c, reason, retryAt)
	if err == nil {
		if c.ClaimID != latest {
			w.violate(InvStaleClaim, c.Key, fmt.Sprintf("Release applied under claim %s, but the row's latest claim is %s", c.ClaimID, latest))
		}
		w.checkTransition(before, c.Key)
		if a != nil {
			a.released = true
			a.ended = true
		}
	} else if !errors.Is(err, ledger.ErrFencingLost) {
		kt.releaseFailed = true
	}
	if f == faultLost && err == nil {
		w.tracef(c.Key, "%s release %s: applied, answer lost", wk.name, w.short(c.Key))
		w.recordFailed(a) // the dispatcher retries: fenced, or a no-op
		return fmt.Errorf("simledger: release: %w", w.faultErr(f))
	}
	switch {
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
	case errors.Is(err, ledger.ErrFencingLost):
		w.reclaimDone(a)
		w.tracef(c.Key, "%s release %s: %v", wk.name, w.short(c.Key), short(err))
	default:
		w.recordFailed(a)
		w.tracef(c.Key, "%s release %s: %v", wk.name, w.short(c.Key), short(err))
	}
	return err
}

func (l *simLedger) Get(ctx context.Context, key string) (ledger.Record, error) {
	wk := l.begin(ctx, "get", key)
	defer l.end()
	if f := l.w.readFault(wk); f != faultNone {
		return ledger.Record{}, fmt.Errorf("simledger: get: %w", l.w.faultErr(f))
	}
	return l.inner.Get(ctx, key)
}

func (l *simLedger) ApplyDelivery(ctx context.Context, key string, d ledger.Delivery) (bool, error) {
	wk := l.begin(ctx, "apply", key)
	defer l.end()
	w := l.w
	f := w.writeFault(wk)
	if f == faultFail || f == faultThrottle {
		return false, fmt.Errorf("simledger: apply delivery: %w", w.faultErr(f))
	}
	before, _ := l.inner.Get(ctx, key)
	applied, err := l.inner.ApplyDelivery(ctx, key, d)
	if err == nil {
		w.checkTransition(before, key)
		if after, gerr := l.inner.Get(ctx, key); gerr == nil && after.State != before.State {
			w.violate(InvFinalChanged, key, fmt.Sprintf("a delivery callback moved the row from %s to %s", before.State, after.State))
		}
	}
	if f == faultLost && err == nil {
		return false, fmt.Errorf("simledger: apply delivery: %w", w.faultErr(f))
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
	wk := l.begin(ctx, "attention", fmt.Sprintf("%02d", q.Shard))
	defer l.end()
	if f := l.w.readFault(wk); f != faultNone {
		return ledger.AttentionPage{}, fmt.Errorf("simledger: attention: %w", l.w.faultErr(f))
	}
	return l.inner.Attention(ctx, q)
}

// checkTransition checks a write against the row before it: a final row
// never changes state. w.mu is held.
func (w *World) checkTransition(before ledger.Record, key string) {
	after, err := w.mem.Get(context.Background(), key)
	if err == nil && before.Key != "" && before.State.Final() && after.State != before.State {
		w.violate(InvFinalChanged, key, fmt.Sprintf("a final %s row became %s", before.State, after.State))
	}
	if err == nil && after.DeliveryRank < before.DeliveryRank {
		w.violate(InvFinalChanged, key, fmt.Sprintf("delivery rank went back from %d to %d", before.DeliveryRank, after.DeliveryRank))
	}
}

func short(err error) string {
	if err == nil {
		return "ok"
	}
	switch {
	case errors.Is(err, ledger.ErrFencingLost):
		return "fenced out"
	case errors.Is(err, ledger.ErrNotFound):
		return "not found"
	case errors.Is(err, ledger.ErrExists):
		return "conflict"
	}
	return err.Error()
}
