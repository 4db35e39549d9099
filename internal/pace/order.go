package pace

import (
	"context"
	"time"
)

// # Earliest deadline first across containers
//
// When a provider's rate is short (after an outage, the backlog and the
// new traffic want more than the limit), the send with the nearest
// deadline goes first, whether it is a new message in a sender or a row
// of the backlog in a reconcile worker. A message's deadline is its
// validity; a message without validity is ranked by an aged deadline,
// Horizon after it was enqueued (Order.Rank): it goes after every message
// of its age that has a deadline, but it still goes, ahead of messages
// enqueued more than Horizon after it.
//
// The shared counter expresses it with a reservation per provider (one
// item, pk "pace#<provider>#hold"): the reconciler's hand-out picks the
// backlog's rows earliest deadline first, and a worker that starts a unit
// of them holds, for a short while (HoldFor), the unit's rate (the rows
// handed out for that provider ÷ the hand-out's period) for the rows up
// to the unit's cut (the latest Order handed out). A send whose Order
// comes after the cut yields: its block is taken with the limit less the
// held rate (Take's limit argument, the same one conditional write), so
// it gets only what the backlog leaves. Sends up to the cut, and every
// reconcile worker's send, take with the whole limit. A new message that
// yields is refused its token (PacedCode) and released: it joins the
// backlog, where the next hand-out orders it by its deadline with the
// rest.
//
// # The backlog first after an outage
//
// Earliest deadline first saves the most messages, but after an outage
// it serves every new message whose deadline comes before the backlog's
// last one (the new login codes, 10 minutes from theirs, before the
// transactional messages that waited out the hour) ahead of the backlog,
// and the backlog drains last. A new message can wait: it is sent in
// time as long as it goes before its deadline comes within Urgent. So a
// hold of a provider that answered again after an outage carries when it
// did (Hold.Backlog), and while it is active a send enqueued since then
// yields whatever its deadline, unless that deadline is within Urgent
// (Order.Urgent): the backlog goes first, and each new message when it
// must. The hand-out orders the lane's rows the same way (the urgent
// ones, then the rows enqueued before the recovery, then the rest, each
// earliest deadline first), so a new message that yielded waits behind
// the backlog until it is urgent. The outage simulator's offline
// schedules (internal/outagesim) check the rule: at each provider limit
// it delivers as many messages within their validity as earliest
// deadline first, and empties the outage's backlog sooner (docs/scale.md,
// "Issue 34, fourth part").
//
// What it costs: a worker writes the hold item when its hold extends the
// one it last wrote by more than HoldRefresh (at most one write per
// provider per container every HoldRefresh while units run); a sender
// reads it (eventually consistent, half a read unit) at most once per
// provider per container every HoldRefresh. A new message that yields
// costs its claim and its release now, and the takeover and the mark
// later: two writes more than a message sent at once (4.1 instead of
// 2.1). No write is added to the counter itself.

// Horizon is the aged deadline of a message without validity: it is
// ranked as if it had to be sent within Horizon of when it was enqueued
// (Order.Rank). An hour, the longest validity of the template's classes
// (transactional): after an outage, a marketing message that waited
// through it goes with the transactional messages of its age, ahead of
// the new ones, rather than after every message with a deadline, so the
// backlog drains and new messages whose deadline is far off wait their
// turn. It orders sends only: such a message never expires.
const Horizon = time.Hour

// Urgent is how near its deadline a message is urgent (Order.Urgent): it
// never yields to a hold, and the hand-out puts it ahead of the backlog.
// Two minutes: the hand-out runs every minute, and a row handed out
// urgent is sent within the next (the outage simulator's offline
// schedules drain soonest with a margin of one to two minutes and lose
// no message with it).
const Urgent = 2 * time.Minute

