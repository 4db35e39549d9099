package chaos

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/sendonce/sendonce/internal/groundtruth"
	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/localpipeline"
	"github.com/sendonce/sendonce/internal/reconcile"
	"github.com/sendonce/sendonce/internal/sender"
	"github.com/sendonce/sendonce/notify"
)

// ClassCount is what happened to one message class through an adapter
// that can neither drop repeats nor be asked: the class policy trades a
// duplicate (resend) against a miss (abandon).
type ClassCount struct {
	Messages, Duplicates, Misses int
}

// LaneReport is the verdict for one adapter.
type LaneReport struct {
	Name       string
	Capability groundtruth.Capability
	// N counts the lane's valid messages, Invalid its invalid bodies;
	// NotFed the valid messages never enqueued because the run timed out
	// first (they get no verdict; the lane is "not drained").
	N, Invalid, NotFed int
	// DeliveredOnce counts messages the provider accepted once and the
	// ledger holds SENT; DeliveredTwice those it accepted more than once,
	// of which TwiceByPolicy were repeated by a class policy's resend of
	// an ambiguous attempt (counted per class in Classes, a violation
	// only for a class that never resends).
	DeliveredOnce, DeliveredTwice, TwiceByPolicy int
	// Lost counts messages never delivered without a final state, or SENT
	// without the provider having accepted them.
	Lost int
	// AbandonedDelivered counts ABANDONED rows the provider had
	// accepted, AbandonedByPolicy those the class policy (or its resend
	// budget) gave up on after an ambiguous attempt (a miss), and
	// AbandonedNeverAccepted those given up although no provider ever
	// took them, other than at the maximum age (violations).
	AbandonedDelivered, AbandonedByPolicy, AbandonedNeverAccepted int
	// Failed counts FAILED rows by reason; States every final state.
	Failed map[string]int
	States map[ledger.State]int
	// Classes counts duplicates and misses per class (adapters whose
	// ambiguous attempts a class policy settles: Neither).
	Classes map[string]*ClassCount
	// Faults are the counterpart's injected faults, by name.
	Faults map[string]int
	// DeadLettered counts invalid bodies on the dead-letter queue;
	// Redriven the valid messages the calm phase found there (moved by
	// maxReceiveCount) and sent back to the queue, as an operator's
	// redrive does: each must still end delivered once.
	DeadLettered, Redriven int
	// Leaks are addresses found in the lane's function logs.
	Leaks []localpipeline.Leak

	// MIME is the smtp lane's check of every message the server took
	// against what its stored template renders (nil for other lanes).
	MIME *MIMEReport

	// Table, QueueURL and DLQURL are the lane's resources (left in the
	// emulators with Options.KeepResources; the queue URLs name the
	// run's SQS front), RedactKeyARN its functions' redaction key
	// secret.
	Table, QueueURL, DLQURL, RedactKeyARN string
	// Sent is the request of a message it delivered once.
	Sent notify.Request

	Metrics                        localpipeline.MetricTotals
	Poller                         localpipeline.PollerStats
	ReconcileRuns, ReconcileErrors int

	throttleLogged, slow, copies int
}

// maxEvents bounds the violations of one kind in one lane that get their
// log lines.
const maxEvents = 8

