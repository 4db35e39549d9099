package simtest

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/sendonce/sendonce/internal/decide"
	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/provider"
)

// settles are ReconcileSettleSeconds values the simulation draws (the
// template allows any positive number; the default is 2 minutes).
var settles = []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute}

// Functions of the stack that the simulation runs, by resource name.
const (
	senderFn     = "SenderFunction"
	reconcilerFn = "ReconcilerFunction"
)

// deployment is what one deploy of the stack configures: its parameter
// values, which provider serves each channel, and what each function
// reads from them (stack.config). A redeploy reaches each function at its
// own time, and an invocation already running keeps the settings it
// started with, as a Lambda container does: for a while the functions
// run with different settings.
type deployment struct {
	n      int
	params map[string]string
	// pick is the index into World.chans[channel] of the provider that
	// serves the channel; fallback says whether the channel's route holds
	// its other provider after it (SENDONCE_SMS_PROVIDER=twilio,http).
	pick     map[string]int
	fallback map[string]bool
	fn       map[string]fnConfig
}

func (d *deployment) String() string {
	s, r := d.fn[senderFn], d.fn[reconcilerFn]
	return fmt.Sprintf("deployment %d: sender claim %s settle %s timeout %s; reconciler claim %s settle %s",
		d.n, s.ClaimTimeout, s.Settle, s.timeout, r.ClaimTimeout, r.Settle)
}

// drawSettings draws the queue's settings and every deployment's
// parameters from the values the template allows, under the invariants
// it states: visibility ≥ 6 × sender timeout; claim ≥ 2 × provider
// timeout + 5 s; (MaxReceiveCount − 1) × visibility ≥ claim + sender
// timeout, so that a message whose first claim's worker died is received
// again after the claim's lease, before it is dead-lettered. Each
// deployment's settle time is the seed's base or the next larger, and the
// providers list a message up to the base less 3 s of clock error after
// they accepted it: a function that trusts "no record" sooner than its
// configured settle is wrong. Each function reads its settings from its
// environment under those parameters (stack.config).
func (w *World) drawSettings(redeploys int) {
	r := w.rng
	st := loadStack()
	sc := &w.sc
	pick := func(ds []time.Duration) time.Duration { return ds[r.IntN(len(ds))] }
	vis := st.allowed("QueueVisibilityTimeoutSeconds", func(v time.Duration) bool { return v <= 30*time.Minute })
	sc.visibility = min(pick(vis), pick(vis)) // long ones less often: they make long runs
	timeouts := st.allowed("SenderTimeoutSeconds", func(t time.Duration) bool { return 6*t <= sc.visibility })
	claims := st.allowed("ClaimTimeoutSeconds", func(c time.Duration) bool { return c >= decide.TakeOverBudget(providerTimeout) })
	base := r.IntN(len(settles))
	secs := func(d time.Duration) string { return strconv.Itoa(int(d / time.Second)) }
	need := time.Duration(0)
	for i := range redeploys + 1 {
		params := st.t.Defaults()
		params["ProviderTimeoutSeconds"] = secs(providerTimeout)
		params["QueueVisibilityTimeoutSeconds"] = secs(sc.visibility)
		params["SenderTimeoutSeconds"] = secs(pick(timeouts))
		params["ClaimTimeoutSeconds"] = secs(pick(claims))
		params["ReconcileSettleSeconds"] = secs(settles[min(base+r.IntN(2), len(settles)-1)])
		claim, _ := strconv.Atoi(params["ClaimTimeoutSeconds"])
		timeout, _ := strconv.Atoi(params["SenderTimeoutSeconds"])
		need = max(need, time.Duration(claim+timeout)*time.Second)
		sc.deps = append(sc.deps, deployment{n: i, params: params, pick: map[string]int{}, fallback: map[string]bool{}})
	}
	sc.maxReceive = max(2, int((need+sc.visibility-1)/sc.visibility)+1+r.IntN(3))
	for i := range sc.deps {
		d := &sc.deps[i]
		d.params["MaxReceiveCount"] = strconv.Itoa(sc.maxReceive)
		d.fn = map[string]fnConfig{senderFn: st.config(senderFn, d.params), reconcilerFn: st.config(reconcilerFn, d.params)}
	}
	sc.lagMax = settles[base] - 3*time.Second
}

// drawProviders draws each channel's providers: a primary one and, in
// some seeds, an alternate one that redeploys switch to and back from.
// SMS may be served by Twilio (the real adapter over a simulated API,
// looked up by content); every channel by a provider that drops repeats,
// one that is looked up by reference, or a plain one.
func (w *World) drawProviders() {
	r := w.rng
	w.chans = map[string][]*simProvider{}
	w.byName = map[string]*simProvider{}
	for _, ch := range channels {
		classes := []provClass{classDedup, classRef, classPlain}
		if ch == "sms" {
			classes = append(classes, classTwilio, classTwilio)
		}
		n := 1
		if r.IntN(10) < 4 {
			n = 2
		}
		for i := range n {
			c := classes[r.IntN(len(classes))]
			if i == 1 && c == classTwilio && w.chans[ch][0].class == classTwilio {
				c = classPlain // one Twilio account per channel
			}
			name := ch + "-" + c.String()
			if c == classTwilio {
				name = "twilio"
			}
			if _, dup := w.byName[name]; dup {
				name += "-2"
			}
			p := w.newProvider(name, c)
			w.chans[ch] = append(w.chans[ch], p)
			w.byName[name] = p
		}
	}
}

