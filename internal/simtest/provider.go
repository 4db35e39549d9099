package simtest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/sendonce/sendonce/internal/metrics"
	"github.com/sendonce/sendonce/provider"
)

// provClass is a provider's capability class.
type provClass int

const (
	// classDedup drops a repeat that carries the same key.
	classDedup provClass = iota
	// classRef can be asked about a message by its key (a reference the
	// provider stores).
	classRef
	// classTwilio is the real Twilio adapter (package twilio) over a
	// simulated Twilio API: no key, looked up by content (recipient, text,
	// sender) in the message list.
	classTwilio
	// classPlain can do neither.
	classPlain
)

func (c provClass) String() string {
	return [...]string{"dedup", "ref", "twilio", "plain"}[c]
}

// Provider faults.
const (
	provAccept     = "accept"
	provHangAfter  = "provider_hang_after_accept"
	provHangBefore = "provider_hang_before_accept"
	provLost       = "provider_answer_lost"
	prov4xx        = "provider_4xx"
	prov5xx        = "provider_5xx"
	prov429        = "provider_429"
	provConfig     = "provider_config"
	provStorm      = "provider_429_storm"
	lookupFail     = "lookup_failed"
)

// delivery is one message a provider holds: one it accepted (the ground
// truth), or, at the Twilio API, other traffic to the same number.
type delivery struct {
	key, to, body string
	id            string
	created       time.Time
	// visible is when a lookup starts to list it (Twilio lists a message
	// once it has a date sent).
	visible time.Time
	// failAt, when set, is when the carrier failed the message after the
	// provider accepted it (undelivered): a lookup then finds it rejected.
	failAt time.Time
}

func (d *delivery) failedAt(t time.Time) bool { return !d.failAt.IsZero() && !t.Before(d.failAt) }

// simProvider models one provider by capability. It implements
// provider.Adapter; refProvider adds provider.Looker; the Twilio class is
// the real adapter over twilioAPI.
type simProvider struct {
	w     *World
	name  string
	class provClass
	skew  time.Duration
	// storm is a 429 storm: every send in [from, until) is throttled.
	storm [2]time.Time
	sent  []*delivery
	n     int
	tw    *twilioAPI
	ad    provider.Adapter
}

type refProvider struct{ *simProvider }

var _ provider.Looker = refProvider{}

func (w *World) newProvider(name string, c provClass) *simProvider {
	p := &simProvider{w: w, name: name, class: c,
		skew: time.Duration(w.rng.Int64N(int64(2*maxSkew))) - maxSkew}
	if w.rng.IntN(10) < 3 {
		from := w.t0.Add(time.Duration(w.rng.Int64N(int64(10 * time.Minute))))
		length := time.Duration(float64(10*time.Second) * float64(uint(1)<<w.rng.IntN(8)) * (1 + w.rng.Float64()))
		p.storm = [2]time.Time{from, from.Add(length)}
		w.faults["provider_429_storm_windows"]++
	}
	switch c {
	case classTwilio:
		p.tw = w.newTwilioAPI(p)
		p.ad = p.tw.adapter()
	case classRef:
		p.ad = refProvider{p}
	default:
		p.ad = p
	}
	return p
}

func (p *simProvider) Name() string { return p.name }

func (p *simProvider) String() string { return p.name }

func (p *simProvider) Capabilities() provider.Capabilities {
	return provider.Capabilities{IdempotentSends: p.class == classDedup, LookupByReference: p.class == classRef}
}

func (p *simProvider) perr(kind provider.Kind, op, code, reason string, err error) error {
	return &provider.Error{Kind: kind, Provider: p.name, Op: op, Code: code, Reason: reason, Err: err}
}

// pick chooses what the provider does with one send.
func (p *simProvider) pick(wk *worker) string {
	w := p.w
	now := w.now()
	if wk.calm || w.calm {
		return provAccept
	}
	if !now.Before(p.storm[0]) && now.Before(p.storm[1]) {
		return provStorm
	}
	x := w.rng.Float64() / w.sc.intensity
	switch {
	case x < 0.05:
		return provHangAfter
	case x < 0.09:
		return provHangBefore
	case x < 0.14:
		return provLost
	case x < 0.16:
		return prov4xx
	case x < 0.21:
		return prov5xx
	case x < 0.24:
		return prov429
	case x < 0.25:
		return provConfig
	}
	return provAccept
}