// check compares every logical message of the lane with its
// counterpart's ground truth.
// lostKeys are the proxy's lost answers per key (Proxy.LostKeys): a
// message given up by class policy after a lost Claim or TakeOver answer
// (or an unapplied Release) whose worker lived on, with nothing else
// ambiguous about it (see ambiguous), was not ambiguous: the worker knew
// it had sent nothing and could have released. diedHolding are the keys
// whose row a worker died holding (Proxy.DiedHolding): ambiguous,
// whatever the logs say.
func (l *lane) check(ctx context.Context, lostKeys map[string][]string, diedHolding map[string]bool) (LaneReport, []Violation, error) {
	lr := LaneReport{Name: l.def.Name, Capability: l.def.Capability, Failed: map[string]int{}, States: map[ledger.State]int{}, Classes: map[string]*ClassCount{},
		Poller: l.p.Stats(), Faults: l.cp.Faulted(), Redriven: l.redriven, slow: l.slow, copies: len(l.copies)}
	var errs []error
	delivered, status, err := l.cp.Delivered(ctx, l.w)
	if err != nil {
		return lr, nil, err
	}
	logs := l.p.Logs()
	if dir := os.Getenv(DumpEnv); dir != "" {
		for name, text := range logs {
			_ = os.WriteFile(filepath.Join(dir, l.def.Name+"-"+name+".log"), []byte(text), 0o644)
		}
	}
	lines := keyLines(logs)
	var vs []Violation
	withEvents := map[string]int{} // per kind, so a rare kind keeps its log lines
	add := func(v Violation) {
		v.Lane = l.def.Name
		if v.Key != "" && withEvents[v.Kind] < maxEvents {
			withEvents[v.Kind]++
			v.Events = lines[v.Key]
		}
		vs = append(vs, v)
	}
	dls, err := l.p.DrainDLQ(ctx)
	if err != nil {
		errs = append(errs, err)
	}
	dls = append(dls, l.deadLetters...)
	onDLQ := map[string]bool{}
	got := map[string]int{} // invalid bodies
	for _, d := range dls {
		onDLQ[d.Body] = true
		if _, ok := d.Attributes[sender.AttrErrorReason]; ok {
			got[d.Body]++
			l.kept = append(l.kept, d)
		}
	}
	valid := map[string]bool{}
	for _, m := range l.w.Messages {
		if !m.Valid {
			lr.Invalid++
			continue
		}
		lr.N++
		valid[m.Key] = true
		if l.feed.EnqueuedAt(l.first[m.Body]).IsZero() {
			lr.NotFed++ // the run ended before it was enqueued: no verdict
			continue
		}
		cc := lr.Classes[m.Class]
		if cc == nil {
			cc = &ClassCount{}
			lr.Classes[m.Class] = cc
		}
		cc.Messages++
		n := delivered[m.Key]
		rec, state, err := l.p.Row(ctx, m.Key)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		lr.States[state]++
		l.judge(&lr, cc, facts{
			m: m, n: n, status: status[m.Key], rec: rec, state: state,
			lost: lostKeys[m.Key], diedHolding: diedHolding[m.Key], lines: lines[m.Key], onDLQ: onDLQ[m.Body], enqueued: l.feed.EnqueuedAt(l.first[m.Body]),
		}, add)
	}
	for ref, n := range delivered {
		if !valid[ref] {
			add(Violation{Kind: "delivered twice", Detail: fmt.Sprintf("%s: accepted %d times, not a workload message", ref, n)})
		}
	}
	for _, m := range l.w.Messages {
		if m.Valid {
			continue
		}
		if got[m.Body] > 0 {
			lr.DeadLettered++
			continue
		}
		add(Violation{Kind: "invalid not dead-lettered", Detail: m.Body})
	}

	lr.Leaks = localpipeline.Scan(logs, l.p.Redactor, l.w.Addresses())
	forms := map[string][]localpipeline.Leak{}
	for _, lk := range lr.Leaks {
		forms[lk.Form] = append(forms[lk.Form], lk)
	}
	for _, f := range slices.Sorted(maps.Keys(forms)) {
		ls := forms[f]
		add(Violation{Kind: "address in logs", Detail: fmt.Sprintf("%d addresses as %s, e.g. in %s", len(ls), f, ls[0].Instance)})
	}
	var all []string
	for _, name := range slices.Sorted(maps.Keys(logs)) {
		all = append(all, logs[name])
		lr.throttleLogged += strings.Count(logs[name], "ProvisionedThroughputExceeded") + strings.Count(logs[name], "ThrottlingException")
	}
	lr.Metrics = localpipeline.ParseEMF(all...)
	for _, bad := range lr.Metrics.Invalid {
		add(Violation{Kind: "invalid EMF", Detail: bad})
	}
	_, lr.ReconcileRuns, lr.ReconcileErrors = l.p.ReconcileTotals()
	return lr, vs, errors.Join(errs...)
}

