// Package provider defines what the sender and the reconciler need from a
// notification provider (SNS, Twilio, SMTP, the generic HTTP protocol), and
// the small set of error kinds every adapter translates its failures into.
//
// The sender and reconciler act on an adapter's Capabilities, never on its
// name:
//
//   - IdempotentSends: the provider drops a repeat that carries the same
//     client key, so an ambiguous outcome is retried with the same key.
//   - LookupByReference (the adapter implements Looker): the provider can
//     be asked whether it accepted the message, so reconciliation asks
//     before it resends.
//   - neither: an ambiguous outcome becomes UNCERTAIN and the message's
//     class decides what follows.
//
// In the path of one message (docs/architecture.md) the provider call is
// the step between the claim and the mark: the sender calls Adapter.Send
// only while it holds the claim on Message.Key in the ledger (the step
// before), and records the Receipt, or the Kind of the error, as the
// row's outcome (the step after).
package provider

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sendonce/sendonce/notify"
)

// Capabilities is what an adapter can promise about repeats.
type Capabilities struct {
	// IdempotentSends: a repeat of Send with the same Message.Key is
	// dropped by the provider (it answers with the original message).
	IdempotentSends bool
	// LookupByReference: the adapter implements Looker.
	LookupByReference bool
}

// Message is one rendered message ready to send.
type Message struct {
	// Key is the idempotency key; adapters pass it to the provider as
	// client key or reference wherever the provider accepts one.
	Key     string
	Tenant  string
	Channel notify.Channel
	// Class is the message class: what an ambiguous outcome leads to.
	Class notify.Class
	// To is the raw address: E.164 phone, email address or push target.
	To      string
	Subject string
	Body    string
	// HTML is an email's optional HTML part, sent beside Body as
	// multipart/alternative; adapters without HTML support send Body.
	HTML string
	// AttemptedAt is when the current claim was taken; lookups that
	// search by time start there (for a lookup: the earliest attempt that
	// may have reached the provider).
	AttemptedAt time.Time
	// AttemptedUntil, set for a lookup, is when the latest attempt's claim
	// ran out: no attempt being resolved reached the provider after it. A
	// lookup that searches by time may end its window there (plus clock
	// skew). Zero when unknown.
	AttemptedUntil time.Time
	// ProviderMessageID, set for a lookup, is the provider's id of this
	// key's message as the ledger knows it from a delivery callback whose
	// URL carried the key: evidence that the message is this key's. Empty
	// when no such callback arrived.
	ProviderMessageID string
}

// Receipt is the provider's answer to an accepted send.
type Receipt struct {
	// MessageID is the provider's id of the message.
	MessageID string
}

// Adapter sends messages through one provider. Send must honour ctx's
// deadline. Its error is an *Error (use KindOf): an adapter translates
// every failure it can meet.
type Adapter interface {
	// Name is the provider's configuration name ("http", "sns", ...).
	Name() string
	// Capabilities is what the provider promises about repeats; it does
	// not change while the adapter is in use.
	Capabilities() Capabilities
	// Send sends m, passing m.Key to the provider as its client key or
	// reference wherever the provider takes one. Its error is an *Error
	// whose Kind says whether the provider may have accepted m.
	Send(ctx context.Context, m Message) (Receipt, error)
}

// LookupStatus is what a provider knows about a message.
type LookupStatus int

// The lookup statuses.
const (
	// LookupNotFound: the provider has no record of the message.
	LookupNotFound LookupStatus = iota
	// LookupAccepted: the provider accepted (or delivered) the message.
	LookupAccepted
	// LookupRejected: the provider has the message and it failed for good.
	LookupRejected
	// LookupUnproven: the provider holds messages that match by content
	// (recipient, text, sender), but nothing proves that one of them is
	// this key's: another message may carry the same text. The answer
	// proves neither that the message was sent nor that it was not
	// (Attribute).
	LookupUnproven
)

var lookupStatusNames = [...]string{LookupNotFound: "not_found", LookupAccepted: "accepted", LookupRejected: "rejected", LookupUnproven: "unproven"}

// String returns the status's name as logs and the ledger print it
// ("not_found", "accepted", "rejected", "unproven").
func (s LookupStatus) String() string { return name(lookupStatusNames[:], s, "LookupStatus") }

// LookupResult is the answer to a Lookup.
type LookupResult struct {
	Status    LookupStatus
	MessageID string
	// Reason explains LookupRejected and LookupUnproven.
	Reason string
	// Candidates, for LookupUnproven, are the provider's ids of the
	// messages that matched by content: if the ledger records every one
	// of them for another key, none is this message's, and the answer is
	// "not found" (proof by exclusion, which the reconciler makes).
	Candidates []string
}