// hang parks the caller, which holds w.mu, until its context's deadline,
// as a provider that never answers does; the call then fails with the
// deadline. The park releases w.mu; a goroutine told to exit meanwhile
// exits without it.
func (p *simProvider) hang(ctx context.Context, key string) error {
	d, _ := ctx.Deadline() // the dispatcher's provider timeout
	p.w.mu.Unlock()
	p.w.yieldUntil(ctx, "hang", key, d)
	p.w.mu.Lock()
	return cmp.Or(ctx.Err(), context.DeadlineExceeded)
}

// accept records that p accepted key's message (to, body): the ground
// truth of deliveries, the carrier's fate and the status callbacks. It
// returns the message id; a provider that drops repeats answers a repeat
// with the first id and delivers nothing. w.mu is held.
func (p *simProvider) accept(wk *worker, key, to, body string) string {
	w := p.w
	if i := slices.IndexFunc(p.sent, func(d *delivery) bool { return d.key == key }); i >= 0 && p.class == classDedup {
		return p.sent[i].id
	}
	kt := w.truth(key)
	a := w.heldAttempt(wk, key)
	p.n++
	id := fmt.Sprintf("%s-%d", p.name, p.n)
	if p.tw != nil {
		id = p.tw.sid(p.n)
	}
	now := w.now().Add(p.skew)
	// It is listed up to the smallest settle time any function of the seed
	// uses, less the clocks' error, after it was accepted: a "no record"
	// answer trusted after the settle time is true.
	lag := time.Duration(w.rng.Int64N(int64(w.sc.lagMax) + 1))
	d := &delivery{key: key, to: to, body: body, id: id, created: now, visible: now.Add(lag)}
	if w.rng.Float64() < w.sc.carrierFailure {
		d.failAt = d.visible.Add(time.Duration(w.rng.IntN(30)) * time.Second)
	}
	p.sent = append(p.sent, d)
	kt.deliveries = append(kt.deliveries, delivery{key: key, id: id, created: now})
	kt.deliveredBy = append(kt.deliveredBy, p.name)
	if a != nil && a.chain != 0 {
		kt.chains[a.chain] = true
	}
	w.scheduleCallbacks(p, d)
	return id
}

// call runs one send of key's message (to, body) through p: a yield
// point, then, under w.mu (the caller unlocks it), the send's checks, what
// p does (pick), the ground truth and the expected counts. A send that may
// have reached p is noted before the call may hang (its worker may die
// there); so is a 5xx where p takes no key (Twilio), half of which come
// after it took the message. It returns what p did, the message id if p
// took it, and the error of a call that got no answer.
func (p *simProvider) call(ctx context.Context, key, to, body string) (b, id string, err error) {
	w := p.w
	w.mu.Lock()
	w.expectFailover(workerOf(ctx), p, key)
	w.mu.Unlock()
	wk := w.yield(ctx, "send", key)
	w.mu.Lock()
	kt := w.truth(key)
	w.checkSend(p, key, body)
	a := w.heldAttempt(wk, key)
	b = p.pick(wk)
	if b != provAccept {
		w.faults[b]++
	}
	twilio5xx := b == prov5xx && p.tw != nil
	accepted := b == provAccept || b == provHangAfter || b == provLost
	if accepted || b == provHangBefore || twilio5xx {
		kt.reached[p.name] = true
	}
	if accepted || twilio5xx && w.rng.IntN(2) == 0 {
		id = p.accept(wk, key, to, body)
	}
	switch b {
	case provHangAfter, provHangBefore:
		w.tracef(key, "%s send %s via %s: %s, no answer yet", wk.name, w.short(key), p.name, b)
		err = p.hang(ctx, key)
	case provLost:
		err = errors.New("read tcp 10.0.0.1:443: connection reset by peer")
	case prov4xx:
		kt.refused = true
	}
	if b != provAccept {
		w.expect(wk.service, metrics.ProviderErrors)
		kt.ambiguous = kt.ambiguous || err != nil || twilio5xx
	} else if a != nil {
		a.receipt = true
	}
	w.tracef(key, "%s send %s via %s: %s", wk.name, w.short(key), p.name, b)
	return b, id, err
}