// facts are what the verdict reads about one valid message.
type facts struct {
	m localpipeline.Message
	// n counts the times its provider accepted it; status is the
	// provider's delivery status of its own message ("failed" when it
	// reports it undeliverable).
	n      int
	status string
	// rec and state are its ledger row (state NoRow when there is none).
	rec   ledger.Record
	state ledger.State
	// lost are its key's DynamoDB answers lost for good (Proxy.LostKeys);
	// lines the functions' log lines about it (keyLines).
	lost  []string
	lines []string
	// diedHolding: a worker died holding a claim of its row
	// (Proxy.DiedHolding).
	diedHolding bool
	// onDLQ: its body is on the dead-letter queue; enqueued: when its
	// first copy was.
	onDLQ    bool
	enqueued time.Time
}

// judge draws the verdict on one valid message from f through
// groundtruth.Judge: it counts it in lr and cc (its class) and reports
// each broken guarantee to add, with what the lane knows of it.
func (l *lane) judge(lr *LaneReport, cc *ClassCount, f facts, add func(Violation)) {
	m, n, rec, state := f.m, f.n, f.rec, f.state
	gt := groundtruth.Facts{
		Class: m.Class, Capability: l.def.Capability,
		Received: n, Rejected: f.status == "failed", State: state, Reason: rec.Reason,
		WantFailed: m.WantFailed,
		Ambiguous:  state == ledger.StateAbandoned && ambiguous(f.lost, f.diedHolding, f.lines),
	}
	for _, k := range groundtruth.Judge(gt) {
		v := Violation{Kind: string(k), Key: m.Key}
		switch k {
		case groundtruth.Once:
			lr.DeliveredOnce++
			if lr.Sent.EventID == "" && state == ledger.StateSent {
				lr.Sent = request(m)
			}
		case groundtruth.Twice:
			lr.DeliveredTwice++
			v.Detail = fmt.Sprintf("%s %s delivered %d times (ledger %s)", m.Channel, m.Class, n, state)
		case groundtruth.TwiceByPolicy, groundtruth.TwiceAgainstPolicy:
			lr.DeliveredTwice++
			lr.TwiceByPolicy++
			cc.Duplicates++
			// The class never resends an ambiguous attempt: the repeat
			// came from a send believed safe to repeat.
			v.Detail = fmt.Sprintf("%s %s delivered %d times (ledger %s); class policy %s", m.Channel, m.Class, n, state, reconcile.DefaultPolicies[m.Class])
		case groundtruth.Lost:
			lr.Lost++
			if state.Final() {
				v.Detail = "SENT in the ledger, but the provider never accepted it"
				break
			}
			where := ""
			if f.onDLQ {
				where = " (its body is on the dead-letter queue)"
			}
			v.Detail = fmt.Sprintf("%s, never delivered%s; enqueued %s", state, where, f.enqueued.Format(time.RFC3339Nano))
		case groundtruth.Unresolved:
			v.Detail = fmt.Sprintf("%s, but delivered", state)
		case groundtruth.Contradiction:
			if rec.Reason == "" && (n == 0 || f.status == "failed") {
				v.Detail = "FAILED without a reason"
			} else {
				v.Detail = fmt.Sprintf("FAILED (%s), but the provider accepted it (status %q)", rec.Reason, f.status)
			}
		case groundtruth.FailedNeverRejected:
			v.Detail = fmt.Sprintf("%s %s FAILED (%s) though no provider rejected it", m.Channel, m.Class, rec.Reason)
		case groundtruth.AbandonedDelivered:
			lr.AbandonedDelivered++
		case groundtruth.AbandonedByPolicy:
			lr.AbandonedByPolicy++
			cc.Misses++
		case groundtruth.AbandonedNeverAccepted:
			lr.AbandonedNeverAccepted++
			v.Detail = fmt.Sprintf("%s %s ABANDONED after %d attempts (%s); the provider never accepted it", m.Channel, m.Class, rec.Attempts, rec.Reason)
			if ops := f.lost; len(ops) > 0 {
				v.Detail += "; DynamoDB answers lost for good: " + strings.Join(ops, ", ")
			}
		}
		if k.Violation() {
			add(v)
		}
	}
	if state == ledger.StateFailed {
		lr.Failed[reasonKind(rec.Reason)]++
	}
}

// addressToken is a redacted address in a reason (redact.Redactor.Address:
// a kind, then 16 hex digits).
var addressToken = regexp.MustCompile(`\b(phone|email|push|addr):[0-9a-f]{16}\b`)

