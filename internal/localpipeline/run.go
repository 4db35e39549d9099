package localpipeline

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sendonce/sendonce/internal/groundtruth"
	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/metrics"
	"github.com/sendonce/sendonce/internal/provider/simulator"
	"github.com/sendonce/sendonce/internal/sender"
)

// RunOptions bounds and reports a Run.
type RunOptions struct {
	// Timeout bounds the run from the first enqueue to the drained
	// pipeline. Default 90s.
	Timeout time.Duration
	// LateAfter is when the late copies are sent. Default 4s.
	LateAfter time.Duration
	// ProgressEvery is the interval of progress lines. Default 2s.
	ProgressEvery time.Duration
	// MaxDepth bounds the queue's depth while the workload is fed
	// (Feeder); zero means DefaultMaxDepth.
	MaxDepth int
	// Progress receives the progress lines; nil discards.
	Progress io.Writer
}

// Report is what a run came to, from ground truth: the simulator's record
// of deliveries, the ledger's rows and the dead-letter queue, plus the
// counters the functions emitted (EMF) for what ground truth cannot see.
type Report struct {
	Elapsed time.Duration
	// Drained is true when the queue emptied and no row needed attention
	// before the timeout.
	Drained bool

	// Logical counts logical messages (valid + invalid); Copies the SQS
	// messages sent for them.
	Logical, Valid, Invalid, Copies int

	// Delivered counts the workload's references the simulator delivered
	// at least once; ProviderRepeats counts sends the simulator answered
	// with an earlier message (same Idempotency-Key).
	Delivered, ProviderRepeats int
	// States counts the final ledger state of each valid message.
	States map[ledger.State]int
	// FailedReasons counts the reasons of FAILED rows.
	FailedReasons map[string]int
	// WrongOutcome lists keys whose final state contradicts the plan (a
	// planned permanent rejection not FAILED, or the reverse).
	WrongOutcome []string

	// Metrics sums the EMF counters of every function.
	Metrics MetricTotals
	// Reconciler totals over every scheduled run.
	ReconcileRuns, ReconcileErrors int
	ReconcileActions               map[string]int

	// DeadLetters counts the dead-letter queue's messages with a
	// sendonce-error reason (invalid requests), by field; Redriven those
	// without one (moved by the RedrivePolicy).
	DeadLetters map[string]int
	Redriven    int
	// InvalidMissing counts invalid bodies that never reached the
	// dead-letter queue.
	InvalidMissing int

	// CallbacksPosted counts callbacks the simulator posted and the
	// webhook answered 2xx (duplicates included); DeliveryStatuses counts
	// the ledger rows' delivery status.
	CallbacksPosted  int
	DeliveryStatuses map[string]int

	// DeliveredTwice lists the references delivered more than once. Lost
	// lists valid messages with no final state that were not delivered,
	// and SENT rows the provider never accepted.
	DeliveredTwice, Lost []string
	// Leaks lists every way a function's log output could expose an
	// address (LogLeaks): a raw address, a token not made under the
	// deployment's key, an instance not keyed with it.
	Leaks []string

	Poller PollerStats
}

// OK reports whether the run met every guarantee: drained, nothing
// delivered twice, nothing lost, every invalid body dead-lettered, no
// address in the logs, every EMF document valid.
func (r Report) OK() bool {
	return r.Drained && len(r.DeliveredTwice) == 0 && len(r.Lost) == 0 && r.InvalidMissing == 0 &&
		len(r.Leaks) == 0 && len(r.Metrics.Invalid) == 0 && len(r.WrongOutcome) == 0
}

// Problems returns one line per broken guarantee.
func (r Report) Problems() []string {
	var out []string
	if !r.Drained {
		out = append(out, "the pipeline did not drain before the timeout")
	}
	if n := len(r.DeliveredTwice); n > 0 {
		out = append(out, fmt.Sprintf("%d messages delivered twice: %s", n, head(r.DeliveredTwice)))
	}
	if n := len(r.Lost); n > 0 {
		out = append(out, fmt.Sprintf("%d messages lost: %s", n, head(r.Lost)))
	}
	if r.InvalidMissing > 0 {
		out = append(out, fmt.Sprintf("%d invalid requests never reached the dead-letter queue", r.InvalidMissing))
	}
	if n := len(r.WrongOutcome); n > 0 {
		out = append(out, fmt.Sprintf("%d messages ended in the wrong state: %s", n, head(r.WrongOutcome)))
	}
	for _, l := range r.Leaks {
		out = append(out, "address exposed in the logs: "+l)
	}
	for _, l := range r.Metrics.Invalid {
		out = append(out, "invalid EMF document: "+l)
	}
	return out
}

