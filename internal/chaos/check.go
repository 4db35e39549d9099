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
	"sync"
	"time"

	"github.com/sendonce/sendonce/internal/groundtruth"
	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/localpipeline"
	"github.com/sendonce/sendonce/internal/reconcile"
	"github.com/sendonce/sendonce/internal/sender"
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
	Capability Capability
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
	// AbandonedDelivered counts ABANDONED rows the provider had accepted
	// once, AbandonedByPolicy those the class policy
	// (or its resend budget) gave up on after an ambiguous attempt (a
	// miss), AbandonedMaxAge those
	// given up at the maximum age, and AbandonedNeverAccepted the rest: a
	// message given up although no provider ever took it.
	AbandonedDelivered, AbandonedByPolicy, AbandonedMaxAge, AbandonedNeverAccepted int
	// NeverAcceptedCauses breaks AbandonedNeverAccepted down by cause
	// (neverAcceptedCause).
	NeverAcceptedCauses map[string]int
	// Failed counts FAILED rows by reason; States every final state.
	Failed map[string]int
	States map[ledger.State]int
	// Classes counts duplicates and misses per class (adapters whose
	// ambiguous attempts a class policy may settle: Neither, ByContent).
	Classes map[string]*ClassCount
	// PolicySettled counts the messages a class policy settled after a
	// lookup that could not prove them (ByContent: resent or abandoned);
	// ProvenByLookup those the reconciler resolved by a lookup's proof.
	PolicySettled, ProvenByLookup int
	// MissesOthers counts the ByContent misses (AbandonedByPolicy) whose
	// every message with the same recipient and text at the provider is
	// another key's, as that key's row shows (its callback recorded the
	// message's id): a lookup that also searched the ledger for those ids
	// would have proven "no record" and sent them.
	MissesOthers int
	// FailedUnrenderable counts FAILED rows that hold no message: first
	// claimed after a template version that cannot render them was put
	// (Lane.TemplateChange); nothing was sent.
	FailedUnrenderable int
	// Template is the lane's template change, per version (nil: none).
	Template *TemplateReport
	// Callbacks are the status callbacks the counterpart posted (nil:
	// it posts none), and RowsWithID the rows holding a provider id.
	Callbacks  *CallbackStats
	RowsWithID int
	// Faults are the counterpart's injected faults, by name.
	Faults map[string]int
	// DeadLettered counts invalid bodies on the dead-letter queue;
	// Redriven valid messages moved there by maxReceiveCount, of which
	// RedrivenResolved still had a final ledger row.
	DeadLettered, Redriven, RedrivenResolved int
	// OperatorRedriven counts the valid messages the calm phase found on
	// the dead-letter queue and sent back to the queue (an operator's
	// redrive); each must still end delivered once.
	OperatorRedriven int
	// Leaks are addresses found in the lane's function logs.
	Leaks []localpipeline.Leak

	// Summary is the lane's own summary line ("" for most lanes; the
	// failover lane's: per provider, failovers and their evidence; the
	// smtp lane's: the messages checked against their templates).
	Summary string
	// MIME is the smtp lane's check of every message the server took
	// against what its stored template renders (nil for other lanes).
	MIME *MIMEReport

	// Table, QueueURL and DLQURL are the lane's resources (left in the
	// emulators with Options.KeepResources; the queue URLs name the
	// run's SQS front), RedactKeyARN its functions' redaction key
	// secret, and SentKey the key of a message it delivered once.
	Table, QueueURL, DLQURL, RedactKeyARN, SentKey string

	Metrics                        localpipeline.MetricTotals
	Poller                         localpipeline.PollerStats
	ReconcileRuns, ReconcileErrors int

	deliveryFailed, throttleLogged, slow, copies int
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
	lr := LaneReport{Name: l.def.Name, Failed: map[string]int{}, NeverAcceptedCauses: map[string]int{}, States: map[ledger.State]int{}, Classes: map[string]*ClassCount{},
		Poller: l.p.Stats(), Faults: l.cp.Faulted(), slow: l.slow, copies: len(l.copies)}
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
	var vs []Violation
	withEvents := map[string]int{} // per kind, so a rare kind keeps its log lines
	add := func(v Violation) {
		v.Lane = l.def.Name
		if v.Key != "" && withEvents[v.Kind] < maxEvents {
			withEvents[v.Kind]++
			v.Events = events(logs, v.Key)
		}
		vs = append(vs, v)
	}
	dls, err := l.p.DrainDLQ(ctx)
	if err != nil {
		errs = append(errs, err)
	}
	dls = append(dls, l.deadLetters...)
	lr.OperatorRedriven = l.redriven
	onDLQ := map[string]bool{}
	for _, d := range dls {
		onDLQ[d.Body] = true
	}
	evidence := sync.OnceValue(func() map[string]keyEvidence { return keysLogged(logs) })
	// What a recording counterpart accepted, per key and per provider id.
	rc, isRecorder := l.cp.(recorder)
	owner, idStatus, accepted := map[string]string{}, map[string]string{}, map[string][]acceptedMessage{}
	if isRecorder {
		for _, a := range rc.Accepted() {
			owner[a.ID], idStatus[a.ID] = a.Key, a.Status
			accepted[a.Key] = append(accepted[a.Key], a)
		}
	}
	if cb, ok := l.cp.(callbackPoster); ok {
		st := cb.Callbacks()
		lr.Callbacks = &st
	}
	tr := l.templateReport()
	lr.Template = tr
	rowIDs := map[string]string{} // key → the provider id its row holds
	var abandoned []missCase      // ByContent misses
	if l.tc != nil {
		if _, err := l.tc.Put(); err != nil {
			errs = append(errs, err)
		}
	}
	caps := map[Capability]bool{}
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
		capability := l.cp.Capability(m.Channel)
		caps[capability] = true
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
		rowIDs[m.Key] = rec.ProviderMessageID
		if capability == ByContent && state == ledger.StateAbandoned && delivered[m.Key] == 0 {
			abandoned = append(abandoned, missCase{key: m.Key, to: m.Address, text: l.tc.texts(request(m))[rec.TemplateVersion]})
		}
		before := lr.AbandonedByPolicy
		l.judge(&lr, cc, facts{
			m: m, capability: capability, n: n, status: status[m.Key], rec: rec, state: state,
			lost: lostKeys[m.Key], diedHolding: diedHolding[m.Key], evidence: evidence, onDLQ: onDLQ[m.Body], enqueued: l.feed.EnqueuedAt(l.first[m.Body]),
			recorded: isRecorder, owner: owner, idStatus: idStatus, accepted: accepted[m.Key],
		}, tr, add)
		if lr.AbandonedByPolicy == before && len(abandoned) > 0 && abandoned[len(abandoned)-1].key == m.Key {
			abandoned = abandoned[:len(abandoned)-1] // not a miss
		}
	}
	lr.MissesOthers = missesOthers(abandoned, rowIDs, accepted)
	if caps[Neither] {
		lr.Capability = Neither
	}
	if caps[ByContent] {
		lr.Capability = ByContent
	}
	if caps[CanAvoid] {
		lr.Capability = CanAvoid
	}
	for ref, n := range delivered {
		if !valid[ref] {
			add(Violation{Kind: "delivered twice", Detail: fmt.Sprintf("%s: accepted %d times, not a workload message", ref, n)})
		}
	}

	got := map[string]int{}
	byBody := map[string]string{}
	for _, m := range l.w.Messages {
		if m.Valid {
			byBody[m.Body] = m.Key
		}
	}
	for _, d := range dls {
		if _, ok := d.Attributes[sender.AttrErrorReason]; ok {
			got[d.Body]++
			l.kept = append(l.kept, d)
			continue
		}
		lr.Redriven++
		if key, ok := byBody[d.Body]; ok {
			if rec, err := l.p.Ledger().Get(ctx, key); err == nil && rec.State.Final() {
				lr.RedrivenResolved++
			}
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
	m          localpipeline.Message
	capability Capability
	// n counts the times its provider accepted it; status is the
	// provider's delivery status of its own message ("failed" when it
	// reports it undeliverable).
	n      int
	status string
	// rec and state are its ledger row (state NoRow when there is none).
	rec   ledger.Record
	state ledger.State
	// lost are its key's DynamoDB answers lost for good (Proxy.LostKeys);
	// evidence what the workers' logs say per key (keysLogged).
	lost     []string
	evidence func() map[string]keyEvidence
	// diedHolding: a worker died holding a claim of its row
	// (Proxy.DiedHolding).
	diedHolding bool
	// onDLQ: its body is on the dead-letter queue; enqueued: when its
	// first copy was.
	onDLQ    bool
	enqueued time.Time
	// recorded: the counterpart records owners (recorder): owner and
	// idStatus map its provider ids to their keys and statuses, accepted
	// are this message's own accepted messages.
	recorded        bool
	owner, idStatus map[string]string
	accepted        []acceptedMessage
}

// judge draws the verdict on one valid message from f through
// groundtruth.Judge: it counts it in lr and cc (its class) and reports
// each broken guarantee to add, with what the lane knows of it.
func (l *lane) judge(lr *LaneReport, cc *ClassCount, f facts, tr *TemplateReport, add func(Violation)) {
	m, n, rec, state, capability := f.m, f.n, f.rec, f.state, f.capability
	ev := f.evidence()[m.Key]
	if ev.provenLookup {
		lr.ProvenByLookup++
	}
	if rec.ProviderMessageID != "" {
		lr.RowsWithID++
	}
	// The owner of the provider id the row holds, when the
	// counterpart records owners: a row must never hold another
	// message's id.
	idOwner, foreignID := "", false
	if f.recorded && rec.ProviderMessageID != "" {
		idOwner = f.owner[rec.ProviderMessageID]
		foreignID = idOwner != m.Key
	}
	foreign := func() string {
		if idOwner == "" {
			return fmt.Sprintf("provider id %s, which the provider never issued", rec.ProviderMessageID)
		}
		return fmt.Sprintf("provider id %s, the message of %s (status %s), with the same text to the same recipient", rec.ProviderMessageID, idOwner, f.idStatus[rec.ProviderMessageID])
	}
	// Why a FAILED row nothing rejected may not fail ("": it may, as
	// no version put during the run can render it).
	why := ""
	if state == ledger.StateFailed && n == 0 && !m.WantFailed {
		why = l.unrenderable(m, rec)
	}
	gt := groundtruth.Facts{
		Key: m.Key, Adapter: l.def.Name, Class: m.Class, Capability: capability,
		Received: n, Rejected: f.status == "failed", State: state, Reason: rec.Reason,
		ForeignID: foreignID, WantFailed: m.WantFailed, Unrenderable: why == "",
		PolicyResend: ev.policyResend,
		Ambiguous:    state == ledger.StateAbandoned && ambiguous(f.lost, f.diedHolding, f.evidence, m.Key),
	}
	for _, k := range groundtruth.Judge(gt) {
		v := Violation{Kind: string(k), Key: m.Key}
		switch k {
		case groundtruth.Once:
			lr.DeliveredOnce++
			if lr.SentKey == "" && state == ledger.StateSent {
				lr.SentKey = m.Key
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
		case groundtruth.SentForeign:
			if n == 0 {
				lr.Lost++
			}
			v.Detail = fmt.Sprintf("%s %s SENT with %s; its own messages accepted: %d", m.Channel, m.Class, foreign(), n)
		case groundtruth.FailedForeign:
			v.Detail = fmt.Sprintf("%s %s FAILED (%s) with %s; its own messages accepted: %d", m.Channel, m.Class, rec.Reason, foreign(), n)
		case groundtruth.Contradiction:
			if rec.Reason == "" && (n == 0 || f.status == "failed") {
				v.Detail = "FAILED without a reason"
			} else {
				v.Detail = fmt.Sprintf("FAILED (%s), but the provider accepted it (status %q)", rec.Reason, f.status)
			}
		case groundtruth.FailedNeverRejected:
			// Never rejected by its provider: only a message that could
			// not be rendered when first claimed may fail, and only when
			// a version put during the run cannot render it.
			v.Detail = fmt.Sprintf("%s %s FAILED (%s) though no provider rejected it and %s", m.Channel, m.Class, rec.Reason, why)
		case groundtruth.FailedUnrenderable:
			lr.FailedUnrenderable++
		case groundtruth.AbandonedDelivered:
			lr.AbandonedDelivered++
		case groundtruth.AbandonedMaxAge:
			lr.AbandonedMaxAge++
		case groundtruth.AbandonedByPolicy:
			lr.AbandonedByPolicy++
			cc.Misses++
		case groundtruth.AbandonedNeverAccepted:
			lr.AbandonedNeverAccepted++
			lr.NeverAcceptedCauses[neverAcceptedCause(rec.Reason, f.lost)]++
			v.Detail = fmt.Sprintf("%s %s ABANDONED after %d attempts (%s); the provider never accepted it", m.Channel, m.Class, rec.Attempts, rec.Reason)
			if ops := f.lost; len(ops) > 0 {
				v.Detail += "; DynamoDB answers lost for good: " + strings.Join(ops, ", ")
			}
		}
		if k.Violation() {
			add(v)
		}
	}
	if f.recorded {
		l.checkTexts(m, rec, f.accepted, tr, add)
	}
	if rec.DeliveryStatus == "failed" || rec.DeliveryStatus == "undelivered" {
		lr.deliveryFailed++
	}
	switch state {
	case ledger.StateFailed:
		lr.Failed[rec.Reason]++
	case ledger.StateAbandoned:
		if capability == ByContent && groundtruth.ByPolicy(rec.Reason) {
			lr.PolicySettled++
		}
	}
	if capability == ByContent && state != ledger.StateAbandoned && ev.policyResend {
		lr.PolicySettled++
	}
}

// missCase is a ByContent miss: its key, recipient and the text its row
// pins (what its lookups searched for).
type missCase struct{ key, to, text string }

// missesOthers counts the misses whose every message at the provider with
// the same recipient and text belongs to another key whose row holds
// that message's id (there is at least one: else the lookup would have
// found no record).
func missesOthers(misses []missCase, rowIDs map[string]string, accepted map[string][]acceptedMessage) int {
	type content struct{ to, body string }
	byContent := map[content][]acceptedMessage{}
	for _, as := range accepted {
		for _, a := range as {
			c := content{a.To, a.Body}
			byContent[c] = append(byContent[c], a)
		}
	}
	n := 0
	for _, m := range misses {
		same := byContent[content{m.to, m.text}]
		others := len(same) > 0
		for _, a := range same {
			if a.Key == m.key || rowIDs[a.Key] != a.ID {
				others = false
			}
		}
		if others {
			n++
		}
	}
	return n
}

// DumpEnv names a directory into which a run writes every function
// instance's whole log, one file per lane and instance, and the proxy's
// record of lost answers (lost.log): what a violation's excerpt leaves out.
const DumpEnv = "SENDONCE_TEST_CHAOS_DUMP"

// neverAcceptedCause names why a message no provider accepted was
// abandoned: the reconciler's attempt budget, or a class policy applied
// to a row whose worker lost a DynamoDB answer and lived on.
func neverAcceptedCause(reason string, lost []string) string {
	var cause string
	switch {
	case strings.Contains(reason, "gave up after"):
		cause = "attempt budget spent"
	case strings.Contains(reason, "policy"):
		cause = "class policy"
	default:
		cause = "other (" + reason + ")"
	}
	if len(lost) > 0 {
		cause += " after lost " + strings.Join(lost, ", ")
	}
	return cause
}

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
func ambiguous(ops []string, diedHolding bool, evidence func() map[string]keyEvidence, key string) bool {
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
	ev := evidence()[key]
	if ev.releasing-refused < mustRelease || ev.releaseFailed {
		return false // the worker knew it sent nothing and did not record it
	}
	return ev.ambiguousOutcome || ev.deadWorker || diedHolding
}

// keyEvidence is what the workers' logs say about one key.
type keyEvidence struct {
	// releasing counts releases after a lost Claim or TakeOver answer;
	// releaseFailed is set when a release (or a mark after a lost
	// answer) failed.
	releasing     int
	releaseFailed bool
	// ambiguousOutcome: a provider call's outcome was ambiguous.
	ambiguousOutcome bool
	// deadWorker: the row was decided on as a stale claim whose worker
	// never recorded an outcome.
	deadWorker bool
	// policyResend: a class policy resent the message (after an
	// ambiguous attempt no lookup could prove); provenLookup: the
	// reconciler resolved it by a lookup's proof.
	policyResend, provenLookup bool
}

var keyField = regexp.MustCompile(`"key":"([^"]+)"`)

// keysLogged reads the evidence per key from every log line that names one.
func keysLogged(logs map[string]string) map[string]keyEvidence {
	out := map[string]keyEvidence{}
	for _, text := range logs {
		for _, line := range strings.Split(text, "\n") {
			m := keyField.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			ev := out[m[1]]
			switch {
			case strings.Contains(line, " policy: resend"):
				ev.policyResend = true
			case strings.Contains(line, `"msg":"reconciled by lookup"`):
				ev.provenLookup = true
			case strings.Contains(line, "ledger answer lost; releasing the claim it may have taken"):
				ev.releasing++
			case strings.Contains(line, "release claim failed") || strings.Contains(line, "record UNCERTAIN again failed"):
				ev.releaseFailed = true
			case strings.Contains(line, `"kind":"ambiguous"`) || strings.Contains(line, "provider outcome ambiguous"):
				ev.ambiguousOutcome = true
			case strings.Contains(line, "a worker died holding the claim") ||
				// A sender's lookup of a stale claim that proved nothing.
				strings.Contains(line, "none is proven to be this key's") ||
				strings.Contains(line, `"msg":"abandoned"`) && strings.Contains(line, `"state":"PENDING"`):
				ev.deadWorker = true
			}
			out[m[1]] = ev
		}
	}
	return out
}

// events returns every log line (no EMF document) that names key.
func events(logs map[string]string, key string) []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(logs)) {
		for _, line := range strings.Split(logs[name], "\n") {
			if strings.Contains(line, key) && !strings.Contains(line, `"_aws"`) {
				out = append(out, name+": "+line)
			}
		}
	}
	return out
}

