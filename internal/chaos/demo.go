package chaos

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/sendonce/sendonce/internal/ddbfront"
	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/localpipeline"
	"github.com/sendonce/sendonce/internal/metrics"
	"github.com/sendonce/sendonce/internal/provider/simulator"
)

// Demo returns make demo's plan for n messages and seed: every lane, as
// in Defaults, under the faults a person's first look should show and
// no more: copies of a message on the queue (some handed to two
// instances at once), provider refusals and sends left without an answer
// after the provider took them (the reconciler settles them), planned
// rejections, callbacks posted twice and out of order, DynamoDB answers
// lost (the SDK's retry finds the write). No outage, no DynamoDB
// throttling storm, no SIGKILL: a small run drains in well under a
// minute.
func Demo(n int, seed uint64) Options {
	o := Defaults(n, seed)
	o.Invalid = 6 // one of each kind
	o.Redeliver, o.RedeliverSpread = 0.10, 4*time.Second
	o.Concurrent = 0.05
	o.CrashEvery = 0
	o.ProviderFaults = simulator.RandomFaults{StatusRate: 0.03, Statuses: []int{503, 429}, TimeoutAfterRate: 0.02}
	o.SendFaults = SendFaults{Transient: 0.03, After: 0.01}
	o.Slow, o.Permanent, o.Undeliverable = 0, 0.01, 0.01
	o.Latency, o.Jitter = 5*time.Millisecond, 20*time.Millisecond
	o.Callbacks = simulator.CallbackOptions{Duplicates: 1, Reorder: true, Workers: 4}
	o.Storm = ddbfront.Storm{DropRate: 0.01}
	o.Outage = 0
	o.FaultWindow, o.Timeout = 15*time.Second, 2*time.Minute
	o.ProgressEvery = 5 * time.Second
	return o
}

// WriteSummary prints r the way make demo shows it: a few lines per
// adapter (what it delivered, what happened on the way), the faults
// injected, and one verdict line, RESULT: OK or RESULT: FAILED with the
// violations. WriteTable prints everything.
func (r Report) WriteSummary(out io.Writer) {
	fmt.Fprintf(out, "sendonce demo: %d messages (+%d invalid) through %d adapters as %d SQS messages, %s (faults on for %s, seed %d)\n\n",
		r.N, r.Invalid, len(r.Lanes), r.Copies, r.Elapsed.Round(100*time.Millisecond), r.FaultTime.Round(100*time.Millisecond), r.Seed)
	for _, l := range r.Lanes {
		writeLaneSummary(out, l)
	}
	var faults []string
	for _, f := range r.Faults {
		if f.Injected > 0 {
			faults = append(faults, fmt.Sprintf("%s %d", f.Fault, f.Injected))
		}
	}
	if len(faults) == 0 {
		faults = []string{"none"}
	}
	writeWrapped(out, "", "Faults injected over every lane: "+strings.Join(faults, "; ")+".")
	twice, lost, leaks := 0, 0, 0
	for _, l := range r.Lanes {
		twice += l.DeliveredTwice - l.TwiceByPolicy
		lost += l.Lost
		leaks += len(l.Leaks)
	}
	fmt.Fprintf(out, "DELIVERED TWICE (where the adapter could prevent it) %d, LOST %d, addresses in logs %d (groundtruth.Judge against each provider's own record)\n", twice, lost, leaks)
	if r.OK() {
		fmt.Fprintln(out, "RESULT: OK: every message delivered once where its adapter can ensure it, as its class policy says where it cannot; none lost")
		return
	}
	kinds := map[string]int{}
	for _, v := range r.Violations {
		kinds[v.Kind]++
	}
	fmt.Fprintf(out, "RESULT: FAILED: %d violations (%s)\n", len(r.Violations), counts(kinds))
	for i, v := range r.Violations {
		if i == 10 {
			fmt.Fprintf(out, "  … %d more (-v prints them all, with the functions' log lines)\n", len(r.Violations)-10)
			break
		}
		fmt.Fprintf(out, "  - [%s] %s %s: %s\n", v.Lane, v.Kind, v.Key, v.Detail)
	}
}