// reasonKind is a FAILED row's reason with each redacted address folded to
// its kind, so that the report counts one rejection reason once rather
// than once per recipient.
func reasonKind(reason string) string {
	return addressToken.ReplaceAllString(reason, "$1:…")
}

// DumpEnv names a directory into which a run writes every function
// instance's whole log, one file per lane and instance, and the proxy's
// record of lost answers (lost.log): what a violation's excerpt leaves out.
const DumpEnv = "SENDONCE_TEST_CHAOS_DUMP"

// ambiguous reports whether a message that an adapter which can neither
// drop repeats nor be asked gave up on (class policy, or its resend budget)
// had a truly ambiguous attempt, so that the abandon is the policy's miss.
// A lost answer of a write DynamoDB refused ("(unapplied)": a Claim of a
// row another claim held, a TakeOver that lost to another) changed
// nothing: the row is as if it had never been sent, and neither its
// worker's fenced release nor its death after it says anything about
// the row. Of the others: it is ambiguous when there is none; or a worker was
// killed before it released (by the proxy, by the crasher, or by the
// emulator at its timeout: nobody can know whether it went on to send);
// or the lost answer was a TakeOver of a row that was not released (it
// already held an attempt of unknown outcome, as the request itself
// shows) or a Release that never reached the table. Otherwise every lost Claim or
// TakeOver of a released row must have been followed by its worker's
// release (as logged), and then the message is ambiguous only if
// something else made it so: an ambiguous provider outcome, or a worker
// that died holding a claim: diedHolding, as the front saw it (its Claim
// or TakeOver applied, then its death before it released or marked the
// row), or as the logs show it (the row was decided on as a stale claim;
// a worker killed mid-send leaves no line of its own, and the one that
// decided on its stale claim may die before it writes its own).
func ambiguous(ops []string, diedHolding bool, lines []string) bool {
	mustRelease, refused := 0, 0
	for _, op := range ops {
		switch {
		case strings.Contains(op, "(unapplied)"):
			// Its worker, when it lived on, logged a release of it too.
			if (strings.HasPrefix(op, "claim") || strings.HasPrefix(op, "takeover(unapplied)")) && !strings.HasSuffix(op, "+kill") {
				refused++
			}
			continue
		case strings.HasSuffix(op, "+kill") || strings.HasPrefix(op, "takeover(unreleased)") || strings.HasPrefix(op, "release"):
			return true
		}
		mustRelease++
	}
	if mustRelease == 0 {
		return true
	}
	releasing, releaseFailed, otherwise := 0, false, diedHolding
	for _, line := range lines {
		switch {
		case strings.Contains(line, "ledger answer lost; releasing the claim it may have taken"):
			releasing++
		case strings.Contains(line, "release claim failed") || strings.Contains(line, "record UNCERTAIN again failed"):
			releaseFailed = true
		case strings.Contains(line, `"kind":"ambiguous"`) || strings.Contains(line, "provider outcome ambiguous"),
			// The row was decided on as a stale claim whose worker never
			// recorded an outcome (a sender's lookup of one that proved
			// nothing, or the reconciler's abandon of a PENDING row).
			strings.Contains(line, "a worker died holding the claim"),
			strings.Contains(line, "none is proven to be this key's"),
			strings.Contains(line, `"message":"abandoned"`) && strings.Contains(line, `"state":"PENDING"`):
			otherwise = true
		}
	}
	if releasing-refused < mustRelease || releaseFailed {
		return false // the worker knew it sent nothing and did not record it
	}
	return otherwise
}

var keyField = regexp.MustCompile(`"key":"([^"]+)"`)

// keyLines indexes the functions' log lines by the key they name, each
// prefixed by its instance's name.
func keyLines(logs map[string]string) map[string][]string {
	out := map[string][]string{}
	for _, name := range slices.Sorted(maps.Keys(logs)) {
		for _, line := range strings.Split(logs[name], "\n") {
			if m := keyField.FindStringSubmatch(line); m != nil {
				out[m[1]] = append(out[m[1]], name+": "+line)
			}
		}
	}
	return out
}
