package simtest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/sendonce/sendonce/internal/decide"
	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/metrics"
)

// Invariants, by name. Each Violation carries one.
const (
	InvDuplicate       = "duplicate-delivery"
	InvStaleClaim      = "stale-claim-transition"
	InvSentUndelivered = "sent-not-delivered"
	InvQuiescence      = "quiescence"
	InvStuck           = "stuck-after-drain"
	InvAbandoned       = "abandoned-never-sent"
	InvMetrics         = "metrics"
	InvFailedUnrefused = "failed-not-refused"
	InvElsewhere       = "resent-elsewhere"
	InvTextNotPinned   = "text-not-pinned"
	InvStaleLeft       = "stale-claim-left"
)

// invariants lists every invariant in the order reports show them.
var invariants = []string{
	InvDuplicate, InvElsewhere, InvStaleClaim, InvSentUndelivered,
	InvFailedUnrefused, InvTextNotPinned, InvQuiescence, InvStuck, InvStaleLeft, InvAbandoned, InvMetrics,
	InvSentExpired, InvExpiredEarly,
}

// checkedMetrics are the counters compared with what happened.
var checkedMetrics = []string{
	metrics.Sent, metrics.Failed, metrics.Released, metrics.Abandoned, metrics.Reclaims,
	metrics.ProviderErrors, metrics.UncertainAttempts, metrics.FencingLost, metrics.Resent,
	metrics.ReconciledSent, metrics.ReconciledFailed, metrics.DuplicatesPrevented, metrics.CallbacksApplied,
	metrics.Failovers, metrics.Expired,
}

// checkStep checks the invariants that hold after every step.
func (w *World) checkStep() {
	for _, m := range w.msgs {
		kt := w.keys[m.key]
		n := len(kt.deliveries)
		if n-1 <= len(kt.chains) {
			continue
		}
		w.violate(InvDuplicate, m.key, fmt.Sprintf("delivered %d times through %v with %d class-policy resends", n, kt.deliveredBy, len(kt.chains)))
	}
	for _, svc := range []string{"sender", "reconciler", "webhook"} {
		counts := w.tally[svc].Snapshot()
		for _, name := range checkedMetrics {
			got, want := counts[name], w.exp[svc][name]
			if svc == "sender" && name == metrics.Reclaims {
				// Counted once the attempt taken over returns.
				if slack := w.reclaimSlack(); got < want || got > want+slack {
					w.violate(InvMetrics, "", fmt.Sprintf("sender Reclaims = %d, but %d happened (and %d more may have)", got, want, slack))
				}
				continue
			}
			if got != want {
				w.violate(InvMetrics, "", fmt.Sprintf("%s %s = %d, but %d happened", svc, name, got, want))
			}
		}
	}
}

// checkQuiescence: once the workload is done, every valid message is
// final, owned by the reconciler (UNCERTAIN, or PENDING whose lease will
// pass), or in the DLQ; none was acknowledged without a live row.
func (w *World) checkQuiescence() {
	for _, m := range w.msgs {
		_, err := w.mem.Get(context.Background(), m.key)
		if err == nil {
			continue
		}
		if !errors.Is(err, ledger.ErrNotFound) {
			w.violate(InvQuiescence, m.key, err.Error())
			continue
		}
		if !slices.ContainsFunc(m.sqs, func(s *sqsMsg) bool { return s.dlq }) {
			w.violate(InvQuiescence, m.key, "the message was acknowledged but no live ledger row records it (never sent)")
		}
	}
}

// checkDrained: after the calm reconciler runs, every row of the workload
// is final.
func (w *World) checkDrained() {
	for _, m := range w.msgs {
		r, err := w.mem.Get(context.Background(), m.key)
		if err != nil || r.State.Final() {
			continue
		}
		// A first claim is not in the attention index (package ledger, "Why
		// no message is stranded"): once its worker died and every receive
		// ran out, its message waits in the DLQ (alarmed) for `sendonce dlq
		// redrive`, whose redelivery takes the row over: by design.
		if !r.Indexed() && slices.ContainsFunc(m.sqs, func(s *sqsMsg) bool { return s.dlq }) {
			continue
		}
		// A busy number: the Twilio adapter's search cannot complete (more
		// messages to the recipient than its page cap reads), so the row
		// waits, UNCERTAIN, for its maximum age (docs/providers.md).
		if w.keys[m.key].searchIncomplete && r.Indexed() {
			w.faults["rows_waiting_on_busy_numbers"]++
			continue
		}
		w.violate(InvStuck, m.key, fmt.Sprintf("row still %s (attempt %d) after %d calm reconciler runs; %d expired rows in the index", r.State, r.Attempts, drainRounds, w.faults["expired_backlog_rows"]))
	}
}

