package simtest

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/metrics"
)

// Invariants, by name. Each Violation carries one.
const (
	InvDuplicate       = "duplicate-delivery"
	InvUnpermitted     = "unpermitted-resend"
	InvStaleClaim      = "stale-claim-transition"
	InvFinalChanged    = "final-state-changed"
	InvSentUndelivered = "sent-not-delivered"
	InvQuiescence      = "quiescence"
	InvStuck           = "stuck-after-drain"
	InvAbandoned       = "abandoned-never-sent"
	InvMetrics         = "metrics"
)

// checkedMetrics are the counters compared with what happened.
var checkedMetrics = []string{
	metrics.Sent, metrics.Failed, metrics.Released, metrics.Abandoned, metrics.Reclaims,
	metrics.ProviderErrors, metrics.UncertainAttempts, metrics.FencingLost, metrics.Resent,
	metrics.ReconciledSent, metrics.ReconciledFailed, metrics.DuplicatesPrevented, metrics.CallbacksApplied,
}

// checkStep checks the invariants that hold after every step.
func (w *World) checkStep() {
	for _, m := range w.msgs {
		kt := w.keys[m.key]
		p := w.provs[m.channel]
		n := kt.delivered()
		switch {
		case p.class != classPlain && n > 1:
			w.violate(InvDuplicate, m.key, fmt.Sprintf("delivered %d times through %s, which can %s", n, p.name, map[provClass]string{classDedup: "drop repeats", classLookup: "be asked"}[p.class]))
		case p.class == classPlain && n-1 > kt.policyResends:
			w.violate(InvUnpermitted, m.key, fmt.Sprintf("delivered %d times through %s with %d class-policy resends", n, p.name, kt.policyResends))
		}
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
		dlq := slices.ContainsFunc(m.sqs, func(s *sqsMsg) bool { return s.dlq })
		if !dlq {
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
		// A first claim is not in the attention index (package ledger,
		// "Why no message is stranded"): if its worker died and every
		// receive of the message ran out, the message waits in the DLQ
		// (alarmed) for `sendonce dlq redrive`, whose redelivery takes the
		// row over. That is the designed resting state, not a stranding.
		if !r.Indexed() && slices.ContainsFunc(m.sqs, func(s *sqsMsg) bool { return s.dlq }) {
			continue
		}
		w.violate(InvStuck, m.key, fmt.Sprintf("row still %s (attempt %d) after %d calm reconciler runs; %d expired rows in the index", r.State, r.Attempts, drainRounds, w.faults["expired_backlog_rows"]))
	}
}
