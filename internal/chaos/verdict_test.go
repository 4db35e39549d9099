package chaos

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/groundtruth"
	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/localpipeline"
	"github.com/sendonce/sendonce/notify"
)

// message returns the workload message of an order_shipped SMS for event.
func message(t *testing.T, event, class string) localpipeline.Message {
	t.Helper()
	r := notify.Request{TenantID: "chaos-sns", EventID: event, Channel: notify.ChannelSMS, Template: "order_shipped",
		Class: notify.Class(class), Recipient: notify.Recipient{ID: "user-1", Phone: "+15550001111"}, Data: map[string]any{"order_id": "A-1"}}
	body, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return localpipeline.Message{Body: string(body), Valid: true, Key: r.Key(), Channel: "sms", Class: class, Address: r.Address()}
}

// TestJudge: what the lane adds to groundtruth.Judge (whose rules
// groundtruth's TestJudge tables): the lane's and the class's counts, and
// the violations it reports. Each case names the violations it must raise
// (none for an outcome the product may reach) and the counts it must
// move.
func TestJudge(t *testing.T) {
	t.Parallel()
	a, otp := message(t, "evt-a", "transactional"), message(t, "evt-otp", "otp")
	rejected := a
	rejected.WantFailed = true
	row := func(state ledger.State, reason string) ledger.Record {
		return ledger.Record{State: state, Reason: reason}
	}
	policy := "class transactional policy: abandon an ambiguous attempt the provider cannot look up or dedupe"
	for _, tc := range []struct {
		name       string
		capability groundtruth.Capability
		m          localpipeline.Message
		n          int
		rec        ledger.Record
		want       []string
		check      func(t *testing.T, lr LaneReport, cc ClassCount)
	}{
		{name: "SentOnce", capability: groundtruth.CanAvoid, m: a, n: 1, rec: row(ledger.StateSent, ""),
			check: func(t *testing.T, lr LaneReport, _ ClassCount) {
				if lr.DeliveredOnce != 1 || lr.Sent.Key() != a.Key {
					t.Errorf("DeliveredOnce %d, Sent %q; want 1, %q", lr.DeliveredOnce, lr.Sent.Key(), a.Key)
				}
			}},
		{name: "TwiceWhereAvoidable", capability: groundtruth.CanAvoid, m: a, n: 2, rec: row(ledger.StateSent, ""), want: []string{"delivered twice"}},
		{name: "FailedNeverRejected", capability: groundtruth.CanAvoid, m: a, rec: row(ledger.StateFailed, "render"), want: []string{"FAILED, never rejected"}},
		{name: "LostSent", capability: groundtruth.CanAvoid, m: a, rec: row(ledger.StateSent, ""), want: []string{"lost"}},
		{name: "TwiceByOTPPolicy", capability: groundtruth.Neither, m: otp, n: 2, rec: row(ledger.StateSent, ""),
			check: func(t *testing.T, lr LaneReport, cc ClassCount) {
				if lr.TwiceByPolicy != 1 || lr.DeliveredTwice != 1 || cc.Duplicates != 1 {
					t.Errorf("TwiceByPolicy %d, DeliveredTwice %d, class duplicates %d; want 1 each", lr.TwiceByPolicy, lr.DeliveredTwice, cc.Duplicates)
				}
			}},
		{name: "TwiceAgainstPolicy", capability: groundtruth.Neither, m: a, n: 2, rec: row(ledger.StateSent, ""), want: []string{"delivered twice against its class policy"}},
		{name: "MissByPolicy", capability: groundtruth.Neither, m: a, rec: row(ledger.StateAbandoned, policy),
			check: func(t *testing.T, lr LaneReport, cc ClassCount) {
				if lr.AbandonedByPolicy != 1 || cc.Misses != 1 {
					t.Errorf("AbandonedByPolicy %d, class misses %d; want 1 each", lr.AbandonedByPolicy, cc.Misses)
				}
			}},
		{name: "FailedReasonByKind", capability: groundtruth.Neither, m: rejected, rec: row(ledger.StateFailed, "550: affected recipient(s): <email:07fc6962489bd744>"),
			check: func(t *testing.T, lr LaneReport, _ ClassCount) {
				if lr.Failed["550: affected recipient(s): <email:…>"] != 1 {
					t.Errorf("Failed %v, want the reason counted with its address folded to its kind", lr.Failed)
				}
			}},
		{name: "AbandonedWhereAvoidable", capability: groundtruth.CanAvoid, m: a, rec: row(ledger.StateAbandoned, policy), want: []string{"abandoned, never accepted"},
			check: func(t *testing.T, lr LaneReport, _ ClassCount) {
				if lr.AbandonedNeverAccepted != 1 {
					t.Errorf("AbandonedNeverAccepted %d, want 1", lr.AbandonedNeverAccepted)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l := &lane{def: Lane{Name: "test", Capability: tc.capability}}
			lr := LaneReport{Failed: map[string]int{}}
			var cc ClassCount
			var got []string
			l.judge(&lr, &cc, facts{m: tc.m, n: tc.n, rec: tc.rec, state: tc.rec.State}, func(v Violation) { got = append(got, v.Kind) })
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("violations %q, want %q", got, tc.want)
			}
			if tc.check != nil {
				tc.check(t, lr, cc)
			}
		})
	}
}

// TestReasonKind: the report counts a rejection reason once, whatever
// recipient's redacted address it names; other text stays as it is.
func TestReasonKind(t *testing.T) {
	a := `550 5.1.1: affected recipient(s): <email:07fc6962489bd744>, affected message ID: <[address]>`
	b := `550 5.1.1: affected recipient(s): <email:0dc0e42c039934d0>, affected message ID: <[address]>`
	if reasonKind(a) != reasonKind(b) || !strings.Contains(reasonKind(a), "<email:…>") {
		t.Errorf("reasonKind(a) = %q, reasonKind(b) = %q: want one reason naming the kind", reasonKind(a), reasonKind(b))
	}
	for _, r := range []string{"400: simulated fault: Bad Request", "MessageRejected: on the suppression list", "phone:123"} {
		if got := reasonKind(r); got != r {
			t.Errorf("reasonKind(%q) = %q, want it unchanged", r, got)
		}
	}
}
