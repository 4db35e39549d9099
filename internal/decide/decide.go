// Package decide holds the one decision of the send path that both the
// sender (on a redelivery that finds a live row) and the reconciler (on a
// row of the attention index) make: what to do with a ledger row whose
// outcome is not known yet. It also defines, once, the timing constants
// both functions and the deployment template must agree on.
//
// Of is a pure function of the row, the clock, the provider's
// capabilities, the class policy and the limits; it performs nothing. The
// caller performs the Action it returns, every change through a fenced
// takeover of the row's claim.
//
// # The decision
//
// In order, the first rule that applies decides. decide_test.go holds the
// table, which TestTable checks Of against over every combination of its
// dimensions (caller, row state, the provider's capabilities, class
// policy, settle, age, attempts, lookup answer, render, time left,
// validity, the provider's health; row "new" is a message the sender has
// not claimed yet). A
// rule names only the dimensions it tests: "provider lookup|both" is a
// provider that can be asked (and may also drop repeats), "tries many"
// is MaxAttempts attempts that may have reached the provider, "time
// short" is Input.NoTime, "health down" Input.ProviderDown and "health
// paced" Input.Paced. The lines below are
// generated from it by TestDocTable (go test -run TestDocTable -update):
//
//	row new, validity expired                                                                                          expire
//	row new, render unrenderable|no_message                                                                            mark_failed
//	row new, provider unconfigured                                                                                     wait
//	row new                                                                                                            send
//	row sent|failed|abandoned                                                                                          acknowledge
//	row pending-live                                                                                                   wait
//	caller sender, row uncertain, provider unconfigured|none|lookup                                                    hand_off
//	caller sender, row uncertain, render unrenderable|no_message                                                       hand_off
//	caller sender, row uncertain, validity expired                                                                     hand_off
//	row released|released-backoff, validity expired                                                                    expire
//	caller reconciler, row released-backoff                                                                            wait
//	caller reconciler, age old                                                                                         abandon
//	row released|released-backoff, render unrenderable|no_message                                                      mark_failed
//	render no_message                                                                                                  mark_failed
//	caller sender, row pending-stale, tries few, render unrenderable                                                   mark_uncertain
//	render unrenderable                                                                                                wait
//	caller sender, row released|released-backoff, provider unconfigured                                                wait
//	caller reconciler, row released, provider unconfigured                                                             postpone
//	row released|released-backoff, health down|paced                                                                   wait
//	row released|released-backoff                                                                                      send
//	caller sender, row pending-stale, provider unconfigured, tries few                                                 mark_uncertain
//	provider unconfigured                                                                                              wait
//	caller sender, row pending-stale, provider lookup|both, tries few, lookup not_asked, time short                    mark_uncertain
//	provider lookup|both, lookup not_asked, time short                                                                 wait
//	provider lookup|both, lookup not_asked                                                                             look_up
//	provider lookup|both, lookup accepted                                                                              mark_sent
//	provider lookup|both, lookup rejected                                                                              mark_failed
//	provider lookup|both, settle settled, lookup no_record, validity expired                                           expire
//	caller sender, row pending-stale, provider lookup|both, tries few, lookup no_record|failed, validity expired       mark_uncertain
//	provider lookup|both, lookup no_record|failed, validity expired                                                    wait
//	caller sender, validity expired                                                                                    mark_uncertain
//	caller reconciler, validity expired                                                                                abandon
//	caller sender, row pending-stale, provider both|idempotent, tries few, health down|paced                           mark_uncertain
//	provider both|idempotent, health down|paced                                                                        wait
//	provider both                                                                                                      send
//	caller sender, row pending-stale, provider lookup, settle settled, tries few, lookup no_record, health down|paced  mark_uncertain
//	provider lookup, settle settled, lookup no_record, health down|paced                                               wait
//	provider lookup, settle settled, lookup no_record                                                                  send
//	caller sender, row pending-stale, provider lookup, tries few, lookup no_record|failed                              mark_uncertain
//	provider lookup, lookup no_record|failed                                                                           wait
//	provider idempotent                                                                                                send
//	caller sender, provider none|lookup                                                                                mark_uncertain
//	caller reconciler, provider none|lookup, policy resend, tries many                                                 abandon
//	caller reconciler, provider none|lookup, policy resend, health down|paced                                          wait
//	caller reconciler, provider none|lookup, policy resend                                                             send
//	caller reconciler, provider none|lookup                                                                            abandon
//
// The fast path: an UNCERTAIN row whose attempt went through a provider
// that drops repeats (and that still serves the channel), still valid
// and renderable, is not handed off when the sender's next receive finds
// it: the sender decides as the reconciler would (a lookup first where
// the provider can be asked, then a repeat with the same key through
// that provider: Caps describe the attempt's own provider, never
// another), so the message is settled on the next receive instead of
// waiting for the reconciler. Every other UNCERTAIN row is the
// reconciler's (hand_off).
//
// The sender's mark_uncertain rules for "row pending-stale, tries few"
// are Wait†: Wait is MarkUncertain instead when the sender decides about a stale
// first claim (PENDING, not released, not taken over): such a row is not
// in the attention index, so waiting would leave it to the receives its
// SQS message has left, and it would reach the dead-letter queue unseen
// by the reconciler. Marked UNCERTAIN it is the reconciler's, which asks
// again.
//
// Expired ("validity expired") means past the row's ValidUntil
// (ledger.Entry.Expired): the earlier of the request's expires_at and its
// class's default validity. An expired message is never sent, by either
// caller and through any provider: no rule after the expiry rules decides
// Send for it (TestExpiredNeverSent). It ends FAILED when nothing can have
// been sent, SENT or FAILED when a lookup finds the earlier attempt, and
// ABANDONED when the earlier attempt may have been sent and the provider
// cannot say; the reason of the FAILED and ABANDONED rows starts with
// ReasonExpired. The validity is not part of the key.
//
// The provider is always the one the attempt being resolved went through
// (the row's Provider; dispatch.AttemptAdapter chooses it): Configured
// and Caps describe that provider, never whichever serves the channel
// now. Only a row whose every attempt was released may be sent by
// another.
//
// The reconciler's class-policy resend is abandon instead once the row
// holds MaxAttempts attempts that may have reached the provider ("tries
// many": Attempts − Releases): a repeat the provider can neither drop nor
// be asked about is bounded.
//
// "Released" means the latest claim was given up before its provider call
// could send anything: such attempts never count toward giving up, and a
// released row is resent without asking the provider. Nor do attempts a
// settled lookup found no record of (a 5xx outage of a provider that can
// be asked but ignores the key): the lookup covers every attempt that may
// have sent, so a resend after it is never a repeat and the attempt limit
// does not apply; the maximum age still does. A lookup always asks
// about the attempt being resolved (from the row's LookupStart as read,
// the earliest attempt that may have sent), never about a takeover's own
// claim; "settled" is measured from the latest attempt (AttemptedAt).
//
// # Timing
//
// A worker's worst path is a takeover that looks the message up and then
// sends it: two provider calls plus the ledger writes around them
// (TakeOverBudget). The claim timeout must cover it (CheckClaimTimeout),
// and no lookup starts with less than it left before the deadline; a first
// attempt needs one provider call (SendBudget).
package decide