// writeLaneSummary prints one adapter's lines of WriteSummary.
func writeLaneSummary(out io.Writer, l LaneReport) {
	about := ""
	if i := slices.IndexFunc(Lanes, func(d Lane) bool { return d.Name == l.Name }); i >= 0 {
		about = Lanes[i].About
	}
	m := l.Metrics
	fmt.Fprintf(out, "%-8s  %s through %s\n", l.Name, plural(l.N, "message"), about)
	got := []string{fmt.Sprintf("%d delivered once", l.DeliveredOnce)}
	if f := l.States[ledger.StateFailed]; f > 0 {
		got = append(got, fmt.Sprintf("%d FAILED as the provider rejected it (%s)", f, localpipeline.Counts(l.Failed, ": ", ", ")))
	}
	if l.deliveryFailed > 0 {
		got = append(got, fmt.Sprintf("%d accepted but reported undeliverable", l.deliveryFailed))
	}
	if l.TwiceByPolicy > 0 {
		got = append(got, fmt.Sprintf("%d sent twice by class policy (resent after an ambiguous send the provider cannot be asked about)", l.TwiceByPolicy))
	}
	if n := l.AbandonedByPolicy + l.AbandonedDelivered; n > 0 {
		got = append(got, fmt.Sprintf("%d abandoned by class policy after an ambiguous send (%d of them the provider had taken)", n, l.AbandonedDelivered))
	}
	if l.DeliveredTwice-l.TwiceByPolicy > 0 || l.Lost > 0 {
		got = append(got, fmt.Sprintf("DELIVERED TWICE %d, LOST %d", l.DeliveredTwice-l.TwiceByPolicy, l.Lost))
	}
	writeWrapped(out, laneIndent, strings.Join(got, "; "))

	way := []string{fmt.Sprintf("%s put on the queue, %d copies acknowledged without a send (SQS's own redeliveries too)",
		plural(l.copies, "extra copy"), m.Get(metrics.DuplicatesPrevented))}
	if n := m.Get(metrics.InFlightConflicts); n > 0 {
		way = append(way, fmt.Sprintf("%s met while another instance held the claim", plural(n, "copy")))
	}
	if n := m.Get(metrics.ProviderErrors); n > 0 {
		kinds := map[string]int{} // transient: refused, retried; ambiguous: no answer after the request was written
		for k, v := range m.ByDim {
			if kind, ok := strings.CutPrefix(k, metrics.ProviderErrors+"/kind="); ok {
				kinds[kind] += int(v)
			}
		}
		way = append(way, fmt.Sprintf("%s (%s)", plural(n, "provider error"), localpipeline.Counts(kinds, " ", ", ")))
	}
	if n := m.Get(metrics.UncertainAttempts); n > 0 {
		way = append(way, fmt.Sprintf("%s recorded UNCERTAIN", plural(n, "ambiguous send")))
	}
	if n := m.Get(metrics.ReconciledSent) + m.Get(metrics.Resent) + m.Get(metrics.Abandoned); n > 0 {
		way = append(way, fmt.Sprintf("the reconciler found %d sent by lookup, resent %d, abandoned %d", m.Get(metrics.ReconciledSent), m.Get(metrics.Resent), m.Get(metrics.Abandoned)))
	}
	if n := m.Get(metrics.CallbacksApplied) + m.Get(metrics.DuplicateCallbacks); n > 0 {
		way = append(way, fmt.Sprintf("%s (%d repeats recognised, %d out of order)", plural(n, "delivery callback"), m.Get(metrics.DuplicateCallbacks), m.Get(metrics.OutOfOrderCallbacks)))
	}
	if l.Invalid > 0 {
		way = append(way, fmt.Sprintf("%d of %s dead-lettered, each with its reason", l.DeadLettered, plural(l.Invalid, "invalid request")))
	}
	writeWrapped(out, laneIndent, "on the way: "+strings.Join(way, "; "))
	if r := l.MIME; r != nil {
		writeWrapped(out, laneIndent, fmt.Sprintf("every email the SMTP server took (%d) checked against its template: key header, subject (%d RFC 2047-encoded), parts (%d with HTML); %d wrong",
			r.Checked, r.Encoded, r.HTML, r.Wrong))
	}
}

// plural is "n thing" or "n things" ("copy": "copies").
func plural(n int, thing string) string {
	switch {
	case n == 1:
		return "1 " + thing
	case strings.HasSuffix(thing, "y"):
		return fmt.Sprintf("%d %sies", n, strings.TrimSuffix(thing, "y"))
	}
	return fmt.Sprintf("%d %ss", n, thing)
}

// laneIndent indents a lane's lines under its name.
const laneIndent = "          "

// writeWrapped prints text indented by indent, wrapped at about 100
// columns.
func writeWrapped(out io.Writer, indent, text string) {
	const width = 100
	line := indent
	for _, w := range strings.Fields(text) {
		if len(line) > len(indent) && len(line)+1+len(w) > width {
			fmt.Fprintln(out, line)
			line = indent + "  "
		}
		if len(line) > len(indent) && !strings.HasSuffix(line, " ") {
			line += " "
		}
		line += w
	}
	fmt.Fprintln(out, line)
}
