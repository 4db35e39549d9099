package chaos

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sendonce/sendonce/internal/ddbfront"
	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/localpipeline"
	"github.com/sendonce/sendonce/internal/metrics"
)

// Report is what a chaos run came to.
type Report struct {
	Seed               uint64
	N, Invalid, Copies int
	Elapsed, FaultTime time.Duration
	Outage             time.Duration
	Drained            bool

	// Faults lists each fault injected across lanes and what the
	// pipelines observed.
	Faults []FaultCount
	// Lanes is the verdict per adapter, in the order of Lanes.
	Lanes []LaneReport

	Violations []Violation
}

// OK reports whether no guarantee was broken.
func (r Report) OK() bool { return len(r.Violations) == 0 }

// Lane returns the report of the lane named name.
func (r Report) Lane(name string) (LaneReport, bool) {
	for _, l := range r.Lanes {
		if l.Name == name {
			return l, true
		}
	}
	return LaneReport{}, false
}

// faultTable builds the injected/observed rows over every lane.
func faultTable(r Report, lanes []*lane, cs CrashStats, ps ddbfront.Stats) []FaultCount {
	var m localpipeline.MetricTotals
	var twins, functionErrors, reconcileErrors, copies, throttleLogged int
	for _, l := range r.Lanes {
		m.Add(l.Metrics)
		twins += int(l.Poller.Twins)
		functionErrors += int(l.Poller.FunctionErrors)
		reconcileErrors += l.ReconcileErrors
		copies += l.copies
		throttleLogged += l.throttleLogged
	}
	inFlightGone := 0
	for _, l := range lanes {
		if h, ok := l.cp.(*httpLane); ok {
			inFlightGone += int(h.router.ClientGone())
		}
	}
	lost := func(op string) int { return int(ps.Lost[op]) }
	return []FaultCount{
		{"SQS redelivery (extra copies)", copies, m.Get(metrics.DuplicatesPrevented), "injected: SendMessage copies; observed: EMF DuplicatesPrevented (copies of a final or uncertain message acknowledged without a send)"},
		{"concurrent delivery to two instances", twins, m.Get(metrics.InFlightConflicts), "injected: twin invocations; observed: EMF InFlightConflicts (claim held by the other instance)"},
		{"SIGKILL sender bootstrap", cs.SenderKills, functionErrors, "observed: invocations failed as a whole (records reappear after the visibility timeout)"},
		{"SIGKILL reconciler bootstrap", cs.ReconcilerKills, reconcileErrors, "observed: reconciler runs that failed"},
		{"kill with a provider call in flight", cs.InFlightKills, inFlightGone, "observed: http provider requests whose caller vanished (incl. provider timeouts)"},
		{"bootstrap restarted by the emulator", cs.SenderKills + cs.ReconcilerKills + cs.AfterLostAnswer, cs.Restarts, "observed: new bootstrap pids after a kill (sampled)"},
		{"provider outage (every send refused)", int(r.Outage / time.Second), m.Dim(metrics.ProviderErrors, "kind", "transient"), "injected: seconds of outage; observed: EMF ProviderErrors kind=transient (all transient refusals)"},
		{"provider ambiguous (no answer, or an error after accepting)", 0, m.Dim(metrics.ProviderErrors, "kind", "ambiguous"), "injected: per lane below; observed: EMF ProviderErrors kind=ambiguous"},
		{"provider permanent rejection", 0, m.Dim(metrics.ProviderErrors, "kind", "permanent"), "injected: per lane below; observed: EMF ProviderErrors kind=permanent"},
		{"DynamoDB throttling (in bursts)", int(ps.Throttled), throttleLogged, fmt.Sprintf("injected: throttled requests in %d bursts; observed: throttling errors that outlived the SDK's retries (log lines)", ps.Bursts)},
		{"DynamoDB answer lost, SDK retry answered", int(ps.Dropped) - lost("claim") - lost("takeover") - lost("release"), 0, "recognised silently by the ledger (a retry finding its own write)"},
		{"DynamoDB Claim answer lost for good", lost("claim"), 0, "the write happened; the function saw only errors (its SDK retries were dropped too)"},
		{"DynamoDB TakeOver answer lost for good", lost("takeover"), 0, "as above"},
		{"DynamoDB Release answer lost for good", lost("release"), 0, "as above"},
		{"worker killed right after a lost answer", int(ps.Killed), cs.AfterLostAnswer, "injected: kills the proxy asked for; observed: bootstraps killed"},
		{"ambiguous attempts recorded UNCERTAIN", m.Get(metrics.UncertainAttempts), m.Get(metrics.ReconciledSent) + m.Get(metrics.ReconciledFailed) + m.Get(metrics.Resent) + m.Get(metrics.Abandoned),
			"injected: EMF UncertainAttempts; observed: reconciled (sent/failed by lookup, resent, abandoned)"},
	}
}