import (
	"fmt"
	"strings"
	"time"

	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/provider"
)

// Timing constants, defined here and nowhere else.
const (
	// DefaultProviderTimeout bounds one provider call unless
	// SENDONCE_PROVIDER_TIMEOUT says otherwise.
	DefaultProviderTimeout = 5 * time.Second
	// ProcessingMargin is the time a healthy worker needs around its
	// provider calls (ledger writes, rendering).
	ProcessingMargin = 5 * time.Second
	// DefaultSettle is how long after an attempt a provider's "no record"
	// answer is trusted, unless SENDONCE_RECONCILE_SETTLE says otherwise.
	DefaultSettle = 2 * time.Minute
	// DefaultMaxAge is how long the reconciler keeps trying a row before it
	// gives up (SENDONCE_MAX_AGE). It is derived from the template's
	// defaults: the longest time SQS may still hand the message to a
	// sender, QueueRetentionSeconds (4 days) and then DLQRetentionSeconds
	// (14 days) before a redrive. Until then a message that was never sent
	// is never abandoned; the ledger retention (30 days) outlives it by the
	// reconcile horizon, so a late redrive finds the final row.
	DefaultMaxAge = (4 + 14) * 24 * time.Hour
	// DefaultMaxAttempts bounds the attempts that may have reached the
	// provider (released attempts do not count) before the reconciler
	// abandons a row.
	DefaultMaxAttempts = 5
	// RetryBase and RetryCap shape the reconciler's backoff of released
	// rows: RetryBase × 2^(attempt−1), at most RetryCap; RetryBase alone
	// for a release because the provider is down or paced (RetryDelay).
	RetryBase = time.Minute
	RetryCap  = 30 * time.Minute
)