// scheduleRedeploys turns the drawn deployments into events: each
// redeploy switches some channels that have an alternate provider (a
// later one may switch them back) and sets its parameters; it reaches the
// sender and the reconciler at times up to two minutes apart, in either
// order.
func (w *World) scheduleRedeploys() {
	r := w.rng
	deps := w.sc.deps
	for _, ch := range channels {
		deps[0].fallback[ch] = len(w.chans[ch]) > 1 && r.IntN(10) < 3
	}
	for i := 1; i < len(deps); i++ {
		d := &deps[i]
		for _, ch := range channels {
			d.pick[ch] = deps[i-1].pick[ch]
			d.fallback[ch] = deps[i-1].fallback[ch]
			if len(w.chans[ch]) > 1 && r.IntN(10) < 6 {
				d.pick[ch] = 1 - d.pick[ch]
			}
			if len(w.chans[ch]) > 1 && r.IntN(10) < 3 {
				d.fallback[ch] = !d.fallback[ch]
			}
		}
		at := w.t0.Add(30*time.Second + time.Duration(r.Int64N(int64(15*time.Minute))))
		lag := time.Duration(r.Int64N(int64(2 * time.Minute)))
		first, second := senderFn, reconcilerFn
		if r.IntN(2) == 0 {
			first, second = second, first
		}
		w.addEvent(at, func() { w.redeploy(d, first, "") })
		w.addEvent(at.Add(lag), func() { w.redeploy(d, second, "") })
	}
	w.dep = map[string]*deployment{senderFn: &deps[0], reconcilerFn: &deps[0]}
}

// redeploy makes fn run deployment d from now on. Its faults are counted
// with prefix ("drain_" for the drain's).
func (w *World) redeploy(d *deployment, fn, prefix string) {
	cur := w.dep[fn]
	if d.n <= cur.n {
		return // a later deploy came first: an older one never overwrites it
	}
	var switched []string
	for _, ch := range channels {
		if d.pick[ch] != cur.pick[ch] || d.fallback[ch] != cur.fallback[ch] {
			switched = append(switched, fmt.Sprintf("%s %v→%v", ch, w.route(cur, ch), w.route(d, ch)))
		}
	}
	w.dep[fn] = d
	w.faults[prefix+"redeploys"]++
	w.faults[prefix+"provider_switches"] += len(switched)
	w.tracef("", "%s redeployed: %s; providers switched: %v", fn, d, switched)
}

// providers are the adapters of deployment d, as a function built from it
// gets them: each channel's provider, and the fallbacks of the channels
// whose route has one.
func (w *World) providers(d *deployment) (map[string]provider.Adapter, map[string][]provider.Adapter) {
	out, fallbacks := map[string]provider.Adapter{}, map[string][]provider.Adapter{}
	for _, ch := range channels {
		r := w.route(d, ch)
		out[ch] = r[0].ad
		if len(r) > 1 {
			fallbacks[ch] = []provider.Adapter{r[1].ad}
		}
	}
	return out, fallbacks
}

// route is channel ch's route under d: the provider that serves it, then
// its fallback if it has one.
func (w *World) route(d *deployment, ch string) []*simProvider {
	r := []*simProvider{w.chans[ch][d.pick[ch]]}
	if d.fallback[ch] {
		r = append(r, w.chans[ch][1-d.pick[ch]])
	}
	return r
}

// serves reports whether d's route for channel ch holds the provider
// named name.
func (w *World) serves(d *deployment, ch, name string) bool {
	return slices.ContainsFunc(w.route(d, ch), func(p *simProvider) bool { return p.name == name })
}

// senderRepeats reports whether sender worker wk, finding row cur
// UNCERTAIN, repeats it on the fast path (package decide: the provider of
// its attempt drops repeats and still serves the channel in wk's
// deployment, and the message is still valid) rather than handing it to
// the reconciler (counted as DuplicatesPrevented).
func (w *World) senderRepeats(wk *worker, cur ledger.Record) bool {
	if wk.dep == nil {
		return false
	}
	for _, p := range w.route(wk.dep, cur.Channel) {
		if p.name == cur.Provider {
			return p.class == classDedup && !cur.Expired(time.Now().Add(wk.skew))
		}
	}
	return false
}

// switchAll deploys, for the drain, every channel's other provider: a
// row whose attempt went through a provider the deployment no longer has
// waits for it, so the drain deploys each provider in turn.
func (w *World) switchAll() {
	cur := w.dep[reconcilerFn]
	if w.dep[senderFn].n > cur.n {
		cur = w.dep[senderFn]
	}
	d := *cur
	d.n = cur.n + 1
	d.pick = map[string]int{}
	for _, ch := range channels {
		d.pick[ch] = cur.pick[ch]
		if len(w.chans[ch]) > 1 {
			d.pick[ch] = 1 - d.pick[ch]
		}
	}
	w.redeploy(&d, senderFn, "drain_")
	w.redeploy(&d, reconcilerFn, "drain_")
}

var channels = []string{"sms", "email", "push"}

// event is a change of the world at a time: a redeploy, a template put.
type event struct {
	at time.Time
	do func()
}

func (w *World) addEvent(at time.Time, do func()) {
	w.events = append(w.events, &event{at: at, do: do})
	slices.SortStableFunc(w.events, func(a, b *event) int { return a.at.Compare(b.at) })
}

// fireEvent runs the earliest event.
func (w *World) fireEvent() {
	e := w.events[0]
	w.events = w.events[1:]
	e.do()
}