// WriteTable prints the report: faults, the verdict per adapter, the
// counterparts' faults, the metrics, the violations and the result.
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

	fmt.Fprintln(tw, "ADAPTER\tCAN\tN\tONCE\tTWICE\tTWICE BY POLICY\tLOST\tABANDONED NEVER ACCEPTED\tMISSES BY POLICY\tABANDONED (DELIVERED)\tFAILED\tDLQ\tLEAKS\tVERDICT")
	for _, l := range r.Lanes {
		bad := 0
		for _, v := range r.Violations {
			if v.Lane == l.Name {
				bad++
			}
		}
		verdict := "ok"
		if bad > 0 {
			verdict = fmt.Sprintf("%d violations", bad)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d/%d\t%d\t%s\n", l.Name, l.Capability, l.N, l.DeliveredOnce, l.DeliveredTwice, l.TwiceByPolicy, l.Lost,
			l.AbandonedNeverAccepted, l.AbandonedByPolicy, l.AbandonedDelivered, l.States[ledger.StateFailed], l.DeadLettered, l.Invalid, len(l.Leaks), verdict)
	}
	_ = tw.Flush()
	for _, l := range r.Lanes {
		if l.Summary != "" {
			fmt.Fprintln(out, l.Summary)
		}
	}
	fmt.Fprintln(out, "  (LOST must be 0 everywhere; TWICE other than BY POLICY, and ABANDONED NEVER ACCEPTED, must be 0; a policy's repeats and misses are counted per class below)")
	fmt.Fprintln(out)

	fmt.Fprintln(tw, "ADAPTER\tCLASS\tMESSAGES\tDUPLICATES (POLICY)\tMISSES (POLICY)")
	for _, l := range r.Lanes {
		if !l.Capability.SettledByPolicy() {
			continue
		}
		for _, c := range slices.Sorted(maps.Keys(l.Classes)) {
			cc := l.Classes[c]
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\n", l.Name, c, cc.Messages, cc.Duplicates, cc.Misses)
		}
	}
	_ = tw.Flush()
	fmt.Fprintln(out, "  (adapters whose ambiguous attempts a class policy settles, those that can neither drop repeats nor be asked: the policy trades a duplicate (resend) against a miss (abandon))")
	fmt.Fprintln(out)

	fmt.Fprintln(tw, "ADAPTER\tDETAIL")
	for _, l := range r.Lanes {
		fmt.Fprintf(tw, "%s\tstates: %s; failed: %s; never enqueued (run timed out): %d\n", l.Name, localpipeline.Counts(l.States, " ", ", "), localpipeline.Counts(l.Failed, ": ", "; "), l.NotFed)
		if len(l.NeverAcceptedCauses) > 0 {
			fmt.Fprintf(tw, "%s\tabandoned, never accepted, by cause: %s\n", l.Name, counts(l.NeverAcceptedCauses))
		}
		fmt.Fprintf(tw, "%s\tcounterpart faults: %s; slow first answers planned %d; redelivered copies %d\n", l.Name, counts(l.Faults), l.slow, l.copies)
		fmt.Fprintf(tw, "%s\tsender invocations %d (%d records, %d deleted, %d reported in batchItemFailures, %d whole-batch failures, %d twins); reconciler runs %d (%d failed); redriven to the DLQ %d (%d resolved), sent back from it (an operator's redrive) %d\n",
			l.Name, l.Poller.Invocations, l.Poller.Records, l.Poller.Deleted, l.Poller.Reported, l.Poller.FunctionErrors, l.Poller.Twins, l.ReconcileRuns, l.ReconcileErrors, l.Redriven, l.RedrivenResolved, l.OperatorRedriven)
		fmt.Fprintf(tw, "%s\tEMF: %s\n", l.Name, emf(l))
	}
	_ = tw.Flush()
	fmt.Fprintln(out)

	kinds := map[string]int{}
	for _, v := range r.Violations {
		kinds[v.Kind]++
	}
	fmt.Fprintf(out, "VIOLATIONS: %d (%s)\n", len(r.Violations), counts(kinds))
	// The rarest kinds first: a timed-out run's many "lost" rows must not
	// hide the one violation that explains it.
	vs := slices.Clone(r.Violations)
	slices.SortStableFunc(vs, func(a, b Violation) int { return cmp.Compare(kinds[a.Kind], kinds[b.Kind]) })
	for i, v := range vs {
		if i == 50 {
			fmt.Fprintf(out, "  … %d more\n", len(vs)-50)
			break
		}
		fmt.Fprintf(out, "  - [%s] %s %s: %s\n", v.Lane, v.Kind, v.Key, v.Detail)
		for j, e := range v.Events {
			if j == 40 {
				fmt.Fprintf(out, "      … %d more log lines\n", len(v.Events)-40)
				break
			}
			fmt.Fprintf(out, "      %s\n", e)
		}
	}
	if r.OK() {
		fmt.Fprintln(out, "RESULT: OK: through every adapter, no message lost, none delivered twice where the provider can prevent it")
	} else {
		fmt.Fprintln(out, "RESULT: FAILED")
	}
}

func emf(l LaneReport) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(l.Metrics.Counts)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, int(l.Metrics.Counts[k])))
	}
	return strings.Join(parts, ", ")
}

func counts(m map[string]int) string { return localpipeline.Counts(m, " ", ", ") }