// SendBudget is the time a first attempt needs before the deadline: one
// provider call and the ledger writes around it (ProcessingMargin).
func SendBudget(providerTimeout time.Duration) time.Duration {
	return Budgets{Provider: providerTimeout}.Send()
}

// TakeOverBudget is a worker's worst path: a takeover that looks the
// message up and then sends it, two provider calls and the ledger writes
// around them (ProcessingMargin).
func TakeOverBudget(providerTimeout time.Duration) time.Duration {
	return Budgets{Provider: providerTimeout}.TakeOver()
}

// Budgets are the timings a worker's steps are judged by: the provider
// timeout and the margin its ledger writes and rendering need around the
// provider calls (ProcessingMargin when zero).
type Budgets struct {
	Provider time.Duration
	Margin   time.Duration
}

func (b Budgets) margin() time.Duration {
	if b.Margin == 0 {
		return ProcessingMargin
	}
	return b.Margin
}

// Send is the time a first attempt needs before the deadline: one
// provider call and the margin.
func (b Budgets) Send() time.Duration { return b.Provider + b.margin() }

// TakeOver is a worker's worst path: a lookup and then a send, two
// provider calls and the margin.
func (b Budgets) TakeOver() time.Duration { return 2*b.Provider + b.margin() }

// CheckClaimTimeout returns an error unless the claim timeout covers a
// worker's worst path (TakeOverBudget): otherwise a healthy worker's claim
// could be taken over while it still sends.
func CheckClaimTimeout(claim, providerTimeout time.Duration) error {
	return Budgets{Provider: providerTimeout}.CheckClaim(claim)
}

// CheckClaim returns an error unless the claim timeout covers a worker's
// worst path (TakeOver), or when a timing is not positive.
func (b Budgets) CheckClaim(claim time.Duration) error {
	if b.Provider <= 0 {
		return fmt.Errorf("the provider timeout (%s) must be positive", b.Provider)
	}
	if b.Margin < 0 {
		return fmt.Errorf("the ledger margin (%s) must not be negative", b.Margin)
	}
	if need := b.TakeOver(); claim < need {
		return fmt.Errorf("the claim timeout (%s) must be at least twice the provider timeout (%s) plus %s of processing time (%s): a takeover may look a message up and then send it, and a healthy worker's claim must not be taken over mid-send",
			claim, b.Provider, b.margin(), need)
	}
	return nil
}

// RetryAfter is how long the reconciler waits before it retries a row
// whose attempt number attempt was released: exponential, capped.
func RetryAfter(attempt int) time.Duration { return Backoff(RetryBase, attempt) }

