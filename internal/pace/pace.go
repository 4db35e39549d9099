// Package pace keeps each provider's sends under a configured rate shared
// by every sender and reconcile worker, in every container, and slows a
// route down when its provider pushes back.
//
// How the rate is shared: each second of each provider has a counter
// (Store; in production one DynamoDB item, pk "pace#<provider>#<unix
// second>", with a TTL). A container does not write the counter per send:
// it takes a block of tokens (Block, default 10) with one conditional
// UpdateItem (ADD n while the count stays within the limit) and spends
// them locally during that second. So:
//   - the limit holds across containers: the counter never grants more
//     than the limit of a second, whoever asks;
//   - the write cost is one write unit per Block sends (0.1 per message at
//     the default), not one per send;
//   - each second is its own item, so its partition takes at most
//     limit/Block writes a second (150 at 1,500/s), far below a
//     partition's 1,000;
//   - the price is that tokens a container took and did not spend in its
//     second are lost: at most Block per active container per second.
//
// Rejected alternatives: a per-container limiter of limit/N under the SQS
// event sources' MaximumConcurrency (no writes at all) holds the limit only
// if every container is busy at once and wastes the rest when few are; a
// token-bucket item written per send costs a write unit per message and
// meets a partition's 1,000 writes a second at a 1,000/s rate.
//
// How the route slows down: each container keeps a factor in (0, 1] of the
// configured rate (AIMD). A throttling answer (HTTP 429, Twilio 20429, SNS
// Throttling) halves it, and a Retry-After pauses the provider until then;
// a failure that shows the provider down (transient or ambiguous) lowers
// it to the floor, so a recovering provider is met by a ramp, not the
// whole backlog: every second with a success doubles the factor (slow
// start, as TCP's: from the floor, 5 %, to 10, 20, 40, 80 and 100 % of
// the rate, full rate 5 s after recovery, the ramp costing about 3.5 s of
// the provider's capacity). After a throttling answer the factor rises by
// Ramp a second instead (default 1/20 of the rate): a provider that said
// it was overloaded is not doubled back into it.
//
// Why doubling after an outage: a ramp of Ramp a second from the floor
// took 20 s and cost 9.5 s of the provider's capacity, at 15,000/s
// more than the whole margin of the drain (make sim-outage, docs/scale.md
// "Issue 34, fourth part"). A provider still too weak for the doubled
// rate answers with refusals, timeouts or 429s, and the factor falls back
// to the floor or halves within the second.
package pace

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sendonce/sendonce/provider"
)

// Store grants the tokens of a provider's second.
type Store interface {
	// Take asks for n tokens of provider's second sec (Unix seconds), of
	// which at most limit are granted in all; it returns how many were
	// granted (0 to n).
	Take(ctx context.Context, provider string, sec int64, n, limit int) (int, error)
}

// Pauser is a Store that can pause a provider for every container: it
// spends the whole limit of each second in [from, to) (Unix seconds), so
// that no container's Take is granted a token of them. Both stores of
// this package implement it; a Store that does not pauses only the
// container that saw the Retry-After.
//
// What it costs: one write per paused second (a Retry-After is cut to
// retryafter.Max, 300 writes at most), made by a container only when the
// Retry-After extends its own pause: at most once per Retry-After answer
// per container.
type Pauser interface {
	Pause(ctx context.Context, provider string, from, to int64, limit int) error
}

// Defaults of Limiter.
const (
	DefaultBlock = 10
	DefaultFloor = 0.05
	DefaultRamp  = 0.05
)

// Limiter paces sends per provider. The zero value is not usable: New.
type Limiter struct {
	store  Store
	now    func() time.Time
	limits map[string]int
	block  int
	floor  float64
	ramp   float64
	// onPause is Options.OnPause.
	onPause func(ctx context.Context, provider string, until time.Time)

	mu    sync.Mutex
	state map[string]*route
}

