package dispatch

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/sendonce/sendonce/internal/decide"
	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/provider"
)

// # Routes
//
// A channel is served by a route: an ordered list of providers (the
// first is the channel's provider, the rest its fallbacks). The next
// provider is tried only after an attempt provably sent nothing: a
// refusal before acceptance (provider.Transient, or provider.Config: a
// problem of the provider or the deployment, never the recipient's),
// which releases the claim. After an ambiguous attempt the row stays
// with the provider it went through (lookup, a repeat with the same key,
// or the class policy), and a recipient's permanent error ends the
// message FAILED on every route.

// Route returns channel's route: its provider in d.Providers (when it
// has one), then its fallbacks, in order.
func (d *Dispatcher) Route(channel string) []provider.Adapter {
	var route []provider.Adapter
	if p := d.Providers[channel]; p != nil {
		route = append(route, p)
	}
	return append(route, d.Fallbacks[channel]...)
}

// First returns the first provider of picked, nil when it is empty: the
// one that resolves the row (Pick).
func First(picked []provider.Adapter) provider.Adapter {
	if len(picked) == 0 {
		return nil
	}
	return picked[0]
}

// Candidates returns the providers of route that may take row rec's next
// attempt, in order. While an earlier attempt may have reached a provider
// unrecorded (rec.Attempts > rec.Releases), only that provider may:
// every lookup, every "drops repeats" judgement and every resend belongs
// to it, and Candidates returns it alone, or nothing when route no longer
// holds it (the row then waits, counted as ConfigErrors, and is never
// sent elsewhere on a guess). A row whose every attempt was released (or
// a message with no row yet: the zero Record) may go to any provider of
// route: Candidates returns them all, starting after the provider that
// refused the latest attempt. Nil entries of route are skipped.
func Candidates(rec ledger.Record, route []provider.Adapter) []provider.Adapter {
	route = slices.DeleteFunc(slices.Clone(route), func(p provider.Adapter) bool { return p == nil })
	if rec.Provider != "" && rec.Attempts > rec.Releases {
		for _, p := range route {
			if p.Name() == rec.Provider {
				return []provider.Adapter{p}
			}
		}
		return nil
	}
	start := 0
	if rec.Released {
		if i := slices.IndexFunc(route, func(p provider.Adapter) bool { return p.Name() == rec.Provider }); i >= 0 {
			start = i + 1
		}
	}
	return append(route[start:len(route):len(route)], route[:start]...)
}

// AttemptAdapter returns the adapter that must resolve row rec given
// route, the providers that serve its channel now: the first of
// Candidates. It returns nil and false when none may (no provider serves
// the channel, or the provider an earlier attempt may have reached no
// longer does).
func AttemptAdapter(rec ledger.Record, route ...provider.Adapter) (provider.Adapter, bool) {
	if c := Candidates(rec, route); len(c) > 0 {
		return c[0], true
	}
	return nil, false
}

// Pick is Candidates with the providers that Health skips moved last:
// a new message, or a row whose every attempt was released, goes first
// to a provider that is not cooling down. The order among healthy (and
// among skipped) providers is kept, so an outage of every provider still
// tries them in the route's order.
func (d *Dispatcher) Pick(rec ledger.Record, route []provider.Adapter) []provider.Adapter {
	c := Candidates(rec, route)
	if len(c) < 2 {
		return c
	}
	healthy := func(p provider.Adapter) bool { return d.Health.Healthy(p.Name()) }
	out := slices.Clone(c)
	slices.SortStableFunc(out, func(a, b provider.Adapter) int {
		switch ha, hb := healthy(a), healthy(b); {
		case ha == hb:
			return 0
		case ha:
			return -1
		}
		return 1
	})
	return out
}

