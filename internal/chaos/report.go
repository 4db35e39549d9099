package chaos

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
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
func faultTable(r Report, outage time.Duration, cs CrashStats, ps ddbfront.Stats) []FaultCount {
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
	lost := func(op string) int { return int(ps.Lost[op]) }
	return []FaultCount{
		{"SQS redelivery (extra copies)", copies, m.Get(metrics.DuplicatesPrevented), "injected: SendMessage copies; observed: EMF DuplicatesPrevented (copies of a final or uncertain message acknowledged without a send)"},
		{"concurrent delivery to two instances", twins, m.Get(metrics.InFlightConflicts), "injected: twin invocations; observed: EMF InFlightConflicts (claim held by the other instance)"},
		{"SIGKILL sender bootstrap", cs.SenderKills, functionErrors, "observed: invocations failed as a whole (records reappear after the visibility timeout)"},
		{"SIGKILL reconciler bootstrap", cs.ReconcilerKills, reconcileErrors, "observed: reconciler runs that failed"},
		{"provider refusals (injected: the outage's seconds)", int(outage / time.Second), m.Dim(metrics.ProviderErrors, "kind", "transient"), "injected: seconds of outage, every send refused (random refusals per lane below); observed: EMF ProviderErrors kind=transient (all transient refusals)"},
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

// Write prints the report: the faults injected and observed, the verdict
// per adapter and per class, the violations and the RESULT line. verbose
// (make chaos; make demo -v) adds where each fault figure comes from,
// every lane's detail (states, the counterpart's faults, the poller and
// reconciler, EMF) and the functions' log lines about each violation's
// key; without it (make demo) the fault table shows only the faults that
// counted something, and the first 10 violations.
func (r Report) Write(out io.Writer, verbose bool) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "sendonce chaos: seed %d, %d valid + %d invalid messages through %d adapters as %d SQS messages, %s (faults on for %s)\n\n",
		r.Seed, r.N, r.Invalid, len(r.Lanes), r.Copies, r.Elapsed.Round(100*time.Millisecond), r.FaultTime.Round(100*time.Millisecond))
	fmt.Fprintf(tw, "FAULT\tINJECTED\tOBSERVED%s\n", map[bool]string{true: "\tHOW"}[verbose])
	for _, f := range r.Faults {
		switch {
		case verbose:
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\n", f.Fault, f.Injected, f.Observed, f.How)
		case f.Injected+f.Observed > 0:
			fmt.Fprintf(tw, "%s\t%d\t%d\n", f.Fault, f.Injected, f.Observed)
		}
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
		if c := l.MIME; c != nil {
			fmt.Fprintf(out, "%s content: %d messages the server took checked against what their templates render (key header, subject, parts): %d with an HTML part (multipart/alternative), %d with an RFC 2047-encoded subject; %d wrong\n",
				l.Name, c.Checked, c.HTML, c.Encoded, c.Wrong)
		}
	}
	fmt.Fprintln(out, "  (verdict by groundtruth.Judge against each provider's own record. LOST must be 0 everywhere; TWICE other than BY POLICY, and ABANDONED NEVER ACCEPTED, must be 0; a policy's repeats and misses are counted per class below)")
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

	if verbose {
		fmt.Fprintln(tw, "ADAPTER\tDETAIL")
		for _, l := range r.Lanes {
			fmt.Fprintf(tw, "%s\tstates: %s; failed: %s; never enqueued (run timed out): %d\n", l.Name, counts(l.States), localpipeline.Counts(l.Failed, ": ", "; "), l.NotFed)
			fmt.Fprintf(tw, "%s\tcounterpart faults: %s; slow first answers planned %d; redelivered copies %d\n", l.Name, counts(l.Faults), l.slow, l.copies)
			fmt.Fprintf(tw, "%s\tsender invocations %d (%d records, %d deleted, %d reported in batchItemFailures, %d whole-batch failures, %d twins); reconciler runs %d (%d failed); found on the DLQ and sent back (an operator's redrive) %d\n",
				l.Name, l.Poller.Invocations, l.Poller.Records, l.Poller.Deleted, l.Poller.Reported, l.Poller.FunctionErrors, l.Poller.Twins, l.ReconcileRuns, l.ReconcileErrors, l.Redriven)
			emf := map[string]int{}
			for k, v := range l.Metrics.Counts {
				emf[k] = int(v)
			}
			fmt.Fprintf(tw, "%s\tEMF: %s\n", l.Name, counts(emf))
		}
		_ = tw.Flush()
		fmt.Fprintln(out)
	}

	kinds := map[string]int{}
	for _, v := range r.Violations {
		kinds[v.Kind]++
	}
	if r.OK() {
		fmt.Fprintln(out, "RESULT: OK: through every adapter, no message lost, none delivered twice where the provider can prevent it")
		return
	}
	fmt.Fprintf(out, "RESULT: FAILED: %d violations (%s)\n", len(r.Violations), counts(kinds))
	// The rarest kinds first: a timed-out run's many "lost" rows must not
	// hide the one violation that explains it.
	vs := slices.Clone(r.Violations)
	slices.SortStableFunc(vs, func(a, b Violation) int { return cmp.Compare(kinds[a.Kind], kinds[b.Kind]) })
	limit := 10
	if verbose {
		limit = 50
	}
	for i, v := range vs {
		if i == limit {
			fmt.Fprintf(out, "  … %d more\n", len(vs)-limit)
			break
		}
		fmt.Fprintf(out, "  - [%s] %s %s: %s\n", v.Lane, v.Kind, v.Key, v.Detail)
		for j, e := range v.Events {
			if !verbose {
				break
			}
			if j == 40 {
				fmt.Fprintf(out, "      … %d more log lines\n", len(v.Events)-40)
				break
			}
			fmt.Fprintf(out, "      %s\n", e)
		}
	}
}

// counts is "k v, k v" in key order ("none" when m is empty).
func counts[K cmp.Ordered](m map[K]int) string { return localpipeline.Counts(m, " ", ", ") }