// RetryDelay is how long a row released for cause waits before the
// reconciler retries it (its RetryAt), from base
// (SENDONCE_RECONCILE_RETRY_BASE). A refusal of the provider as a whole
// does not grow a row's backoff: a release because the provider is known
// down (CauseProviderDown) or its send rate was spent (CausePaced) waits
// base, however often the row was released before, so the rows of an
// outage are due again within base of the recovery (the reconciler does
// not take them over while the provider is still down: Input.ProviderDown).
// Any other release (a refusal while the provider otherwise answers, a
// configuration error, the template store, a lost ledger answer) backs
// off exponentially by attempt (Backoff).
func RetryDelay(base time.Duration, attempt int, cause Cause) time.Duration {
	if cause == CauseProviderDown || cause == CausePaced {
		return min(base, RetryCap)
	}
	return Backoff(base, attempt)
}

// Backoff is RetryAfter with base in place of RetryBase
// (SENDONCE_RECONCILE_RETRY_BASE): base × 2^(attempt−1), at most RetryCap.
func Backoff(base time.Duration, attempt int) time.Duration {
	d := base
	for i := 1; i < attempt && d < RetryCap; i++ {
		d *= 2
	}
	return min(d, RetryCap)
}

// ParseValidity parses the classes' default validities
// (SENDONCE_VALIDITY): "class=duration,..." with a positive Go duration,
// e.g. "otp=10m,transactional=24h". A class it does not name has none.
// A message's validity is the earlier of its request's expires_at and
// its class's default counted from when the message was first enqueued.
func ParseValidity(s string) (map[string]time.Duration, error) {
	out := map[string]time.Duration{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		class, v, ok := strings.Cut(part, "=")
		class = strings.TrimSpace(class)
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if !ok || class == "" || err != nil || d <= 0 {
			return nil, fmt.Errorf("validity %q: want class=duration with a positive Go duration, e.g. otp=10m", part)
		}
		if _, dup := out[class]; dup {
			return nil, fmt.Errorf("validity %q: class %s is named twice", part, class)
		}
		out[class] = d
	}
	return out, nil
}

// ValidUntil is a message's validity: the earlier of expiresAt (the
// request's, zero when none) and enqueued plus def (its class's default,
// zero when none). Zero when it has neither.
func ValidUntil(expiresAt, enqueued time.Time, def time.Duration) time.Time {
	if def <= 0 {
		return expiresAt
	}
	if c := enqueued.Add(def); expiresAt.IsZero() || c.Before(expiresAt) {
		return c
	}
	return expiresAt
}

// Policy is what happens to an ambiguous attempt whose provider can
// neither look it up nor drop a repeat.
type Policy string

// The policies.
const (
	// PolicyResend sends again with the same key, accepting a possible
	// duplicate.
	PolicyResend Policy = "resend"
	// PolicyResendIfIdempotent resends only through a provider that drops
	// repeats; otherwise it abandons.
	PolicyResendIfIdempotent Policy = "resend-if-idempotent"
	// PolicyAbandon marks the row ABANDONED, accepting a possible miss.
	PolicyAbandon Policy = "abandon"
)

// Caller is who decides: the two callers differ where the sender hands a
// row to the reconciler instead of settling it.
type Caller int

// The callers.
const (
	// Sender: a redelivery found the row.
	Sender Caller = iota + 1
	// Reconciler: the row came from the attention index.
	Reconciler
)

func (c Caller) String() string {
	switch c {
	case Sender:
		return "sender"
	case Reconciler:
		return "reconciler"
	}
	return fmt.Sprintf("Caller(%d)", int(c))
}

// Answer is what asking the provider about the attempt being resolved
// found (from its provider.LookupResult).
type Answer int

// The lookup answers.
const (
	// NotAsked: the provider has not been asked (yet).
	NotAsked Answer = iota
	// FoundAccepted: the provider accepted the message.
	FoundAccepted
	// FoundRejected: the provider has the message and it failed for good.
	FoundRejected
	// NoRecord: the provider has no record of it.
	NoRecord
	// AskFailed: the provider could not be asked.
	AskFailed
	// Unproven: the provider holds messages that match by content, but
	// none is proven to be this key's (provider.LookupUnproven): the
	// answer proves neither way.
	Unproven
)

var answerNames = [...]string{"not_asked", "accepted", "rejected", "no_record", "failed", "unproven"}

