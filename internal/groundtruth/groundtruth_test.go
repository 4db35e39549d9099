package groundtruth

import (
	"slices"
	"testing"

	"github.com/sendonce/sendonce/internal/ledger"
)

// TestJudge is the verdict's table: for each way a message can end, the
// kinds it must get. A case without a violation is an outcome the
// product may reach; every other must raise exactly the violation named.
func TestJudge(t *testing.T) {
	t.Parallel()
	const (
		sent, failed, abandoned = ledger.StateSent, ledger.StateFailed, ledger.StateAbandoned
		pending, uncertain      = ledger.StatePending, ledger.StateUncertain
		noRow                   = ledger.State("NO ROW")
	)
	policy := "class policy abandon after an ambiguous attempt"
	for _, tc := range []struct {
		name string
		f    Facts
		want []Kind
	}{
		{"sent once", Facts{Capability: CanAvoid, Received: 1, State: sent}, []Kind{Once}},
		{"sent twice (can avoid)", Facts{Capability: CanAvoid, Received: 2, State: sent}, []Kind{Twice}},
		{"sent three times (can avoid)", Facts{Capability: CanAvoid, Received: 3, State: sent}, []Kind{Twice}},
		{"twice through neither, class resends", Facts{Capability: Neither, Class: "otp", Received: 2, State: sent}, []Kind{TwiceByPolicy}},
		{"twice through neither, class never resends", Facts{Capability: Neither, Class: "marketing", Received: 2, State: sent}, []Kind{TwiceAgainstPolicy}},
		{"never received, pending", Facts{Capability: CanAvoid, State: pending}, []Kind{Lost}},
		{"never received, no row", Facts{Capability: CanAvoid, State: noRow}, []Kind{Lost}},
		{"never received, uncertain", Facts{Capability: Neither, State: uncertain}, []Kind{Lost}},
		{"twice through can-avoid, class resends", Facts{Capability: CanAvoid, Class: "otp", Received: 2, State: sent}, []Kind{Twice}},
		{"received, still uncertain", Facts{Capability: CanAvoid, Received: 1, State: uncertain}, []Kind{Unresolved}},
		{"SENT, never received", Facts{Capability: CanAvoid, State: sent}, []Kind{Lost}},
		{"SENT though planned rejected", Facts{Capability: CanAvoid, State: sent, WantFailed: true}, []Kind{Lost}},
		{"FAILED as planned", Facts{Capability: CanAvoid, State: failed, Reason: "rejected", WantFailed: true}, []Kind{Failed}},
		{"FAILED, reported undeliverable", Facts{Capability: Neither, Received: 1, Rejected: true, State: failed, Reason: "undelivered"}, []Kind{Failed}},
		{"FAILED though accepted", Facts{Capability: CanAvoid, Received: 1, State: failed, Reason: "x"}, []Kind{Contradiction}},
		{"FAILED without a reason", Facts{Capability: CanAvoid, State: failed, WantFailed: true}, []Kind{Contradiction}},
		{"FAILED, never rejected", Facts{Capability: CanAvoid, State: failed, Reason: "x"}, []Kind{FailedNeverRejected}},
		{"abandoned after delivery", Facts{Capability: Neither, Received: 1, State: abandoned, Reason: policy}, []Kind{AbandonedDelivered}},
		{"abandoned twice delivered", Facts{Capability: Neither, Class: "otp", Received: 2, State: abandoned, Reason: policy}, []Kind{TwiceByPolicy, AbandonedDelivered}},
		{"abandoned at max age", Facts{Capability: CanAvoid, State: abandoned, Reason: "reached the maximum age"}, []Kind{AbandonedMaxAge}},
		{"abandoned by policy, ambiguous", Facts{Capability: Neither, State: abandoned, Reason: policy, Ambiguous: true}, []Kind{AbandonedByPolicy}},
		{"abandoned by budget, ambiguous", Facts{Capability: Neither, State: abandoned, Reason: "gave up after 5 attempts", Ambiguous: true}, []Kind{AbandonedByPolicy}},
		{"abandoned by policy, not ambiguous", Facts{Capability: Neither, State: abandoned, Reason: policy}, []Kind{AbandonedNeverAccepted}},
		{"abandoned by policy through can-avoid", Facts{Capability: CanAvoid, State: abandoned, Reason: policy, Ambiguous: true}, []Kind{AbandonedNeverAccepted}},
		{"abandoned for another reason", Facts{Capability: Neither, State: abandoned, Reason: "other", Ambiguous: true}, []Kind{AbandonedNeverAccepted}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Judge(tc.f)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("Judge(%+v) = %q, want %q", tc.f, got, tc.want)
			}
		})
	}
}