// acceptedMessage is one message a counterpart accepted, with the key it
// belongs to (as the counterpart's own record shows it).
type acceptedMessage struct {
	Key, ID, To, Body, Status string
	// At is when the provider accepted it.
	At time.Time
}

// recorder is a counterpart that records which key each message it
// accepted belongs to, its provider id and its text (twilio: the key is in
// the StatusCallback URL of the create request). The verdict then checks
// the provider ids rows hold and the texts sent (checkTexts).
type recorder interface {
	Accepted() []acceptedMessage
}

// CallbackStats are the status callbacks a counterpart posted to the
// webhook.
type CallbackStats struct {
	// Accepted counts the messages accepted, WithoutURL those that
	// carried no callback URL.
	Accepted, WithoutURL int
	// Posted counts callbacks the webhook took, Retried the repeated
	// posts, GaveUp the callbacks never taken.
	Posted, Retried, GaveUp int
}

// callbackPoster is a counterpart that posts status callbacks.
type callbackPoster interface {
	Callbacks() CallbackStats
}

// TemplateReport is a lane's template change as the verdict saw it.
type TemplateReport struct {
	// Template names it (tenant/name/channel).
	Template string
	// Versions has one row per version, 1 first.
	Versions []VersionCount
	// Other counts the messages of the template a provider took with a
	// text no version renders for them (each a violation).
	Other int
	// Straddled counts the messages the last version cannot render that
	// a provider took, with the text of the earlier version their rows
	// pin, after the last version was live (put, and the renderers'
	// cache passed): claimed before the change, sent after it.
	Straddled int
}

// VersionCount is what happened with one version of a changed template.
type VersionCount struct {
	Version int
	// Fed is the share of the lane's first wave enqueued when it was put
	// (0 for version 1, stored at start); At how long after the faults
	// started.
	Fed float64
	At  time.Duration
	// Pinned counts the rows that pin it; Received the messages the
	// provider took with its text.
	Pinned, Received int
}