// expectFailover expects a Failovers of worker wk's service when its
// send of key through p goes through a provider other than the first of
// the channel's route in wk's deployment: the dispatcher counts every
// such send just before the call, so it is expected before the call's
// first yield. w.mu is held.
func (w *World) expectFailover(wk *worker, p *simProvider, key string) {
	kt := w.keys[key]
	if wk == nil || wk.dep == nil || kt == nil || kt.msg == nil {
		return
	}
	if r := w.route(wk.dep, string(kt.msg.req.Channel)); r[0] != p {
		w.expect(wk.service, metrics.Failovers)
		w.faults["failover_sends"]++
	}
}

// refusals are a provider's answers to the sends it refuses: the kind of
// error a provider of a class other than Twilio returns, the HTTP status,
// and Twilio's error code and message.
var refusals = map[string]struct {
	kind         provider.Kind
	status, code int
	message      string
}{
	prov4xx:    {provider.Permanent, 400, 21211, "The 'To' number is not a valid phone number."},
	prov5xx:    {provider.Transient, 503, 20503, "Service Unavailable"},
	prov429:    {provider.Transient, 429, 20429, "Too Many Requests"},
	provStorm:  {provider.Transient, 429, 20429, "Too Many Requests"},
	provConfig: {provider.Config, 401, 20003, "Authenticate"},
}

// heldAttempt is the attempt worker wk holds on key, or nil. w.mu is held.
func (w *World) heldAttempt(wk *worker, key string) *attempt {
	return w.attempts[w.held[heldKey{wk.id, key}]]
}

func (p *simProvider) Send(ctx context.Context, m provider.Message) (provider.Receipt, error) {
	b, id, err := p.call(ctx, m.Key, m.To, m.Body)
	defer p.w.mu.Unlock()
	switch r := refusals[b]; {
	case err != nil:
		return provider.Receipt{}, p.perr(provider.Ambiguous, "send", "", "no answer after the request was written", err)
	case b != provAccept:
		return provider.Receipt{}, p.perr(r.kind, "send", strconv.Itoa(r.status), r.message, nil)
	}
	return provider.Receipt{MessageID: id}, nil
}

// Lookup answers by the message's key: the provider stores it as the
// message's reference. A message is listed only some time after it was
// accepted (up to the seed's smallest settle time).
func (p refProvider) Lookup(ctx context.Context, m provider.Message) (provider.LookupResult, error) {
	wk := p.w.yield(ctx, "lookup", m.Key)
	w := p.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if !wk.calm && !w.calm && w.rng.Float64()/w.sc.intensity < 0.05 {
		w.faults[lookupFail]++
		w.tracef(m.Key, "%s lookup %s via %s: 503", wk.name, w.short(m.Key), p.name)
		return provider.LookupResult{}, p.perr(provider.Transient, "lookup", "503", "service unavailable", nil)
	}
	now := w.now().Add(p.skew)
	res := provider.LookupResult{Status: provider.LookupNotFound}
	for _, d := range p.sent {
		if d.key != m.Key || now.Before(d.visible) {
			continue
		}
		if d.failedAt(now) {
			res = provider.LookupResult{Status: provider.LookupRejected, MessageID: d.id, Reason: "undelivered"}
			continue
		}
		res = provider.LookupResult{Status: provider.LookupAccepted, MessageID: d.id}
		break
	}
	w.lastLookup[heldKey{wk.id, m.Key}] = res.Status // for policyResend
	w.tracef(m.Key, "%s lookup %s via %s: %s %s", wk.name, w.short(m.Key), p.name, res.Status, res.MessageID)
	return res, nil
}