// Candidate is a message a provider holds that matches a Message by
// content (recipient, text and sender, within the attempt's time window),
// found by an adapter whose provider cannot be searched by key.
type Candidate struct {
	// ID is the provider's id of the message.
	ID string
	// Status is LookupAccepted or LookupRejected.
	Status LookupStatus
	// Reason explains LookupRejected.
	Reason string
}

// Attribute decides what a content search proves about m, given every
// candidate the complete search found. A content match alone is no proof
// of ownership: two logical messages may carry the same text to one
// recipient, and one of them may never have been sent. So:
//
//   - a candidate whose ID is m.ProviderMessageID (the id a delivery
//     callback carrying m's key recorded) is m's message: its status;
//   - no candidate at all, and no such id: LookupNotFound (had m's
//     message reached the provider, the search would have found it);
//   - otherwise LookupUnproven, with the candidates' ids
//     (LookupResult.Candidates): the provider may or may not have m.
//
// Adapters that search by content call it with the candidates of a
// complete search; an incomplete search is an error, never an answer.
func Attribute(m Message, candidates []Candidate) LookupResult {
	if m.ProviderMessageID != "" {
		for _, c := range candidates {
			if c.ID == m.ProviderMessageID {
				return LookupResult{Status: c.Status, MessageID: c.ID, Reason: c.Reason}
			}
		}
		return LookupResult{Status: LookupUnproven, Reason: "the message a callback recorded for this key is not listed"}
	}
	if len(candidates) == 0 {
		return LookupResult{Status: LookupNotFound}
	}
	ids := make([]string, len(candidates))
	for i, c := range candidates {
		ids[i] = c.ID
	}
	return LookupResult{Status: LookupUnproven, Reason: fmt.Sprintf("%d message(s) match by content; none is proven to be this key's", len(candidates)), Candidates: ids}
}

// Looker is implemented by adapters whose provider can be asked whether it
// accepted a message (Capabilities.LookupByReference).
type Looker interface {
	// Lookup asks the provider about m (by m.Key, or what identifies it
	// there). Its error is an *Error.
	Lookup(ctx context.Context, m Message) (LookupResult, error)
}

// Kind classifies a provider failure by what the sender must do next.
type Kind int

// The kinds.
const (
	// Ambiguous: the request may have reached the provider and been
	// accepted (a timeout or dropped connection after it was written).
	// The zero value: an unclassified failure is treated as ambiguous,
	// never as safe to repeat.
	Ambiguous Kind = iota
	// Transient: the provider did not take the message (throttling, a 5xx
	// answer before acceptance); retry later with the same key.
	Transient
	// Permanent: the provider rejected the message for good (invalid
	// number, opted out); the message is FAILED with the reason.
	Permanent
	// Config: a deployment problem (bad credentials, missing permission,
	// KMS); not the message's fault: retried, alarmed, never FAILED.
	Config
)

var kindNames = [...]string{Ambiguous: "ambiguous", Transient: "transient", Permanent: "permanent", Config: "config"}

// String returns the kind's name as logs and the ledger print it
// ("ambiguous", "transient", "permanent", "config").
func (k Kind) String() string { return name(kindNames[:], k, "Kind") }

// name returns names[v], or typ(v) for a value names does not cover.
func name[T ~int](names []string, v T, typ string) string {
	if v >= 0 && int(v) < len(names) {
		return names[v]
	}
	return fmt.Sprintf("%s(%d)", typ, int(v))
}

// Error is a classified provider failure. Its text never holds secrets or
// raw addresses.
type Error struct {
	Kind Kind
	// Provider is the adapter's name.
	Provider string
	// Op is the operation: "send" or "lookup".
	Op string
	// Code is the provider's own code (HTTP status, SNS error code,
	// Twilio error code, SMTP reply code), if any.
	Code string
	// Reason is a short human explanation, safe to store in the ledger.
	Reason string
	// Err is the underlying error, if any.
	Err error
}

// Error returns "provider: op: kind (code): reason"; it never holds a
// secret or a raw address.
func (e *Error) Error() string {
	s := e.Provider + ": " + e.Op + ": " + e.Kind.String()
	if e.Code != "" {
		s += " (" + e.Code + ")"
	}
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	return s
}

// Unwrap returns the underlying error, for errors.Is and errors.As.
func (e *Error) Unwrap() error { return e.Err }

// KindOf returns the kind of err: the Kind of the first *Error in its
// chain, Ambiguous for anything unclassified.
func KindOf(err error) Kind {
	var pe *Error
	if errors.As(err, &pe) {
		return pe.Kind
	}
	return Ambiguous
}

// ReasonOf returns a short, storable explanation of err.
func ReasonOf(err error) string {
	var pe *Error
	if errors.As(err, &pe) {
		if pe.Code != "" && pe.Reason != "" {
			return pe.Code + ": " + pe.Reason
		}
		if pe.Reason != "" {
			return pe.Reason
		}
		if pe.Code != "" {
			return pe.Code
		}
	}
	if err == nil {
		return ""
	}
	return err.Error()
}