// Order is a send's place in the earliest-deadline-first order.
type Order struct {
	// Deadline is the message's validity (ledger.Entry.ValidUntil);
	// zero: none, ranked at Since + Horizon (Rank).
	Deadline time.Time `json:"deadline,omitzero"`
	// Since is when the message was first enqueued (a ledger row's
	// CreatedAt): among equal deadlines, the older goes first, and a
	// message without validity is aged from it.
	Since time.Time `json:"since,omitzero"`
}

// Rank returns the deadline o is ranked by: its Deadline, or, without
// one, its aged deadline Since + Horizon (zero when o has neither: after
// every deadline).
func (o Order) Rank() time.Time {
	switch {
	case !o.Deadline.IsZero():
		return o.Deadline
	case !o.Since.IsZero():
		return o.Since.Add(Horizon)
	}
	return time.Time{}
}

// Urgent reports whether o's deadline (its validity, not an aged
// deadline: a message without validity never is) is within d of now.
func (o Order) Urgent(now time.Time, d time.Duration) bool {
	return !o.Deadline.IsZero() && o.Deadline.Sub(now) <= d
}

// After reports whether o goes after p: a later rank (Rank; none is the
// latest), or the same rank and younger.
func (o Order) After(p Order) bool {
	ro, rp := o.Rank(), p.Rank()
	switch {
	case ro.IsZero() != rp.IsZero():
		return ro.IsZero()
	case !ro.Equal(rp):
		return ro.After(rp)
	}
	return o.Since.After(p.Since)
}

// Hold is what the reconcile workers hold of a provider's rate for the
// backlog's rows (the package doc, "Earliest deadline first").
type Hold struct {
	// Rate is the sends a second held.
	Rate int `json:"rate"`
	// Cut is the latest Order the hold covers: a send after it yields.
	Cut Order `json:"cut"`
	// Until is when the hold ends.
	Until time.Time `json:"until,omitzero"`
	// Backlog, when set, is when the provider answered again after an
	// outage, while the hold's rows include messages enqueued before it
	// (the outage's backlog): the hold serves them first, and a send
	// enqueued since yields to it, whatever its cut, unless its deadline
	// is within Urgent (the package doc, "The backlog first after an
	// outage"). Zero once that backlog is gone: the cut alone decides.
	Backlog time.Time `json:"backlog,omitzero"`
}

// Active reports whether h holds anything at now.
func (h Hold) Active(now time.Time) bool { return h.Rate > 0 && now.Before(h.Until) }

// Holds is a Store that keeps each provider's hold (both stores of this
// package do). With a Store that does not, nothing yields.
type Holds interface {
	PutHold(ctx context.Context, provider string, h Hold) error
	GetHold(ctx context.Context, provider string) (Hold, error)
}

// HoldFor is how long a worker's hold lasts after it starts a unit;
// HoldRefresh is how often a container writes (a worker) or reads (a
// sender) a provider's hold at most.
const (
	HoldFor     = 10 * time.Second
	HoldRefresh = 5 * time.Second
)

type orderKey struct{}

// WithOrder returns ctx carrying o, the Order of the message whose send
// ctx is for: a paced adapter's send (Adapter.Send, Adapter.Reserve) then
// yields to a hold whose cut o comes after. A send without an Order (a
// reconcile worker's) never yields.
func WithOrder(ctx context.Context, o Order) context.Context {
	return context.WithValue(ctx, orderKey{}, o)
}

// OrderFrom returns the Order WithOrder put in ctx.
func OrderFrom(ctx context.Context) (Order, bool) {
	o, ok := ctx.Value(orderKey{}).(Order)
	return o, ok
}

// yields reports whether a send in order o yields to h at now (h
// active): o's deadline is not within Urgent, and o comes after h's cut
// or was enqueued since h's Backlog.
func (h Hold) yields(o Order, now time.Time) bool {
	if o.Urgent(now, Urgent) {
		return false
	}
	if !h.Backlog.IsZero() && !o.Since.IsZero() && !o.Since.Before(h.Backlog) {
		return true
	}
	return o.After(h.Cut)
}