type route struct {
	sec   int64 // the second tokens are held for
	spent int   // tokens spent in sec
	// The tokens of sec held here: full, taken with the whole limit;
	// yielded, taken by yielding sends with the limit less a hold.
	full, yielded pool
	// The provider's hold: as last read (or written here), when, and
	// as last written by this container.
	hold       Hold
	holdReadAt time.Time
	holdWrote  Hold
	factor     float64
	slowStart  bool      // factor doubles a second (after an outage), not +ramp
	pause      time.Time // no sends before
	raisedAt   int64     // the second factor was last raised in
	// Outcomes of the second outcomesAt: failures that outnumber successes
	// (3 at least) show the provider down.
	outcomesAt int64
	ok, bad    int
	refused    int // of bad: transient refusals
}

// Options configures New; zero fields take the defaults.
type Options struct {
	// Block is the number of tokens taken per Store write.
	Block int
	// Floor is the lowest factor of the rate a route is slowed to.
	Floor float64
	// Ramp is what each second with a success adds to the factor after
	// a throttling answer (after an outage it doubles: the package doc).
	Ramp float64
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// OnPause, when set, is told each pause a Retry-After extended in
	// this container (package opstate records it for `sendonce
	// status`), on a context of its own that lasts a second.
	OnPause func(ctx context.Context, provider string, until time.Time)
}

// New returns a Limiter of limits (sends a second per provider name; a
// provider not in limits is not paced) over store.
func New(store Store, limits map[string]int, o Options) (*Limiter, error) {
	for p, n := range limits {
		if n <= 0 {
			return nil, fmt.Errorf("pace: provider %s: rate %d: must be positive", p, n)
		}
	}
	if store == nil && len(limits) > 0 {
		return nil, errors.New("pace: a store is required")
	}
	if o.Block < 0 || o.Floor < 0 || o.Floor > 1 || o.Ramp < 0 {
		return nil, errors.New("pace: block, floor and ramp must not be negative (floor at most 1)")
	}
	l := &Limiter{store: store, now: o.Now, limits: limits, block: o.Block, floor: o.Floor, ramp: o.Ramp, state: map[string]*route{}, onPause: o.OnPause}
	if l.now == nil {
		l.now = time.Now
	}
	if l.block == 0 {
		l.block = DefaultBlock
	}
	if l.floor == 0 {
		l.floor = DefaultFloor
	}
	if l.ramp == 0 {
		l.ramp = DefaultRamp
	}
	return l, nil
}

// ParseRates reads "provider=rate,provider=rate" (sends a second), e.g.
// "twilio=100,http=1500"; the empty string yields none.
func ParseRates(s string) (map[string]int, error) {
	out := map[string]int{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, rate, ok := strings.Cut(part, "=")
		n, err := strconv.Atoi(strings.TrimSpace(rate))
		if !ok || strings.TrimSpace(name) == "" || err != nil || n <= 0 {
			return nil, fmt.Errorf("pace: rate %q: want provider=sends-per-second (a positive integer)", part)
		}
		out[strings.TrimSpace(name)] = n
	}
	return out, nil
}

// Limit returns provider's configured rate and whether it is paced.
func (l *Limiter) Limit(provider string) (int, bool) {
	n, ok := l.limits[provider]
	return n, ok
}

// pool is the tokens of a route's second taken from the shared counter
// with one limit.
type pool struct {
	have int  // tokens held, not yet spent
	dry  bool // the store has no tokens left for the second under this limit
}

// Acquire takes one send token of provider. It returns 0 and nil when the
// send may go, or how long until the next try may succeed (the next
// second, or the end of a Retry-After pause).
func (l *Limiter) Acquire(ctx context.Context, provider string) (time.Duration, error) {
	limit, ok := l.limits[provider]
	if !ok {
		return 0, nil
	}
	return l.take(ctx, provider, limit, false)
}

// at moves r to second sec: what it held of the second before is lost.
func (r *route) at(sec int64) {
	if r.sec != sec {
		r.sec, r.spent, r.full, r.yielded = sec, 0, pool{}, pool{}
	}
}

