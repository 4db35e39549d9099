package chaos

import (
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/dispatch"
	"github.com/sendonce/sendonce/internal/ledger"
)

// TestWireVerdict: a provider may take a message after another
// provider's send of it got no answer only when a lookup at that provider
// came in between.
func TestWireVerdict(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	send := func(s int, noAnswer bool) wireEvent { return wireEvent{at: at(s), noAnswer: noAnswer} }
	lookup := func(s int) wireEvent { return wireEvent{at: at(s), lookup: true} }
	for _, tc := range []struct {
		name                       string
		accepted                   map[string][]time.Time
		wire                       map[string][]wireEvent
		wantAmbiguous, wantSettled int
		wantUnsettled              int
	}{
		{name: "RefusedThenFailover", accepted: map[string][]time.Time{"lambda": {at(2)}},
			wire: map[string][]wireEvent{"http": {send(1, false)}, "lambda": {send(2, false)}}},
		{name: "AmbiguousThenFailover", accepted: map[string][]time.Time{"lambda": {at(5)}},
			wire:          map[string][]wireEvent{"http": {send(1, true)}, "lambda": {send(5, false)}},
			wantAmbiguous: 1, wantUnsettled: 1},
		{name: "AmbiguousSettledByLookupFirst", accepted: map[string][]time.Time{"lambda": {at(5)}},
			wire:          map[string][]wireEvent{"http": {send(1, true), lookup(3)}, "lambda": {send(5, false)}},
			wantAmbiguous: 1, wantSettled: 1},
		{name: "LookupAfterTheOtherTookIt", accepted: map[string][]time.Time{"lambda": {at(5)}},
			wire:          map[string][]wireEvent{"http": {send(1, true), lookup(6)}},
			wantAmbiguous: 1, wantUnsettled: 1},
		{name: "AmbiguousThenSameProvider", accepted: map[string][]time.Time{"http": {at(1)}},
			wire:          map[string][]wireEvent{"http": {send(1, true), lookup(3)}},
			wantAmbiguous: 1},
		{name: "SecondaryAmbiguousThenPrimary", accepted: map[string][]time.Time{"http": {at(9)}},
			wire:          map[string][]wireEvent{"http": {send(1, false), send(9, false)}, "lambda": {send(2, true)}},
			wantAmbiguous: 1, wantUnsettled: 1},
		{name: "AmbiguousAfterTheAcceptance", accepted: map[string][]time.Time{"lambda": {at(2)}},
			wire:          map[string][]wireEvent{"http": {send(4, true)}},
			wantAmbiguous: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			amb, settled, bad := wireVerdict(tc.accepted, tc.wire)
			if amb != tc.wantAmbiguous || settled != tc.wantSettled || len(bad) != tc.wantUnsettled {
				t.Errorf("wireVerdict = %d ambiguous, %d settled, unsettled %q; want %d, %d, %d",
					amb, settled, bad, tc.wantAmbiguous, tc.wantSettled, tc.wantUnsettled)
			}
		})
	}
}

// TestLedgerVerdict reads histories as the ledger writes them
// (ledger.AttemptSummary): a change of provider must follow a released
// attempt.
func TestLedgerVerdict(t *testing.T) {
	t.Parallel()
	summary := func(n int, provider string, released bool, state ledger.State, reason string) string {
		return ledger.AttemptSummary(ledger.Record{Attempts: n, Entry: ledger.Entry{Provider: provider}, Released: released, State: state, Reason: reason})
	}
	refused := func(n int, p string) string {
		return summary(n, p, true, ledger.StatePending, "transient: 503: unavailable")
	}
	uncertain := func(n int, p string) string { return summary(n, p, false, ledger.StateUncertain, "timeout") }
	died := func(n int, p string) string { return summary(n, p, false, ledger.StatePending, "") }
	for _, tc := range []struct {
		name          string
		history       []string
		latest        string
		attempts      int
		wantChanges   int
		wantUnsettled int
		wantComplete  bool
	}{
		{name: "FirstAttempt", latest: "http", attempts: 1, wantComplete: true},
		{name: "RefusedThenFailover", history: []string{refused(1, "http")}, latest: "lambda", attempts: 2, wantChanges: 1, wantComplete: true},
		{name: "UncertainThenSameProvider", history: []string{uncertain(1, "http")}, latest: "http", attempts: 2, wantComplete: true},
		{name: "UncertainThenFailover", history: []string{uncertain(1, "http")}, latest: "lambda", attempts: 2, wantChanges: 1, wantUnsettled: 1, wantComplete: true},
		{name: "DeadWorkerThenFailover", history: []string{refused(1, "http"), died(2, "lambda")}, latest: "http", attempts: 3, wantChanges: 2, wantUnsettled: 1, wantComplete: true},
		{name: "Truncated", history: []string{refused(3, "http"), refused(4, "lambda"), refused(5, "http"), refused(6, "lambda"), refused(7, "http")},
			latest: "lambda", attempts: 8, wantChanges: 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := ledger.Record{Attempts: tc.attempts, Entry: ledger.Entry{Provider: tc.latest}, History: tc.history}
			changes, bad, complete := ledgerVerdict(rec)
			if changes != tc.wantChanges || len(bad) != tc.wantUnsettled || complete != tc.wantComplete {
				t.Errorf("ledgerVerdict(%q, %s) = %d changes, unsettled %q, complete %v; want %d, %d, %v",
					tc.history, tc.latest, changes, bad, complete, tc.wantChanges, tc.wantUnsettled, tc.wantComplete)
			}
		})
	}
}

// TestFailoverSchedule: at make chaos's size the primary's outage
// outlasts SQS's receives of a message and the whole schedule fits in the
// fault window; in a small run it shrinks to fit.
func TestFailoverSchedule(t *testing.T) {
	t.Parallel()
	o := Defaults(2000, 1)
	outage, gap, brownout, spread := failoverSchedule(o)
	receives := 10 * time.Second * 5
	if outage <= receives || gap < dispatch.DefaultHealthCooldown || brownout <= 0 || o.OutageAt+outage+gap+brownout > spread || spread > o.FaultWindow {
		t.Errorf("N=2000: outage %s, gap %s, brownout %s, spread %s (receives %s, fault window %s)", outage, gap, brownout, spread, receives, o.FaultWindow)
	}
	o.Outage, o.OutageAt, o.FaultWindow = 10*time.Second, 2*time.Second, 15*time.Second
	outage, _, brownout, spread = failoverSchedule(o)
	if outage <= 0 || brownout <= 0 || spread > o.FaultWindow || o.OutageAt+outage+brownout > o.FaultWindow {
		t.Errorf("small: outage %s, brownout %s, spread %s (fault window %s)", outage, brownout, spread, o.FaultWindow)
	}
}
