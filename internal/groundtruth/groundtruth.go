// Package groundtruth judges each logical message by what its counterpart
// (a provider simulator, moto_server, an SMTP server) says it
// received against what the ledger says became of it: delivered once,
// delivered twice, lost, never sent, abandoned after delivery. It is the
// one verdict of every black-box run: the chaos lanes (internal/chaos),
// which make chaos, TestChaosSmall and make demo run.
//
// A caller gathers the Facts of each message from its own counterpart and
// ledger, hands them to Judge and counts the kinds it returns (chaos: per
// lane, and per class). What is a
// violation and what is a cost the adapter's capability allows is decided
// here only, and table-tested once (groundtruth_test.go).
package groundtruth

import (
	"strings"

	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/reconcile"
)

// Capability is what an adapter lets the pipeline do about a repeat, and
// so what the verdict demands of it.
type Capability string

// The capabilities.
const (
	// CanAvoid: the provider drops repeats (idempotency key) or can be
	// asked whether it accepted a message (lookup). Nothing may be
	// delivered twice and nothing abandoned that it never accepted.
	CanAvoid Capability = "drops repeats or can be asked"
	// Neither: the class policy decides after an ambiguous send;
	// duplicates (resend) and misses (abandon) are counted per class.
	Neither Capability = "neither"
)

// SettledByPolicy reports whether c lets a class policy settle an
// ambiguous attempt (its duplicates and misses are counted per class).
func (c Capability) SettledByPolicy() bool { return c == Neither }

// Facts are what a run knows of one valid logical message.
type Facts struct {
	// Class is the message's class (its policy's).
	Class string
	// Capability is its adapter's, for its channel.
	Capability Capability
	// Received counts the times the counterpart accepted it (its own
	// record: the ground truth). Rejected is set when the counterpart
	// reports its message undeliverable (a delivery status "failed").
	Received int
	Rejected bool
	// State and Reason are its ledger row's (any state not final when
	// there is none: localpipeline.NoRow).
	State  ledger.State
	Reason string
	// WantFailed is set when the run planned a permanent rejection:
	// FAILED is right without a delivery. (SENT is wrong then, and Lost:
	// a rejected message is never received.)
	WantFailed bool
	// Ambiguous is set when an attempt of it had an outcome nobody could
	// know (a provider call without an answer, a worker dead holding its
	// claim): a class policy's abandon of it is a miss the policy allows.
	// A caller that cannot tell sets it.
	Ambiguous bool
}

// Kind is one finding of the verdict on a message. The violations are
// the kinds whose Violation is true; the others are outcomes the product
// may reach.
type Kind string

// The kinds. A message gets at most one of the delivery kinds (Once,
// Twice, TwiceByPolicy, TwiceAgainstPolicy) and at most one of the others.
const (
	// Once: SENT, and received exactly once.
	Once Kind = "delivered once"
	// Twice: received more than once, by no policy's resend.
	Twice Kind = "delivered twice"
	// TwiceByPolicy: received more than once after a class policy
	// resent an ambiguous attempt (counted per class: the policy's cost).
	TwiceByPolicy Kind = "delivered twice by class policy"
	// TwiceAgainstPolicy: repeated through an adapter that lets the
	// policy settle, although the class never resends.
	TwiceAgainstPolicy Kind = "delivered twice against its class policy"
	// Lost: never received, and either not final or SENT.
	Lost Kind = "lost"
	// Unresolved: received, but its row never became final.
	Unresolved Kind = "unresolved"
	// Contradiction: FAILED although the counterpart accepted it and
	// never reported it undeliverable, or FAILED without a reason.
	Contradiction Kind = "contradiction"
	// FailedNeverRejected: FAILED although nothing rejected it.
	FailedNeverRejected Kind = "FAILED, never rejected"
	// Failed: FAILED as planned or as its provider reported.
	Failed Kind = "failed"
	// AbandonedDelivered: ABANDONED, but the counterpart had received it.
	AbandonedDelivered Kind = "abandoned after delivery"
	// AbandonedMaxAge: ABANDONED at the maximum age.
	AbandonedMaxAge Kind = "abandoned at the maximum age"
	// AbandonedByPolicy: ABANDONED by a class policy after an ambiguous
	// attempt, never received (a miss, counted per class).
	AbandonedByPolicy Kind = "abandoned by class policy"
	// AbandonedNeverAccepted: ABANDONED although nothing made it
	// ambiguous or its adapter could have avoided or asked: never sent.
	AbandonedNeverAccepted Kind = "abandoned, never accepted"
)

// Violation reports whether k breaks a guarantee.
func (k Kind) Violation() bool {
	switch k {
	case Twice, TwiceAgainstPolicy, Lost, Unresolved, Contradiction,
		FailedNeverRejected, AbandonedNeverAccepted:
		return true
	}
	return false
}

// Judge returns the verdict on one message: its delivery kind (when it
// was received), then what its row says against its ground truth.
func Judge(f Facts) []Kind {
	var out []Kind
	n, state := f.Received, f.State
	if n > 1 {
		// Through Neither every repeat is a policy's (nothing else
		// resends an ambiguous attempt); through CanAvoid none.
		switch {
		case f.Capability != Neither:
			out = append(out, Twice)
		case reconcile.DefaultPolicies[f.Class] == reconcile.Resend:
			out = append(out, TwiceByPolicy)
		default:
			out = append(out, TwiceAgainstPolicy)
		}
	}
	if state == ledger.StateSent && n == 1 {
		out = append(out, Once)
	}
	switch {
	case !state.Final() && n == 0:
		out = append(out, Lost)
	case !state.Final():
		out = append(out, Unresolved)
	case state == ledger.StateSent && n == 0:
		out = append(out, Lost)
	case state == ledger.StateFailed && n >= 1 && !f.Rejected:
		out = append(out, Contradiction)
	case state == ledger.StateFailed && f.Reason == "":
		out = append(out, Contradiction)
	case state == ledger.StateFailed && n == 0 && !f.WantFailed:
		out = append(out, FailedNeverRejected)
	case state == ledger.StateFailed:
		out = append(out, Failed)
	case state == ledger.StateAbandoned && n >= 1:
		out = append(out, AbandonedDelivered)
	case state == ledger.StateAbandoned && (strings.Contains(f.Reason, "maximum age") || strings.Contains(f.Reason, "max age")):
		out = append(out, AbandonedMaxAge)
	case state == ledger.StateAbandoned && f.Capability.SettledByPolicy() && f.Ambiguous &&
		// a class policy's reason, or its resend budget's
		(strings.Contains(f.Reason, "policy") || strings.Contains(f.Reason, "gave up after")):
		out = append(out, AbandonedByPolicy)
	case state == ledger.StateAbandoned:
		out = append(out, AbandonedNeverAccepted)
	}
	return out
}