// SendRoute sends e under claim c through route[0], as Send does, and
// fails over: while the attempt provably sent nothing (a transient or
// configuration refusal that released the claim) and route holds another
// provider, it takes the released row over for that provider (the
// takeover records it) and sends again, as long as the invocation leaves
// time for a send. route is a Pick: the row's own provider alone while an
// earlier attempt may have sent. history is the row's History under c
// (nil for a first claim): each failover's takeover adds the refused
// attempt to it. Each send through a provider other than the route's
// first is counted as a failover (Send: Failovers, with the channel and
// both providers), whether this loop, Health (Pick) or an earlier
// release chose it.
func (d *Dispatcher) SendRoute(ctx context.Context, c ledger.Claim, e ledger.Entry, history []string, route []provider.Adapter) Result {
	p := route[0]
	r := d.Send(ctx, c, e, p)
	for _, next := range route[1:] {
		if r.Disposition != Retry || (r.Kind != provider.Transient && r.Kind != provider.Config) || !r.Released {
			return r
		}
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < d.Budgets().Send()+LostAnswerReserve {
			return r
		}
		// The row as this worker's release left it: fenced on its claim.
		cur := ledger.Record{Entry: e, State: ledger.StatePending, ClaimID: c.ClaimID, Attempts: c.Attempt,
			Released: true, AttemptedAt: c.AttemptedAt, LeaseUntil: c.AttemptedAt, Reason: r.Kind.String() + ": " + r.Reason,
			History: history}
		cur.Provider = p.Name()
		// The next provider is tried only while the message is valid
		// (package decide): past its validity the released row ends
		// FAILED (expired) instead.
		if dec := decide.Of(decide.Input{Caller: decide.Sender, Row: cur, Now: d.Now(), Configured: true, Caps: next.Capabilities()}); dec.Action != decide.Send {
			d.Logger.Info("failover: not trying the next provider", "key", e.Key, "to", next.Name(), "why", dec.Reason)
			if dec.Action == decide.Expire {
				return d.Resolve(ctx, cur, dec, nil, provider.LookupResult{}, c.LeaseUntil.Sub(c.AttemptedAt))
			}
			return r
		}
		// The next provider's send token is taken before the takeover.
		if !d.reserve(ctx, next, e.Key) {
			return r
		}
		history = ledger.NextHistory(cur)
		nc, err := d.TakeOver(ctx, cur, next.Name(), c.LeaseUntil.Sub(c.AttemptedAt))
		if err != nil {
			d.Logger.Info("failover: the row changed since the release", "key", e.Key, "error", err)
			return r
		}
		d.Logger.Warn("failing over: the previous provider refused before accepting", "key", e.Key, "channel", e.Channel,
			"from", p.Name(), "to", next.Name(), "reason", r.Reason)
		// The next send fails over from p (failover: Failovers).
		e.Provider = p.Name()
		c, p = nc, next
		r = d.Send(ctx, c, e, p)
		r.Attempt = c.Attempt
	}
	return r
}

// failover reports whether a send of entry e through p is a failover: p
// is not the first provider of e's channel's route (Route). from is the
// provider the message left: e.Provider, the provider of the row's
// latest attempt (the one that refused, for a released row or within
// SendRoute), when it is another; else the route's first (skipped while
// it cools down, or no longer the row's).
func (d *Dispatcher) failover(e ledger.Entry, p provider.Adapter) (from string, ok bool) {
	route := d.Route(e.Channel)
	if len(route) == 0 || route[0] == nil || route[0].Name() == p.Name() {
		return "", false
	}
	if e.Provider != "" && e.Provider != p.Name() {
		return e.Provider, true
	}
	return route[0].Name(), true
}

// Health tracks, per container, the providers that keep failing, so that
// new messages (and rows whose every attempt was released) skip a
// provider in an outage for a cool-down instead of paying a doomed first
// call each. It lives in the process, not in the table: each container
// learns within Threshold failures, which is enough to stop the storm,
// while shared state would cost a write per failure and a read per
// message (the write-unit floor). A provider's failures are refusals
// (transient, configuration) and ambiguous outcomes; any answer (accepted,
// or a recipient's permanent rejection) resets them. After the cool-down
// the provider is tried again, and one more failure starts another.
// Refusals alone (not ambiguous outcomes) make a provider known down
// (Down): the rows due for a send through it are then left as they are
// (decide.Input.ProviderDown), and a release while it is down does not
// grow the row's backoff (decide.RetryDelay). New messages are still
// claimed and sent, and a row is sent again once the cool-down has
// passed: each such send probes the provider.
// The zero Health (and a nil *Health) uses the defaults; it is safe for
// concurrent use.
type Health struct {
	// Threshold is how many failures in a row make a provider skipped;
	// DefaultHealthThreshold when zero.
	Threshold int
	// Cooldown is how long it is skipped; DefaultHealthCooldown when zero.
	Cooldown time.Duration
	// Now is the clock; time.Now when nil.
	Now func() time.Time

	mu    sync.Mutex
	state map[string]*healthState
}

// The defaults of Health.
const (
	DefaultHealthThreshold = 3
	DefaultHealthCooldown  = 30 * time.Second
)