func (l Answer) String() string {
	if l >= 0 && int(l) < len(answerNames) {
		return answerNames[l]
	}
	return fmt.Sprintf("Answer(%d)", int(l))
}

// AnswerOf converts a provider's lookup status.
func AnswerOf(s provider.LookupStatus) Answer {
	switch s {
	case provider.LookupAccepted:
		return FoundAccepted
	case provider.LookupRejected:
		return FoundRejected
	case provider.LookupUnproven:
		return Unproven
	}
	return NoRecord
}

// Action is what the caller must do with the row.
type Action int

// The actions. Every action but Acknowledge, HandOff, Wait and LookUp
// starts with a fenced takeover of the row.
const (
	// Acknowledge: the row is final; nothing to do (a duplicate).
	Acknowledge Action = iota + 1
	// HandOff: the row is UNCERTAIN and the reconciler owns it; the
	// sender acknowledges the delivery.
	HandOff
	// Wait: leave the row as it is and come back later (a live lease, a
	// released row not due yet, a lookup that must settle or failed, or no
	// provider for a row that may have been sent).
	Wait
	// LookUp: ask the provider about the attempt being resolved, then
	// decide again with the answer.
	LookUp
	// Send: take over and send with the same key.
	Send
	// MarkSent: take over and record SENT (the lookup found it accepted).
	MarkSent
	// MarkFailed: take over and record FAILED (the lookup found it
	// rejected).
	MarkFailed
	// MarkUncertain: take over and record UNCERTAIN; the reconciler's
	// class policy decides later.
	MarkUncertain
	// Abandon: take over and record ABANDONED.
	Abandon
	// Postpone: take over and release again, due after the backoff: a
	// released row whose channel has no provider (a configuration error,
	// never a final failure).
	Postpone
	// Expire: the message's validity has passed and nothing can have
	// been sent: take over (or, for a new message, claim) and record
	// FAILED with a reason starting ReasonExpired. Never a provider call.
	Expire
)

var actionNames = map[Action]string{
	Acknowledge: "acknowledge", HandOff: "hand_off", Wait: "wait", LookUp: "look_up", Send: "send",
	MarkSent: "mark_sent", MarkFailed: "mark_failed", MarkUncertain: "mark_uncertain", Abandon: "abandon", Postpone: "postpone",
	Expire: "expire",
}

