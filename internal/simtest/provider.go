package simtest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sendonce/sendonce/internal/metrics"
	"github.com/sendonce/sendonce/internal/provider"
)

// provClass is a provider's capability class.
type provClass int

const (
	// classDedup drops a repeat that carries the same key.
	classDedup provClass = iota
	// classLookup can be asked, Twilio-style: it lists messages to the
	// recipient created from AttemptedAt minus a minute, matched by body.
	classLookup
	// classPlain can do neither.
	classPlain
)

func (c provClass) String() string {
	return [...]string{"dedup", "lookup", "plain"}[c]
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

// lookupWindow is how much earlier than AttemptedAt a listed message may
// have been created (Twilio's adapter allows a minute of clock skew).
const lookupWindow = time.Minute

// delivery is one message the provider accepted (the ground truth).
type delivery struct {
	key, to, body string
	id            string
	created       time.Time
	// visible is when a lookup starts to list it (Twilio lists a message
	// once it has a date sent).
	visible time.Time
}

// simProvider models one provider by capability. It implements
// provider.Adapter; lookupProvider adds provider.Looker.
type simProvider struct {
	w       *World
	name    string
	channel string
	class   provClass
	skew    time.Duration
	timeout time.Duration
	// storms are 429 storms: every send in [from, until) is throttled.
	storms [][2]time.Time
	byKey  map[string]string // dedup: key → message id
	sent   []delivery
	n      int
}

type lookupProvider struct{ *simProvider }

var (
	_ provider.Adapter = (*simProvider)(nil)
	_ provider.Looker  = lookupProvider{}
)

func (p *simProvider) Name() string { return p.name }

func (p *simProvider) Capabilities() provider.Capabilities {
	return provider.Capabilities{IdempotentSends: p.class == classDedup, LookupByReference: p.class == classLookup}
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
	for _, s := range p.storms {
		if !now.Before(s[0]) && now.Before(s[1]) {
			return provStorm
		}
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

// hang parks the caller until its context's deadline, as a provider that
// never answers does; the call then fails with the deadline.
func (p *simProvider) hang(ctx context.Context, key string) error {
	d, ok := ctx.Deadline()
	if !ok {
		d = time.Now().Add(p.timeout)
	}
	p.w.sleepUntil(ctx, "hang", key, d)
	if err := ctx.Err(); err != nil {
		return err
	}
	return context.DeadlineExceeded
}

func (p *simProvider) Send(ctx context.Context, m provider.Message) (provider.Receipt, error) {
	wk := p.w.yield(ctx, "send", m.Key)
	w := p.w
	w.mu.Lock()
	defer w.mu.Unlock()
	kt := w.truth(m.Key)
	a := w.attempts[w.held[heldKey{wk.id, m.Key}]]
	if a != nil && a.key != m.Key {
		a = nil
	}
	b := p.pick(wk)
	if b != provAccept {
		w.faults[b]++
	}
	accept := func() string {
		if id, ok := p.byKey[m.Key]; ok && p.class == classDedup {
			return id
		}
		p.n++
		id := fmt.Sprintf("%s-%d", p.name, p.n)
		now := w.now().Add(p.skew)
		d := delivery{key: m.Key, to: m.To, body: m.Body, id: id, created: now, visible: now.Add(time.Duration(w.rng.IntN(60)) * time.Second)}
		p.sent = append(p.sent, d)
		p.byKey[m.Key] = id
		kt.deliveries = append(kt.deliveries, delivery{key: m.Key, id: id, created: now})
		if a != nil && a.policyResend {
			kt.policyResends++
		}
		w.scheduleCallbacks(p, d)
		return id
	}
	var (
		rcpt provider.Receipt
		err  error
	)
	switch b {
	case provAccept:
		rcpt.MessageID = accept()
	case provHangAfter:
		accept()
		w.tracef(m.Key, "%s send %s via %s(%s): accepted, then no answer", wk.name, w.short(m.Key), p.name, p.class)
		err = p.perr(provider.Ambiguous, "send", "", "no answer after the request was written: timeout", p.hang(ctx, m.Key))
	case provHangBefore:
		w.tracef(m.Key, "%s send %s via %s(%s): no answer, not accepted", wk.name, w.short(m.Key), p.name, p.class)
		err = p.perr(provider.Ambiguous, "send", "", "no answer after the request was written: timeout", p.hang(ctx, m.Key))
	case provLost:
		accept()
		err = p.perr(provider.Ambiguous, "send", "", "connection reset after the request was written", errors.New("read: connection reset by peer"))
	case prov4xx:
		err = p.perr(provider.Permanent, "send", "400", "invalid recipient", nil)
	case prov5xx:
		err = p.perr(provider.Transient, "send", "503", "service unavailable", nil)
	case prov429, provStorm:
		err = p.perr(provider.Transient, "send", "429", "too many requests", nil)
	case provConfig:
		err = p.perr(provider.Config, "send", "401", "bad credentials", nil)
	}
	if err != nil {
		w.expect(wk.service, metrics.ProviderErrors)
		if provider.KindOf(err) == provider.Ambiguous {
			kt.ambiguous = true
		}
	} else if a != nil {
		a.receipt = true
	}
	w.tracef(m.Key, "%s send %s via %s(%s): %s", wk.name, w.short(m.Key), p.name, p.class, b)
	return rcpt, err
}

func (p lookupProvider) Lookup(ctx context.Context, m provider.Message) (provider.LookupResult, error) {
	wk := p.w.yield(ctx, "lookup", m.Key)
	w := p.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if !wk.calm && !w.calm && w.rng.Float64()/w.sc.intensity < 0.05 {
		w.faults[lookupFail]++
		w.tracef(m.Key, "%s lookup %s: 503", wk.name, w.short(m.Key))
		return provider.LookupResult{}, p.perr(provider.Transient, "lookup", "503", "service unavailable", nil)
	}
	now := w.now().Add(p.skew)
	for _, d := range p.sent {
		if d.to != m.To || d.body != m.Body || now.Before(d.visible) {
			continue
		}
		if !m.AttemptedAt.IsZero() && d.created.Before(m.AttemptedAt.Add(-lookupWindow)) {
			continue
		}
		w.tracef(m.Key, "%s lookup %s from %s: accepted", wk.name, w.short(m.Key), w.at(m.AttemptedAt))
		return provider.LookupResult{Status: provider.LookupAccepted, MessageID: d.id}, nil
	}
	w.tracef(m.Key, "%s lookup %s from %s: not found", wk.name, w.short(m.Key), w.at(m.AttemptedAt))
	return provider.LookupResult{Status: provider.LookupNotFound}, nil
}