type healthState struct {
	failures int
	until    time.Time
	// refusals counts refusals in a row (transient, configuration:
	// provably nothing sent); downUntil is set from them (Down).
	refusals  int
	downUntil time.Time
	// recorded is the downUntil last told to Dispatcher.Status.
	recorded time.Time
}

func (h *Health) now() time.Time {
	if h.Now != nil {
		return h.Now()
	}
	return time.Now()
}

// Healthy reports whether provider name is not cooling down.
func (h *Health) Healthy(name string) bool {
	if h == nil {
		return true
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	st := h.state[name]
	return st == nil || !h.now().Before(st.until)
}

// Down reports whether provider name is known down: its latest Threshold
// sends in a row or more were refused (transient or configuration errors,
// nothing sent), the latest less than Cooldown ago. Unlike Healthy, an
// ambiguous outcome neither counts nor clears: a provider that answers
// 10 % of its calls with a timeout is not down. A row whose every
// provider is down is not taken over for a send (decide.Input.ProviderDown).
func (h *Health) Down(name string) bool {
	if h == nil {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	st := h.state[name]
	return st != nil && h.now().Before(st.downUntil)
}

// DownUntil returns when provider name stops being known down (Down), the
// zero time when it is not down now.
func (h *Health) DownUntil(name string) time.Time {
	if h == nil {
		return time.Time{}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	st := h.state[name]
	if st == nil || !h.now().Before(st.downUntil) {
		return time.Time{}
	}
	return st.downUntil
}

// Refusing reports whether provider name's latest Threshold sends or
// more in a row were refused: it was known down (Down), whether or not
// the cool-down has passed since. A success clears it: a success while
// Refusing is a recovery.
func (h *Health) Refusing(name string) bool {
	if h == nil {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	st := h.state[name]
	return st != nil && st.refusals >= cmp.Or(h.Threshold, DefaultHealthThreshold)
}

// Up notes that provider name was seen answering again at at (by
// another container: reconcile.Unit.ProviderUp): a down state this
// container learned from refusals before at is forgotten, so its next
// send goes at once rather than after the cool-down. A refusal after at
// is newer news, and stands.
func (h *Health) Up(name string, at time.Time) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	st := h.state[name]
	if st == nil || st.downUntil.IsZero() {
		return
	}
	if last := st.downUntil.Add(-cmp.Or(h.Cooldown, DefaultHealthCooldown)); last.Before(at) {
		*st = healthState{}
	}
}

// downNews returns when provider name stops being known down, when that
// is news for Dispatcher.Status: it is known down, and its down state
// was not recorded yet or has been extended by a cool-down or more since
// (an outage that lasts is recorded again every cool-down, so that the
// record shows it still lasts).
func (h *Health) downNews(name string) (time.Time, bool) {
	if h == nil {
		return time.Time{}, false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	st := h.state[name]
	if st == nil || !h.now().Before(st.downUntil) {
		return time.Time{}, false
	}
	if !st.recorded.IsZero() && st.downUntil.Sub(st.recorded) < cmp.Or(h.Cooldown, DefaultHealthCooldown) {
		return time.Time{}, false
	}
	st.recorded = st.downUntil
	return st.downUntil, true
}

// Record notes the outcome of one call to provider name: ok when it
// answered (accepted, or rejected the message for the recipient's sake).
// It counts toward Healthy only; Observe counts toward Down too.
func (h *Health) Record(name string, ok bool) {
	h.record(name, ok, false)
}

// Observe notes the outcome err of one send to provider name (nil:
// accepted), for Healthy (as Record) and for Down: a transient or
// configuration error is a refusal.
func (h *Health) Observe(name string, err error) {
	k := provider.KindOf(err)
	h.record(name, err == nil || k == provider.Permanent, err != nil && (k == provider.Transient || k == provider.Config))
}

func (h *Health) record(name string, ok, refused bool) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.state == nil {
		h.state = map[string]*healthState{}
	}
	st := h.state[name]
	if st == nil {
		st = &healthState{}
		h.state[name] = st
	}
	if ok {
		*st = healthState{}
		return
	}
	now, threshold, cooldown := h.now(), cmp.Or(h.Threshold, DefaultHealthThreshold), cmp.Or(h.Cooldown, DefaultHealthCooldown)
	st.failures++
	if st.failures >= threshold {
		st.until = now.Add(cooldown)
	}
	if refused {
		st.refusals++
		if st.refusals >= threshold {
			st.downUntil = now.Add(cooldown)
		}
	}
}