func (a Action) String() string {
	if n, ok := actionNames[a]; ok {
		return n
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

// ReasonExpired starts the reason of every row that ended final because
// its message's validity passed (ledger.Entry.ValidUntil): FAILED when
// nothing can have been sent, ABANDONED when an earlier attempt may have
// been sent and the provider could not say.
const ReasonExpired = "expired"

// IsExpired reports whether reason is one an expired message ends with.
func IsExpired(reason string) bool {
	return reason == ReasonExpired || strings.HasPrefix(reason, ReasonExpired+":")
}

// Cause is why a decision waits (or marks a stale first claim UNCERTAIN
// instead, Wait†): what the caller counts and logs, so that no caller
// works the reason out again from the row.
type Cause int

// The causes.
const (
	// CauseNone: the decision does not wait.
	CauseNone Cause = iota
	// CauseInFlight: another worker holds a live claim.
	CauseInFlight
	// CauseBackingOff: a released row is not due yet.
	CauseBackingOff
	// CauseNoProvider: no configured provider can resolve the row (the channel
	// has none, or the attempt's provider no longer serves it): a
	// configuration error, counted and alarmed.
	CauseNoProvider
	// CauseUnrenderable: the pinned message cannot be rendered and the
	// previous attempt may have sent.
	CauseUnrenderable
	// CauseSettling: the provider has no record yet, too soon to trust.
	CauseSettling
	// CauseLookupFailed: the provider could not be asked.
	CauseLookupFailed
	// CauseNoTime: too little time is left before the caller's deadline for a
	// lookup and a send (Input.NoTime).
	CauseNoTime
	// CauseProviderDown: the decision is a send, but every provider that
	// may take it is known down (Input.ProviderDown): the row is not
	// taken over for a call that would only be refused. Also why a row is
	// released when its provider refused it while known down (RetryDelay).
	CauseProviderDown
	// CausePaced: the decision is a send, but the provider's send rate is
	// spent (Input.Paced): the row is not taken over for a send that has
	// no token. Also why a row is released when its send had no token
	// (RetryDelay).
	CausePaced
)

var causeNames = [...]string{CauseNone: "", CauseInFlight: "in_flight", CauseBackingOff: "backing_off", CauseNoProvider: "no_provider",
	CauseUnrenderable: "unrenderable", CauseSettling: "settling", CauseLookupFailed: "lookup_failed", CauseNoTime: "no_time",
	CauseProviderDown: "provider_down", CausePaced: "paced"}

// String returns the cause's name as logs print it ("in_flight", ...).
func (c Cause) String() string {
	if c >= 0 && int(c) < len(causeNames) {
		return causeNames[c]
	}
	return fmt.Sprintf("Cause(%d)", int(c))
}

// Input is everything the decision depends on.
type Input struct {
	Caller Caller
	// Row is the ledger row as read (before any takeover). A Row with no
	// State is a new message the sender is about to claim (its Entry as
	// the claim would write it).
	Row ledger.Record
	Now time.Time
	// Configured is false when the provider that must resolve the row is
	// not configured: the channel has none, or an earlier attempt that
	// may have sent went through a provider that no longer serves it.
	// Caps are that provider's, and ignored when Configured is false.
	Configured bool
	Caps       provider.Capabilities
	// Unrenderable, when set, is why the message the row pins cannot be
	// rendered: the row holds no message (its request could not be
	// rendered when it was first claimed), or its pinned template version
	// is gone. The tenant's current templates never matter: a row is
	// resent with what it pins.
	Unrenderable string
	// Policy is the row's class policy.
	Policy Policy
	// Settle is how long after an attempt "no record" is trusted.
	Settle time.Duration
	// MaxAge (reconciler): a row older than this (from its first claim) is
	// abandoned; zero means no limit.
	MaxAge time.Duration
	// MaxAttempts (reconciler): a row with this many attempts that may
	// have reached the provider is abandoned; zero means no limit.
	MaxAttempts int
	// Answer is the provider's answer about the attempt being resolved,
	// once asked.
	Answer Answer
	// NoTime is true when less than TakeOverBudget is left before the
	// caller's deadline: no lookup starts (it may be followed by a send),
	// and the row waits for a caller with time (the sender's stale first
	// claim is marked UNCERTAIN instead: Wait†).
	NoTime bool
	// ProviderDown is true when every provider that may take the row's
	// next attempt is known down (dispatch.Health: cooling down after
	// failures in a row). A decision to send waits instead (CauseProviderDown,
	// Wait†), with no takeover: the send would only be refused, and its
	// takeover and release would cost two writes. A new message is still
	// claimed and sent (its row must exist for the reconciler, and its
	// call probes the provider).
	ProviderDown bool
	// Paced is true when the provider's send rate is spent: no send token
	// within the caller's wait (package pace). A decision to send waits
	// instead (CausePaced, Wait†), with no takeover. The caller takes the
	// token once Of has decided to send, and decides again with Paced
	// when it has none (as with a lookup's Answer).
	Paced bool
}

// Decision is an Action with its explanation.
type Decision struct {
	Action Action
	// Reason explains the action (stored as the row's reason where the
	// action writes one).
	Reason string
	// Cause is why the row waits: set for Wait, and for MarkUncertain
	// when it stands for a wait (Wait†).
	Cause Cause
}

// Of decides what to do with in.Row. It is pure: it reads only in.
func Of(in Input) Decision {
	r := in.Row
	expired := r.Expired(in.Now)
	if r.State == "" {
		return first(in, expired)
	}
	switch {
	case r.State.Final():
		return Decision{Action: Acknowledge, Reason: "the row is final (" + string(r.State) + ")"}
	case r.State == ledger.StatePending && !r.Stale(in.Now):
		return Decision{Action: Wait, Reason: "in flight: another worker holds the claim", Cause: CauseInFlight}
	case r.State == ledger.StateUncertain && in.Caller == Sender && !(in.Configured && in.Caps.IdempotentSends && !expired && in.Unrenderable == ""):
		// The fast path is the exception: an UNCERTAIN row whose attempt's
		// provider drops repeats is the next receive's to repeat, through
		// that provider with the same key (below).
		return Decision{Action: HandOff, Reason: "uncertain: the reconciler owns it"}
	case expired && r.Released:
		return Decision{Action: Expire, Reason: expiredReason(r, "never sent")}
	case r.Released && in.Caller == Reconciler && in.Now.Before(r.RetryAt):
		return Decision{Action: Wait, Reason: "released: backing off until " + r.RetryAt.UTC().Format(time.RFC3339), Cause: CauseBackingOff}
	case in.Caller == Reconciler && in.MaxAge > 0 && !r.CreatedAt.IsZero() && in.Now.Sub(r.CreatedAt) >= in.MaxAge:
		return Decision{Action: Abandon, Reason: fmt.Sprintf("gave up: older than the maximum age %s", in.MaxAge)}
	case in.Unrenderable != "" && (r.Released || holdsNoMessage(r)):
		return Decision{Action: MarkFailed, Reason: "cannot be rendered: " + in.Unrenderable}
	case in.Unrenderable != "":
		return wait(in, CauseUnrenderable, "the pinned message cannot be rendered ("+in.Unrenderable+"), and the previous attempt may have sent")
	case r.Released && !in.Configured:
		if in.Caller == Sender {
			return Decision{Action: Wait, Reason: "no provider is configured for channel " + r.Channel, Cause: CauseNoProvider}
		}
		return Decision{Action: Postpone, Reason: "config: no provider is configured for channel " + r.Channel}
	case r.Released:
		return send(in, "the previous attempt was released: nothing was sent")
	case !in.Configured && r.Provider != "":
		return wait(in, CauseNoProvider, "the provider of the previous attempt ("+r.Provider+") no longer serves channel "+r.Channel+", and that attempt may have sent")
	case !in.Configured:
		return wait(in, CauseNoProvider, "no provider is configured for channel "+r.Channel+" (the previous attempt may have sent)")
	}
	// The previous attempt may have reached the provider. A repeat that
	// the provider does not drop counts toward the attempt limit.
	mayHaveSent := r.Attempts - r.Releases
	resend := func(reason string) Decision {
		if in.Caller == Reconciler && in.MaxAttempts > 0 && mayHaveSent >= in.MaxAttempts {
			return Decision{Action: Abandon, Reason: fmt.Sprintf("gave up after %d attempts that may have reached the provider", mayHaveSent)}
		}
		return send(in, reason)
	}
	if in.Caps.LookupByReference && in.Answer != Unproven {
		switch in.Answer {
		case NotAsked:
			if in.NoTime {
				return wait(in, CauseNoTime, "no time left in this invocation for a lookup and a send")
			}
			return Decision{Action: LookUp, Reason: "ask the provider about the attempt"}
		case FoundAccepted:
			return Decision{Action: MarkSent, Reason: "the provider accepted the attempt"}
		case FoundRejected:
			return Decision{Action: MarkFailed, Reason: "the provider rejected the attempt"}
		}
		switch {
		case expired && in.Answer == NoRecord && in.Now.Sub(r.AttemptedAt) >= in.Settle:
			return Decision{Action: Expire, Reason: expiredReason(r, "no record at the provider after the settle time: never sent")}
		case expired && in.Answer == NoRecord:
			return wait(in, CauseSettling, "expired; no record at the provider yet: settling before it is recorded")
		case expired:
			return wait(in, CauseLookupFailed, "expired; lookup failed: ask again later, so the ledger knows whether it was sent")
		case in.Caps.IdempotentSends:
			return send(in, "the provider has no record or could not be asked, and it drops repeats")
		case in.Answer == NoRecord && in.Now.Sub(r.AttemptedAt) >= in.Settle:
			// The lookup covered every attempt that may have sent (from
			// LookupStart) and the latest has settled: none of them
			// reached the provider. Like released attempts, they do not
			// count toward giving up; only the maximum age does.
			return send(in, "no record at the provider after the settle time: no attempt was sent")
		case in.Answer == NoRecord:
			return wait(in, CauseSettling, "no record at the provider yet: settling")
		}
		return wait(in, CauseLookupFailed, "lookup failed: ask again later")
	}
	switch {
	case expired && in.Caller == Sender:
		return Decision{Action: MarkUncertain, Reason: "expired, and whether the earlier attempt was sent is unknown: the reconciler records it"}
	case expired:
		return Decision{Action: Abandon, Reason: expiredReason(r, "whether the earlier attempt was sent is unknown, and it is never sent again")}
	case in.Caps.IdempotentSends:
		return send(in, "the provider drops repeats")
	case in.Caller == Sender && in.Answer == Unproven:
		return Decision{Action: MarkUncertain, Reason: "a message with the same content is at the provider, but none is proven to be this key's"}
	case in.Caller == Sender:
		return Decision{Action: MarkUncertain, Reason: "a worker died holding the claim; whether it sent is unknown"}
	case in.Policy == PolicyResend:
		return resend("class " + r.Class + " policy: resend")
	}
	return Decision{Action: Abandon, Reason: fmt.Sprintf("class %s policy: abandon an ambiguous attempt the provider cannot look up or dedupe", r.Class)}
}

// first decides about a new message (in.Row has no State: the sender
// has not claimed it yet).
func first(in Input, expired bool) Decision {
	r := in.Row
	switch {
	case expired:
		return Decision{Action: Expire, Reason: expiredReason(r, "never sent")}
	case in.Unrenderable != "":
		return Decision{Action: MarkFailed, Reason: "cannot be rendered: " + in.Unrenderable}
	case !in.Configured:
		return Decision{Action: Wait, Reason: "no provider is configured for channel " + r.Channel, Cause: CauseNoProvider}
	}
	return Decision{Action: Send, Reason: "a new message"}
}

// send is Send for a row, or a wait when the send could not go: every
// provider that may take it is known down (Input.ProviderDown), or its
// send rate is spent (Input.Paced). The wait needs no takeover; the
// sender's stale first claim is marked UNCERTAIN instead (Wait†).
func send(in Input, reason string) Decision {
	switch {
	case in.ProviderDown:
		return wait(in, CauseProviderDown, "the provider is down (it keeps failing): "+reason+"; sent once it answers again")
	case in.Paced:
		return wait(in, CausePaced, "the provider's send rate is spent: "+reason+"; sent when a token is free")
	}
	return Decision{Action: Send, Reason: reason}
}

// expiredReason is the reason of a row whose message expired: ReasonExpired,
// the validity, and what is known about the message.
func expiredReason(r ledger.Record, detail string) string {
	return fmt.Sprintf("%s: valid until %s; %s", ReasonExpired, r.ValidUntil.UTC().Format(time.RFC3339Nano), detail)
}

// wait is Wait, or MarkUncertain when the sender decides about a stale
// first claim: not in the attention index, such a row must not be left to
// the receives its SQS message has left (the package doc, Wait†).
func wait(in Input, cause Cause, reason string) Decision {
	r := in.Row
	if in.Caller == Sender && r.Stale(in.Now) && !r.Indexed() {
		return Decision{Action: MarkUncertain, Reason: reason + "; marked uncertain for the reconciler", Cause: cause}
	}
	return Decision{Action: Wait, Reason: reason, Cause: cause}
}

// holdsNoMessage reports whether r holds neither content nor a template
// version: its request could not be rendered when it was first claimed,
// so no attempt of it can have reached a provider.
func holdsNoMessage(r ledger.Record) bool {
	return r.TemplateVersion == 0 && r.Subject == "" && r.Body == "" && r.HTML == ""
}