// checkSend checks a provider call that sends key's message with text
// body through p, before it is made: the text is the one the key's row
// pins (never the tenant's latest template), and no other provider may
// already have the message (a send reached it and may have delivered:
// accepted, or no answer). w.mu is held.
func (w *World) checkSend(p *simProvider, key, body string) {
	kt := w.truth(key)
	for _, name := range slices.Sorted(maps.Keys(kt.reached)) {
		if name != p.name {
			w.violate(InvElsewhere, key, fmt.Sprintf("sent through %s, but an earlier send reached %s, which may have delivered it", p.name, name))
			break
		}
	}
	r, err := w.mem.Get(context.Background(), key)
	w.checkValidSend(p, key, r) // validity.go
	if err != nil || r.Attempts == 1 && !r.Released {
		// A first attempt sends what the request rendered to when its row
		// was claimed with that render's inputs: nothing to compare.
		return
	}
	want, ok := w.pinnedText(r)
	switch {
	case !ok:
		w.violate(InvTextNotPinned, key, fmt.Sprintf("sent %q through %s, but its row holds no message", body, p.name))
	case body != want:
		w.violate(InvTextNotPinned, key, fmt.Sprintf("sent %q through %s, but its row pins %q (template version %d)", body, p.name, want, r.TemplateVersion))
	}
}

// checkFailed checks a FAILED mark of key over row before: a row is
// FAILED only when its message was refused (a provider refused the
// key's send, or the carrier failed the key's own message) or the row
// holds no message (its request could not be rendered when first
// claimed). A message whose row pins a template version is never FAILED
// because the tenant's latest version cannot render it. w.mu is held.
func (w *World) checkFailed(key string, before ledger.Record, reason string) {
	kt := w.truth(key)
	if kt.refused {
		return
	}
	now := w.now()
	for _, name := range slices.Sorted(maps.Keys(kt.reached)) {
		for _, d := range w.byName[name].sent {
			if d.key == key && d.failedAt(now.Add(w.byName[name].skew)) {
				return
			}
		}
	}
	if _, ok := w.pinnedText(before); !ok {
		return
	}
	w.violate(InvFailedUnrefused, key, fmt.Sprintf("FAILED (%q), but no provider refused its message and its row pins one (template version %d)", reason, before.TemplateVersion))
}

// noteStale notes that sender wk found key's first claim stale (PENDING,
// lease passed by more than the clocks' error, not released, not taken
// over, so not in the attention index): it must take the row over or mark
// it UNCERTAIN, or nobody but a later redelivery ever sees it. Only a
// worker that found it late in its invocation (less than a lookup and a
// send left, decide.TakeOverBudget) may leave it, and only when its
// function's timeout leaves the next delivery that time. w.mu is held.
func (w *World) noteStale(wk *worker, cur ledger.Record) {
	now := w.ledgerNow()
	if wk.service != "sender" || cur.State != ledger.StatePending || cur.Released || cur.Indexed() || now.Sub(cur.LeaseUntil) <= 2*maxSkew {
		return
	}
	budget := decide.TakeOverBudget(providerTimeout)
	if wk.deadline.Sub(w.now()) < budget+time.Second && wk.timeout >= 2*budget {
		return
	}
	w.staleSeen[heldKey{wk.id, cur.Key}] = wk.deadline.Sub(w.now())
}

// checkStaleLeft, once sender wk has returned, reports every stale first
// claim it found and left as it was. w.mu is held, or the bubble is
// quiet.
func (w *World) checkStaleLeft(wk *worker) {
	var keys []string
	for hk := range w.staleSeen {
		if hk.worker == wk.id {
			keys = append(keys, hk.key)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		left := w.staleSeen[heldKey{wk.id, k}]
		delete(w.staleSeen, heldKey{wk.id, k})
		if !wk.dead {
			w.violate(InvStaleLeft, k, fmt.Sprintf("%s (function timeout %s, %s left) found the first claim stale and left it as it was (neither taken over nor marked UNCERTAIN): the reconciler never sees it, and the message may reach the dead-letter queue",
				wk.name, wk.timeout, left.Round(time.Millisecond)))
		}
	}
}