// AcquireOrdered is Acquire for a send whose place in the earliest
// deadline first order is o: while the provider's hold (Hold) is active,
// the send yields, taking only what the limit less the held rate leaves
// in the shared counter, when o comes after the hold's cut, or when o was
// enqueued since the hold's Backlog; unless o's deadline is within
// Urgent (the package doc, "Earliest deadline first" and "The backlog
// first after an outage"). Otherwise it is Acquire.
func (l *Limiter) AcquireOrdered(ctx context.Context, provider string, o Order) (time.Duration, error) {
	limit, ok := l.limits[provider]
	if !ok {
		return 0, nil
	}
	now := l.now()
	if h := l.currentHold(ctx, provider); h.Active(now) && h.yields(o, now) {
		return l.take(ctx, provider, limit-min(h.Rate, limit), true)
	}
	return l.take(ctx, provider, limit, false)
}

// take is Acquire and AcquireOrdered: one token of provider's current
// second, spent from what this container holds, or taken in a block
// from the shared counter with limit (the whole limit; the limit less a
// hold when yield). A send that takes with the whole limit may spend a
// token a yielding send took; a yielding send spends only its own.
func (l *Limiter) take(ctx context.Context, provider string, limit int, yield bool) (time.Duration, error) {
	now := l.now()
	sec := now.Unix()
	next := time.Unix(sec+1, 0).Sub(now)
	l.mu.Lock()
	r := l.route(provider)
	if now.Before(r.pause) {
		l.mu.Unlock()
		return r.pause.Sub(now), nil
	}
	r.at(sec)
	own, spendable := &r.full, []*pool{&r.full, &r.yielded}
	share := max(1, int(float64(limit)*r.factor))
	if yield {
		own, spendable = &r.yielded, []*pool{&r.yielded}
		share = int(float64(limit) * r.factor)
	}
	held := 0
	for _, p := range spendable {
		held += p.have
	}
	if r.spent >= share || held == 0 && own.dry {
		l.mu.Unlock()
		return next, nil
	}
	if held > 0 {
		for _, p := range spendable {
			if p.have > 0 {
				p.have--
				break
			}
		}
		r.spent++
		l.mu.Unlock()
		return 0, nil
	}
	want := min(l.block, share-r.spent)
	l.mu.Unlock()
	// The store call is made outside the lock; tokens granted for a second
	// that has passed meanwhile are spent at once or lost.
	got, err := l.store.Take(ctx, provider, sec, want, limit)
	if err != nil {
		return 0, fmt.Errorf("pace: take %d tokens of %s: %w", want, provider, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if r.sec == sec && got < want {
		own.dry = true // every container's share of sec under limit is taken
	}
	if got == 0 {
		return next, nil
	}
	if r.sec == sec {
		own.have += got - 1
		r.spent++
	}
	return 0, nil
}

// Hold records that the reconcile workers hold h of provider's rate
// (the package doc, "Earliest deadline first"): in this container at
// once, and for every container through the store (Holds) when h
// extends what this container last wrote by HoldRefresh or more, or
// changes its rate or cut.
func (l *Limiter) Hold(ctx context.Context, provider string, h Hold) error {
	if _, ok := l.limits[provider]; !ok {
		return nil
	}
	l.mu.Lock()
	r := l.route(provider)
	r.hold, r.holdReadAt = h, l.now()
	w := r.holdWrote
	write := h.Rate != w.Rate || h.Cut != w.Cut || !h.Backlog.Equal(w.Backlog) || h.Until.Sub(w.Until) >= HoldRefresh
	if write {
		r.holdWrote = h
	}
	l.mu.Unlock()
	hs, ok := l.store.(Holds)
	if !write || !ok {
		return nil
	}
	if err := hs.PutHold(ctx, provider, h); err != nil {
		l.mu.Lock()
		r.holdWrote = Hold{}
		l.mu.Unlock()
		return err
	}
	return nil
}

// currentHold returns provider's hold, read from the store at most once
// every HoldRefresh; a read that fails is no hold (nothing yields).
func (l *Limiter) currentHold(ctx context.Context, provider string) Hold {
	now := l.now()
	l.mu.Lock()
	r := l.route(provider)
	if !r.holdReadAt.IsZero() && now.Sub(r.holdReadAt) < HoldRefresh {
		h := r.hold
		l.mu.Unlock()
		return h
	}
	r.holdReadAt = now
	l.mu.Unlock()
	hs, ok := l.store.(Holds)
	if !ok {
		return Hold{}
	}
	h, err := hs.GetHold(ctx, provider)
	if err != nil {
		return Hold{}
	}
	l.mu.Lock()
	r.hold = h
	l.mu.Unlock()
	return h
}

func (l *Limiter) route(provider string) *route {
	r := l.state[provider]
	if r == nil {
		r = &route{factor: 1}
		l.state[provider] = r
	}
	return r
}

// RetryAfterer is an error that carries a provider's Retry-After.
type RetryAfterer interface {
	RetryAfter() time.Duration
}

// throttleCodes are the provider codes that mean "too many requests".
var throttleCodes = map[string]bool{"429": true, "20429": true, "Throttling": true, "ThrottlingException": true, "TooManyRequestsException": true, "421": true}

// Observe adjusts provider's pace to the outcome of a send: err nil raises
// the factor (once a second), a throttling answer halves it, an error
// whose chain holds a Retry-After (RetryAfterer) pauses the provider until
// then, in this container at once and in every container through the
// store (Pauser), and transient or ambiguous failures that outnumber a
// second's successes (the provider is down) set it to the floor.
func (l *Limiter) Observe(name string, err error) {
	l.observe(context.Background(), name, err)
}

func (l *Limiter) observe(ctx context.Context, name string, err error) {
	limit, ok := l.limits[name]
	if !ok {
		return
	}
	now := l.now()
	if until, ok := l.adjust(name, now, err); ok {
		// The send's context may be ending: the pause is written
		// within a second of its own.
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		if p, ok := l.store.(Pauser); ok {
			to := until.Unix()
			if until.After(time.Unix(to, 0)) {
				to++
			}
			_ = p.Pause(pctx, name, now.Unix(), to, limit)
		}
		if l.onPause != nil {
			l.onPause(pctx, name, until)
		}
	}
}

// adjust is Observe's change of the route's state; it returns the end of
// a pause that a Retry-After extended (ok false when none did).
func (l *Limiter) adjust(name string, now time.Time, err error) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.route(name)
	if sec := now.Unix(); sec != r.outcomesAt {
		// The second that ended is judged whole: timeouts that
		// outnumbered its successes are an outage.
		if r.bad >= 3 && r.bad > r.ok {
			r.factor, r.slowStart = l.floor, true
		}
		r.outcomesAt, r.ok, r.bad, r.refused = sec, 0, 0, 0
	}
	if err == nil {
		r.ok++
		if sec := now.Unix(); sec != r.raisedAt && r.factor < 1 {
			r.raisedAt = sec
			if r.slowStart {
				r.factor = min(1, 2*r.factor)
			} else {
				r.factor = min(1, r.factor+l.ramp)
			}
		}
		return time.Time{}, false
	}
	var (
		ra       RetryAfterer
		extended bool
	)
	if errors.As(err, &ra) && ra.RetryAfter() > 0 {
		if until := now.Add(ra.RetryAfter()); until.After(r.pause) {
			r.pause, extended = until, true
		}
	}
	var pe *provider.Error
	switch {
	case errors.As(err, &pe) && throttleCodes[pe.Code]:
		r.factor, r.slowStart = max(l.floor, r.factor/2), false
	case errors.As(err, &pe) && pe.Code == PacedCode:
		// our own refusal says nothing about the provider
	case errors.As(err, &pe) && (pe.Kind == provider.Transient || pe.Kind == provider.Ambiguous) || errors.Is(err, context.DeadlineExceeded):
		// A few timeouts among successes are noise; failures that
		// outnumber them over a whole second are an outage (judged when
		// the second is over, above: before, the first three calls of
		// a second, timed out by chance, were enough, and a provider
		// answering 10 % of its calls with a timeout was slowed to the
		// floor every few minutes). Refusals with no success yet in the
		// second are an outage at once: a provider that is down refuses
		// everything.
		r.bad++
		if pe != nil && pe.Kind == provider.Transient {
			r.refused++
		}
		if r.refused >= 3 && r.ok == 0 {
			r.factor, r.slowStart = l.floor, true
		}
	}
	return r.pause, extended
}

// Factor returns provider's current factor of its rate (1 when unpaced).
func (l *Limiter) Factor(provider string) float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r := l.state[provider]; r != nil {
		return r.factor
	}
	return 1
}