func head(s []string) string {
	if len(s) > 3 {
		return strings.Join(s[:3], ", ") + ", …"
	}
	return strings.Join(s, ", ")
}

// Run plans w's faults in the simulator, sends w through p, waits until
// the queue is drained, no ledger row needs attention and the callbacks
// are in (or the timeout passes), and returns the report. It returns an
// error only when the run could not be carried out (enqueue or reads
// failed); broken guarantees are in the report (Report.OK).
func Run(ctx context.Context, p *Pipeline, w Workload, o RunOptions) (Report, error) {
	if o.Timeout <= 0 {
		o.Timeout = 90 * time.Second
	}
	if o.LateAfter <= 0 {
		o.LateAfter = 4 * time.Second
	}
	if o.ProgressEvery <= 0 {
		o.ProgressEvery = 2 * time.Second
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	for _, f := range w.Faults() {
		if err := p.sim.AddFault(f); err != nil {
			return Report{}, fmt.Errorf("localpipeline: plan fault: %w", err)
		}
	}
	start := time.Now()
	runCtx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	feed := p.NewFeeder(o.MaxDepth)
	feed.Add(w.First...)
	if _, _, err := feed.Step(runCtx); err != nil {
		return Report{}, err
	}
	fmt.Fprintf(o.Progress, "[%5.1fs] feeding %d SQS messages (%d logical, %d late copies to follow), at most %d on the queue\n",
		time.Since(start).Seconds(), len(w.First), len(w.Messages), len(w.Late), cmp.Or(o.MaxDepth, DefaultMaxDepth))

	lateSent := len(w.Late) == 0
	drained := false
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	lastProgress := time.Now()
	quiet := 0
	for !drained {
		select {
		case <-runCtx.Done():
		case <-tick.C:
		}
		if runCtx.Err() != nil {
			break
		}
		if !lateSent && time.Since(start) >= o.LateAfter && feed.Backlog() == 0 {
			feed.Add(w.Late...)
			lateSent = true
			fmt.Fprintf(o.Progress, "[%5.1fs] feeding %d late copies of messages already sent\n", time.Since(start).Seconds(), len(w.Late))
		}
		if _, _, err := feed.Step(runCtx); err != nil {
			if runCtx.Err() != nil {
				break
			}
			return Report{}, err
		}
		st, err := p.snapshot(runCtx)
		if err != nil {
			if runCtx.Err() != nil {
				break
			}
			return Report{}, err
		}
		if time.Since(lastProgress) >= o.ProgressEvery {
			lastProgress = time.Now()
			fmt.Fprintf(o.Progress, "[%5.1fs] %s\n", time.Since(start).Seconds(), st)
		}
		if lateSent && feed.Backlog() == 0 && st.empty() {
			quiet++ // twice in a row: SQS's counts are approximate
		} else {
			quiet = 0
		}
		drained = quiet >= 2
	}
	if drained {
		WaitCallbacks(runCtx, p.sim, p.opts.Simulator.Callbacks.Duplicates)
	}
	fmt.Fprintf(o.Progress, "[%5.1fs] %s\n", time.Since(start).Seconds(), map[bool]string{true: "drained", false: "TIMED OUT before draining"}[drained])

	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 60*time.Second)
	defer rcancel()
	rep, err := buildReport(rctx, p, w)
	rep.Elapsed = time.Since(start)
	rep.Drained = drained
	return rep, err
}

// snapshot is the pipeline's state at one moment.
type snapshot struct {
	visible, inFlight, pending, uncertain, delivered int
	invocations                                      int64
}

func (s snapshot) empty() bool {
	return s.visible == 0 && s.inFlight == 0 && s.pending == 0 && s.uncertain == 0
}

func (s snapshot) String() string {
	return fmt.Sprintf("queue %d visible, %d in flight | ledger rows needing attention: %d pending, %d uncertain | delivered %d | sender invocations %d",
		s.visible, s.inFlight, s.pending, s.uncertain, s.delivered, s.invocations)
}

func (p *Pipeline) snapshot(ctx context.Context) (snapshot, error) {
	var s snapshot
	var err error
	if s.visible, s.inFlight, err = p.QueueDepth(ctx); err != nil {
		return s, err
	}
	rows, err := p.Attention(ctx)
	if err != nil {
		return s, err
	}
	s.pending, s.uncertain = Waiting(rows)
	s.delivered = len(p.sim.DeliveredAll())
	s.invocations = p.stats.invocations.Load()
	return s, nil
}

