package chaos

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/metrics"
	"github.com/sendonce/sendonce/internal/provider/simulator"
)

// faultTable builds the injected/observed rows.
func faultTable(r Report, copies, slow int, cs CrashStats, ps ProxyStats, rt *Router, sims []*simulator.Simulator, o Options) []FaultCount {
	var st simulator.Stats
	st.Faults = map[simulator.FaultKind]int{}
	for _, s := range sims {
		x := s.Stats()
		st.Sends += x.Sends
		st.Accepted += x.Accepted
		st.DuplicatesSuppressed += x.DuplicatesSuppressed
		st.CallbacksSent += x.CallbacksSent
		for k, v := range x.Faults {
			st.Faults[k] += v
		}
	}
	m := r.Metrics
	permanent := int(float64(r.N)*o.Permanent + 0.5)
	transient := st.Faults[simulator.FaultStatus] - min(permanent, st.Faults[simulator.FaultStatus])
	ambiguous := st.Faults[simulator.FaultTimeoutBeforeAccept] + st.Faults[simulator.FaultTimeoutAfterAccept] +
		st.Faults[simulator.FaultResetBeforeAccept] + st.Faults[simulator.FaultResetAfterAccept]
	perCallback := 1 + max(o.Callbacks.Duplicates, 0)
	return []FaultCount{
		{"SQS redelivery (extra copies)", copies, m.Get(metrics.DuplicatesPrevented), "injected: SendMessage copies; observed: EMF DuplicatesPrevented (copies of a final or uncertain message acknowledged without a send)"},
		{"concurrent delivery to two instances", int(r.Poller.Twins), m.Get(metrics.InFlightConflicts), "injected: twin invocations; observed: EMF InFlightConflicts (claim held by the other instance)"},
		{"SIGKILL sender bootstrap", cs.SenderKills, int(r.Poller.FunctionErrors), "observed: invocations failed as a whole (records reappear after the visibility timeout)"},
		{"SIGKILL reconciler bootstrap", cs.ReconcilerKills, r.ReconcileErrors, "observed: reconciler runs that failed"},
		{"kill with a provider call in flight", cs.InFlightKills, int(rt.ClientGone()), "observed: provider requests whose caller vanished (incl. provider timeouts)"},
		{"bootstrap restarted by the emulator", cs.SenderKills + cs.ReconcilerKills, cs.Restarts, "observed: new bootstrap pids after a kill (sampled)"},
		{"provider 5xx/429", transient, m.Dim(metrics.ProviderErrors, "kind", "transient"), "observed: EMF ProviderErrors kind=transient"},
		{"provider timeout/reset before or after accept", ambiguous, m.Dim(metrics.ProviderErrors, "kind", "ambiguous"), "observed: EMF ProviderErrors kind=ambiguous (also slow answers past the timeout)"},
		{"provider slow answer (0.7-1.3x timeout)", slow, st.Faults[simulator.FaultLatency], "observed: slow answers the simulator served"},
		{"provider permanent rejection (400)", permanent, m.Dim(metrics.ProviderErrors, "kind", "permanent"), "observed: EMF ProviderErrors kind=permanent"},
		{"undeliverable (accepted, then failed)", st.Faults[simulator.FaultUndeliverable], r.deliveryFailed, "observed: rows whose delivery status is failed"},
		{"duplicate callbacks", st.CallbacksSent - st.CallbacksSent/perCallback, m.Get(metrics.DuplicateCallbacks), "observed: EMF DuplicateCallbacks"},
		{"reordered callbacks (final before sent)", boolInt(o.Callbacks.Reorder) * st.Accepted, m.Get(metrics.OutOfOrderCallbacks), "observed: EMF OutOfOrderCallbacks"},
		{"DynamoDB throttling (in bursts)", int(ps.Throttled), r.throttleLogged, fmt.Sprintf("injected: throttled requests in %d bursts; observed: throttling errors that outlived the SDK's retries (log lines); the message was retried", ps.Bursts)},
		{"DynamoDB response lost after the write", int(ps.Dropped), 0, "recognised silently by the ledger (a retry finding its own write)"},
		{"ambiguous send on the lookup-only provider", m.Get(metrics.UncertainAttempts), m.Get(metrics.ReconciledSent) + m.Get(metrics.ReconciledFailed) + m.Get(metrics.Resent), "injected: EMF UncertainAttempts; observed: reconciled by lookup (sent/failed) or resent after settle"},
		{"provider repeats dropped (Idempotency-Key)", st.DuplicatesSuppressed, st.DuplicatesSuppressed, "sends the idempotent simulator answered with the original"},
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// WriteTable prints the report: faults, outcomes, metrics, violations,
// and the verdict.
func (r Report) WriteTable(out io.Writer) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "sendonce chaos: seed %d, %d valid + %d invalid messages as %d SQS messages, %s (faults on for %s)\n\n",
		r.Seed, r.N, r.Invalid, r.Copies, r.Elapsed.Round(100*time.Millisecond), r.FaultTime.Round(100*time.Millisecond))
	fmt.Fprintln(tw, "FAULT\tINJECTED\tOBSERVED\tHOW")
	for _, f := range r.Faults {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\n", f.Fault, f.Injected, f.Observed, f.How)
	}
	_ = tw.Flush()
	fmt.Fprintln(out)
	fmt.Fprintln(tw, "OUTCOME\tCOUNT\tDETAIL")
	fmt.Fprintf(tw, "delivered exactly once (SENT)\t%d\t\n", r.DeliveredOnce)
	fmt.Fprintf(tw, "FAILED with a reason\t%d\t%s\n", r.States[ledger.StateFailed], reasons(r.Failed))
	fmt.Fprintf(tw, "ABANDONED by policy\t%d\t%d of them had reached the provider once\n", r.Abandoned, r.AbandonedDelivered)
	fmt.Fprintf(tw, "ledger states\t%d\t%s\n", r.N, states(r.States))
	fmt.Fprintf(tw, "invalid → DLQ with reason\t%d\tof %d\n", r.DeadLettered, r.Invalid)
	fmt.Fprintf(tw, "valid redriven to the DLQ\t%d\t%d resolved from their ledger row\n", r.Redriven, r.RedrivenResolved)
	fmt.Fprintf(tw, "sender invocations\t%d\t%d records, %d deleted, %d reported in batchItemFailures, %d whole-batch failures, %d twins (%d skipped: no free instance)\n",
		r.Poller.Invocations, r.Poller.Records, r.Poller.Deleted, r.Poller.Reported, r.Poller.FunctionErrors, r.Poller.Twins, r.Poller.TwinSkipped)
	fmt.Fprintf(tw, "reconciler runs\t%d\t%d failed\n", r.ReconcileRuns, r.ReconcileErrors)
	_ = tw.Flush()
	fmt.Fprintln(out)
	fmt.Fprintln(tw, "METRIC (EMF)\tSUM")
	for _, k := range slices.Sorted(maps.Keys(r.Metrics.Counts)) {
		fmt.Fprintf(tw, "%s\t%d\n", k, int(r.Metrics.Counts[k]))
	}
	_ = tw.Flush()
	fmt.Fprintln(out)
	kinds := map[string]int{}
	for _, v := range r.Violations {
		kinds[v.Kind]++
	}
	fmt.Fprintf(out, "VIOLATIONS: %d (delivered twice %d, lost %d)\n", len(r.Violations), kinds["delivered twice"], kinds["lost"])
	for i, v := range r.Violations {
		if i == 50 {
			fmt.Fprintf(out, "  … %d more\n", len(r.Violations)-50)
			break
		}
		fmt.Fprintf(out, "  - %s %s: %s\n", v.Kind, v.Key, v.Detail)
		for j, e := range v.Events {
			if j == 30 {
				fmt.Fprintf(out, "      … %d more log lines\n", len(v.Events)-30)
				break
			}
			fmt.Fprintf(out, "      %s\n", e)
		}
	}
	if r.OK() {
		fmt.Fprintln(out, "RESULT: OK: every valid message delivered at most once, none lost")
	} else {
		fmt.Fprintln(out, "RESULT: FAILED")
	}
}

func reasons(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s: %d", k, m[k]))
	}
	return strings.Join(parts, "; ")
}

func states(m map[ledger.State]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