// WaitCallbacks waits (bounded by ctx) until sim, which posts each
// callback dups extra times, has posted every callback of every message
// it accepted.
func WaitCallbacks(ctx context.Context, sim *simulator.Simulator, dups int) {
	per := 2 * (1 + max(dups, 0))
	for ctx.Err() == nil {
		st := sim.Stats()
		if st.CallbacksSent+st.CallbacksFailed+st.CallbacksDropped*per >= st.Accepted*per {
			return
		}
		Sleep(ctx, 100*time.Millisecond)
	}
}

func buildReport(ctx context.Context, p *Pipeline, w Workload) (Report, error) {
	rep := Report{
		Logical: len(w.Messages), Copies: w.Copies(),
		States: map[ledger.State]int{}, FailedReasons: map[string]int{},
		DeadLetters: map[string]int{}, DeliveryStatuses: map[string]int{},
		Poller: p.Stats(),
	}
	delivered := p.sim.DeliveredAll()
	var errs []error
	for _, m := range w.Messages {
		if !m.Valid {
			rep.Invalid++
			continue
		}
		rep.Valid++
		n := delivered[m.Key]
		if n > 0 {
			rep.Delivered++
		}
		rec, state, err := p.Row(ctx, m.Key)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		rep.States[state]++
		// The simulator drops a repeat of an Idempotency-Key and can be
		// asked: groundtruth.CanAvoid.
		for _, k := range groundtruth.Judge(groundtruth.Facts{
			Key: m.Key, Adapter: "http", Class: m.Class, Capability: groundtruth.CanAvoid,
			Received: n, State: state, Reason: rec.Reason, WantFailed: m.WantFailed, RejectionHolds: m.WantFailed,
		}) {
			switch {
			case k == groundtruth.Twice:
				rep.DeliveredTwice = append(rep.DeliveredTwice, fmt.Sprintf("%s (%d times)", m.Key, n))
			case k == groundtruth.Lost && state == ledger.StateSent:
				rep.Lost = append(rep.Lost, m.Key+" (SENT in the ledger, but the provider never accepted it)")
			case k == groundtruth.Lost:
				rep.Lost = append(rep.Lost, fmt.Sprintf("%s (%s, never delivered)", m.Key, state))
			case k.Violation():
				rep.WrongOutcome = append(rep.WrongOutcome, fmt.Sprintf("%s (%s: %s, planned %s)", m.Key, state, k, m.Fault.Kind))
			}
		}
		if state == ledger.StateFailed {
			rep.FailedReasons[rec.Reason]++
		}
		if rec.DeliveryStatus != "" {
			rep.DeliveryStatuses[rec.DeliveryStatus]++
		}
	}
	sort.Strings(rep.DeliveredTwice)
	sort.Strings(rep.Lost)
	for ref, n := range delivered {
		if !slices.ContainsFunc(w.Messages, func(m Message) bool { return m.Key == ref }) {
			rep.DeliveredTwice = append(rep.DeliveredTwice, fmt.Sprintf("%s (%d times, not a workload message)", ref, n))
		}
	}

	dls, err := p.DrainDLQ(ctx)
	if err != nil {
		errs = append(errs, err)
	}
	got := map[string]int{}
	for _, d := range dls {
		if _, ok := d.Attributes[sender.AttrErrorReason]; ok {
			field := orDefault(d.Attributes[sender.AttrErrorField], "(body)")
			rep.DeadLetters[field]++
			got[d.Body]++
		} else {
			rep.Redriven++
		}
	}
	for _, m := range w.Messages {
		if m.Valid {
			continue
		}
		if got[m.Body] > 0 {
			got[m.Body]--
		} else {
			rep.InvalidMissing++
		}
	}

	st := p.sim.Stats()
	rep.ProviderRepeats = st.DuplicatesSuppressed
	rep.CallbacksPosted = st.CallbacksSent

	sum, runs, failed := p.ReconcileTotals()
	rep.ReconcileRuns, rep.ReconcileErrors, rep.ReconcileActions = runs, failed, sum.Actions

	logs := p.Logs()
	all := make([]string, 0, len(logs))
	for _, name := range slices.Sorted(maps.Keys(logs)) {
		all = append(all, logs[name])
		rep.Leaks = append(rep.Leaks, LogLeaks(name, logs[name], p.Redactor, w.Addresses())...)
	}
	rep.Metrics = ParseEMF(all...)
	return rep, errors.Join(errs...)
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// WriteSummary prints r as a table a person reads at a glance, then the
// verdict.
func (r Report) WriteSummary(out io.Writer) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	m := r.Metrics
	row := func(what string, v any, note string) { fmt.Fprintf(tw, "  %s\t%v\t%s\n", what, v, note) }
	fmt.Fprintln(tw, "sendonce local pipeline: summary (from the provider simulator, the ledger and the DLQ)")
	row("requests submitted", r.Logical, fmt.Sprintf("logical messages (%d valid, %d invalid) as %d SQS messages", r.Valid, r.Invalid, r.Copies))
	row("sent", r.Delivered, fmt.Sprintf("distinct messages the provider delivered; ledger SENT: %d", r.States[ledger.StateSent]))
	row("duplicates prevented", m.Get(metrics.DuplicatesPrevented), "redeliveries acknowledged without a send (EMF DuplicatesPrevented)")
	row("in-flight conflicts", m.Get(metrics.InFlightConflicts), fmt.Sprintf("copies met while another worker held the claim; retried later (reclaims %d)", m.Get(metrics.Reclaims)))
	row("provider errors", m.Get(metrics.ProviderErrors), fmt.Sprintf("transient %d, ambiguous (no answer after the request was written) %d, permanent %d; claims released (nothing sent) for a retry: %d",
		m.Dim(metrics.ProviderErrors, "kind", "transient"), m.Dim(metrics.ProviderErrors, "kind", "ambiguous"), m.Dim(metrics.ProviderErrors, "kind", "permanent"), m.Get(metrics.Released)))
	uncertain := m.Get(metrics.UncertainAttempts)
	row("uncertain → resolved", fmt.Sprintf("%d → %d", uncertain, uncertain-r.States[ledger.StateUncertain]),
		"ambiguous attempts recorded UNCERTAIN; the reconciler settles each through its provider (lookup, or a repeat with the same key)")
	row("reconciler", r.ReconcileRuns, fmt.Sprintf("scheduled runs (%d failed): %d found sent, %d found failed, %d resent with the same key, %d abandoned",
		r.ReconcileErrors, m.Get(metrics.ReconciledSent), m.Get(metrics.ReconciledFailed), m.Get(metrics.Resent), m.Get(metrics.Abandoned)))
	row("failed (permanent)", r.States[ledger.StateFailed], Counts(r.FailedReasons, ": ", ", "))
	row("invalid → DLQ", sumMap(r.DeadLetters), Counts(r.DeadLetters, ": ", ", ")+fmt.Sprintf("; redriven by maxReceiveCount: %d", r.Redriven))
	row("abandoned", r.States[ledger.StateAbandoned], "given up by reconciler policy")
	row("callbacks", r.CallbacksPosted, fmt.Sprintf("posted; duplicates recognised %d, out of order %d, applied %d; delivery statuses: %s",
		m.Get(metrics.DuplicateCallbacks), m.Get(metrics.OutOfOrderCallbacks), m.Get(metrics.CallbacksApplied), Counts(r.DeliveryStatuses, ": ", ", ")))
	row("provider repeats", r.ProviderRepeats, "retries of an ambiguous send the provider answered with the original (same Idempotency-Key)")
	row("sender invocations", r.Poller.Invocations, fmt.Sprintf("%d records, %d deleted, %d reported in batchItemFailures, %d whole-batch failures",
		r.Poller.Records, r.Poller.Deleted, r.Poller.Reported, r.Poller.FunctionErrors))
	row("DELIVERED TWICE", len(r.DeliveredTwice), "")
	row("LOST", len(r.Lost), "valid messages with no final state and never delivered, or SENT but never accepted")
	row("addresses in logs", len(r.Leaks), "raw addresses, or tokens not keyed with the deployment's key, in the functions' output")
	row("elapsed", r.Elapsed.Round(100*time.Millisecond), "")
	_ = tw.Flush()
	if r.OK() {
		fmt.Fprintln(out, "RESULT: OK: every message sent at most once and none lost")
		return
	}
	fmt.Fprintln(out, "RESULT: FAILED")
	for _, p := range r.Problems() {
		fmt.Fprintln(out, "  - "+p)
	}
}

// Counts formats m for a summary line: "key<kv>count" in key order,
// joined by sep; "none" when m is empty.
func Counts[K cmp.Ordered](m map[K]int, kv, sep string) string {
	if len(m) == 0 {
		return "none"
	}
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprint(k)+kv+strconv.Itoa(m[k]))
	}
	return strings.Join(parts, sep)
}

func sumMap(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
