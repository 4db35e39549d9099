package simtest

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sendonce/sendonce/internal/decide"
	"github.com/sendonce/sendonce/internal/dispatch"
	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/ledger/memledger"
	"github.com/sendonce/sendonce/internal/metrics"
	"github.com/sendonce/sendonce/internal/reconcile"
	"github.com/sendonce/sendonce/internal/render"
	"github.com/sendonce/sendonce/internal/sender"
	"github.com/sendonce/sendonce/internal/templates/memtemplates"
	"github.com/sendonce/sendonce/internal/webhook"
	"github.com/sendonce/sendonce/internal/webhook/memdedup"
	"github.com/sendonce/sendonce/notify"
	"github.com/sendonce/sendonce/provider"
)

// The deployment's fixed settings; the others are drawn per seed
// (deploy.go).
const (
	providerTimeout = decide.DefaultProviderTimeout
	reconcileEvery  = 5 * time.Minute
	retention       = memledger.DefaultRetention
	// maxSkew bounds every component's clock error.
	maxSkew = time.Second
	// maxAge is the reconciler's maximum age (the template's default):
	// after it, giving a message up is allowed even though nothing could
	// have delivered it.
	maxAge = decide.DefaultMaxAge

	maxSteps    = 6000
	maxSenders  = 3
	drainRounds = 40

	// recipients and orders are few, so that several messages of a run
	// carry the same text to the same recipient.
	recipients = 2
	orders     = 2
)

// scenario is what a seed draws before the run.
type scenario struct {
	messages    int
	fifo        bool
	intensity   float64
	pageSize    int
	concurrency int
	backlog     int
	redrive     bool
	invalid     bool
	duplicate   bool
	// The queue's settings.
	visibility time.Duration
	maxReceive int
	// deps are the deployments the run goes through, in order: deps[0]
	// at the start, then one per redeploy.
	deps []deployment
	// lagMax bounds how long after acceptance a provider lists a message.
	lagMax time.Duration
	// noise is the number of other messages the Twilio account holds.
	noise int
	// callbackLoss is the share of status callbacks that never arrive.
	callbackLoss float64
	// carrierFailure is the share of accepted messages the carrier fails.
	carrierFailure float64
}

// message is one notification request of the workload.
type message struct {
	key string
	req notify.Request
	sqs []*sqsMsg
}

// attempt is one claim on a key.
type attempt struct {
	claimID string
	worker  *worker
	key     string
	// receipt: a send under this claim returned a receipt.
	receipt         bool
	released, ended bool
	// chain is the policy chain of the attempt (0: none): see TakeOver.
	chain int
	// overran: its worker stalled past the lease while holding it.
	overran bool
	// reclaim is the sender's Reclaims count of this takeover, which the
	// sender makes once the takeover's attempt has returned.
	reclaim reclaimState
	// recordFailures counts the failed writes that were to record that
	// nothing was delivered under it (a Release, a FAILED mark). The
	// dispatcher retries them; after dispatch.ReleaseAttempts failures it
	// gives up and the row looks like a dead worker's.
	recordFailures int
}

// gaveUp reports whether a's worker gave up recording that nothing was
// delivered: the store refused every try.
func (a *attempt) gaveUp() bool { return a.recordFailures >= dispatch.ReleaseAttempts }

// reclaimState tracks a sender takeover's Reclaims count: the sender
// counts it after the attempt it took over returns (after its last ledger
// call), so it is expected only then.
type reclaimState int

const (
	reclaimNone reclaimState = iota
	// reclaimPending: the attempt has not returned yet.
	reclaimPending
	// reclaimMaybe: its worker died after a failed Release, which may
	// have been the dispatcher's last try (counted) or not.
	reclaimMaybe
	// reclaimReleased: the attempt was released, and its worker may still
	// fail over to the route's next provider (dispatch.SendRoute): the
	// sender counts the takeover once the whole route returns.
	reclaimReleased
)

type heldKey struct {
	worker int
	key    string
}

// keyTruth is the ground truth about one key.
type keyTruth struct {
	name       string
	msg        *message
	claimID    string
	deliveries []delivery
	// deliveredBy names the provider of each delivery.
	deliveredBy []string
	// chains are the policy chains that delivered it (attempt.chain).
	chains    map[int]bool
	ambiguous bool
	// reached names the providers a send of the key reached that may
	// have delivered it (accepted, or no answer).
	reached map[string]bool
	// refused: a provider refused the key's message for good (4xx).
	refused bool
	// searchIncomplete: the latest Twilio lookup of the key could not
	// complete its search (more messages to the recipient than its page
	// cap lets it read).
	searchIncomplete bool
}

// maybeDelivered reports whether some provider call could have delivered
// the key's message, as far as the system can know: one did, or answered
// ambiguously, or a worker died (or stalled past its lease) holding a
// claim on it, or gave up recording that nothing was delivered after the
// store refused every try (its row then looks like a dead worker's).
func (k *keyTruth) maybeDelivered(w *World) bool {
	if len(k.deliveries) > 0 || k.ambiguous {
		return true
	}
	for _, a := range w.attempts {
		if k.msg != nil && a.key == k.msg.key && (a.worker.dead || a.overran || a.gaveUp()) && !a.ended {
			return true
		}
	}
	return false
}

// Violation is a broken invariant.
type Violation struct {
	Invariant string
	Key       string
	Detail    string
	Step      int
	At        time.Duration
	Trace     []string
}

// traceLine is one line of the trace, formatted only when it is read
// (its arguments are values: strings, numbers, times).
type traceLine struct {
	key    string
	step   int
	at     string
	format string
	args   []any
}

func (l traceLine) text() string {
	return fmt.Sprintf("#%d %s ", l.step, l.at) + fmt.Sprintf(l.format, l.args...)
}

// World is one simulated run.
type World struct {
	seed uint64
	rng  *rand.Rand
	// health is each function's dispatch.Health, kept across invocations
	// as a warm container keeps it and shared by its workers: a 429
	// storm's refusals in a row then make a provider known down within a
	// seed's few hundred sends.
	health map[string]*dispatch.Health
	sc     scenario
	t0     time.Time

	mu      sync.Mutex
	arrived []*task
	// woke is signalled when a goroutine parks or ends (see advance).
	woke     chan struct{}
	finished []func()

	// runnable calls, timers (hangs and stalls) and the calls of dead
	// workers, frozen until the run ends.
	runnable, timers, frozen []*task
	cleanup                  bool
	seq                      int
	workers                  []*worker
	cur                      *worker
	calm                     bool

	ledgerOffset                    time.Duration
	storeStormFrom, storeStormUntil time.Time

	mem *memledger.Ledger
	led *simLedger
	// chans lists each channel's providers; dep.pick chooses one.
	chans  map[string][]*simProvider
	byName map[string]*simProvider
	// dep is the deployment each function (senderFn, reconcilerFn) runs.
	dep    map[string]*deployment
	events []*event
	q      *queue
	dedup  *simDedup
	tmpl   *memtemplates.Store
	// renderers are the functions' renderers by function and deployment.
	renderers map[string]*render.Renderer
	// truthRender renders what a row pins, for the invariants.
	truthRender *render.Renderer
	tally       map[string]*metrics.Tally
	exp         map[string]map[string]int
	// staleSeen: a sender's redelivery found a stale first claim it must
	// take over or mark, with how much of its invocation was left.
	staleSeen map[heldKey]time.Duration
	// lastLookup is the latest lookup answer each worker got per key.
	lastLookup map[heldKey]provider.LookupStatus

	msgs      []*message
	keys      map[string]*keyTruth
	attempts  map[string]*attempt
	held      map[heldKey]string
	callbacks []*callback
	nextRecon time.Time
	claimN    int
	// chains numbers the policy chains (attempt.chain).
	chains int

	steps      int
	faults     map[string]int
	trace      []traceLine
	violations []Violation
	violated   map[string]bool
}

func newWorld(seed uint64) *World {
	w := &World{
		seed:     seed,
		rng:      rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		t0:       time.Now(),
		keys:     map[string]*keyTruth{},
		attempts: map[string]*attempt{},
		held:     map[heldKey]string{},
		woke:     make(chan struct{}, 1),
		faults:   map[string]int{},
		violated: map[string]bool{},
		tally:    map[string]*metrics.Tally{"sender": metrics.NewTally(), "reconciler": metrics.NewTally(), "webhook": metrics.NewTally()},
		exp:      map[string]map[string]int{"sender": {}, "reconciler": {}, "webhook": {}},

		health:     map[string]*dispatch.Health{senderFn: {Now: time.Now}, reconcilerFn: {Now: time.Now}},
		staleSeen:  map[heldKey]time.Duration{},
		lastLookup: map[heldKey]provider.LookupStatus{},
		tmpl:       newTemplates(),
		renderers:  map[string]*render.Renderer{},
	}
	w.truthRender = render.New(w.tmpl, render.Config{CacheTTL: -1})
	w.mem = memledger.New(memledger.Config{Now: w.ledgerNow, ClaimID: w.newClaimID, Retention: retention})
	w.led = &simLedger{w: w, inner: w.mem}
	w.dedup = &simDedup{w: w, inner: memdedup.New(memdedup.Config{})}
	return w
}

func (w *World) now() time.Time { return time.Now() }

// must returns v, or panics with err: the simulation's own setup (a
// constructor given the template's settings) cannot fail.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// ledgerNow is the clock of the client making the current call.
func (w *World) ledgerNow() time.Time {
	t := time.Now().Add(w.ledgerOffset)
	if w.cur != nil {
		t = t.Add(w.cur.skew)
	}
	return t
}

func (w *World) newClaimID() string {
	w.claimN++
	return fmt.Sprintf("c%03d", w.claimN)
}

func (w *World) at(t time.Time) string {
	return fmt.Sprintf("+%.3fs", t.Sub(w.t0).Seconds())
}

func (w *World) truth(key string) *keyTruth {
	kt, ok := w.keys[key]
	if !ok {
		kt = &keyTruth{name: fmt.Sprintf("x%d", len(w.keys)), reached: map[string]bool{}, chains: map[int]bool{}}
		w.keys[key] = kt
	}
	return kt
}

func (w *World) short(key string) string {
	if kt, ok := w.keys[key]; ok {
		return kt.name
	}
	return key
}

func (w *World) tracef(key, format string, args ...any) {
	w.trace = append(w.trace, traceLine{key: key, step: w.steps, at: w.at(w.now()), format: format, args: args})
}

func (w *World) expect(service, metric string) {
	w.exp[service][metric]++
}

func (w *World) expectMark(wk *worker, a *attempt, st ledger.State) {
	switch st {
	case ledger.StateSent:
		if a != nil && a.receipt {
			w.expect(wk.service, metrics.Sent)
			if wk.service == "reconciler" {
				w.expect(wk.service, metrics.Resent)
			}
		} else if wk.service == "reconciler" {
			w.expect(wk.service, metrics.ReconciledSent)
		}
	case ledger.StateFailed:
		w.expect(wk.service, metrics.Failed)
		if wk.service == "reconciler" {
			w.expect(wk.service, metrics.ReconciledFailed)
		}
	case ledger.StateAbandoned:
		w.expect(wk.service, metrics.Abandoned)
	}
}

// reclaimDone expects the Reclaims count of a's takeover once its
// attempt has returned. w.mu is held.
func (w *World) reclaimDone(a *attempt) {
	if a != nil && a.reclaim == reclaimPending {
		a.reclaim = reclaimNone
		w.expect("sender", metrics.Reclaims)
	}
}

// workerEnded settles the pending Reclaims counts of wk's takeovers: a
// worker that finished returned from every attempt; one that died counted
// none that had not returned, except perhaps one whose Release failed.
func (w *World) workerEnded(wk *worker) {
	w.checkStaleLeft(wk)
	for _, a := range w.attempts {
		if a.worker != wk || (a.reclaim != reclaimPending && a.reclaim != reclaimReleased) {
			continue
		}
		switch {
		case !wk.dead:
			a.reclaim = reclaimPending
			w.reclaimDone(a)
		case a.recordFailures > 0 || a.reclaim == reclaimReleased:
			a.reclaim = reclaimMaybe
		default:
			a.reclaim = reclaimNone
		}
	}
}

// recordFailed notes a failed write of a that was to record that nothing
// was delivered. Once the dispatcher gives up, the attempt has returned.
// w.mu is held.
func (w *World) recordFailed(a *attempt) {
	if a == nil {
		return
	}
	a.recordFailures++
	if a.gaveUp() {
		w.reclaimDone(a)
	}
}

// reclaimSlack is how many Reclaims the sender may have counted beyond
// those expected: takeovers whose attempt has not returned yet, and dead
// workers' takeovers whose count is unknown.
func (w *World) reclaimSlack() int {
	n := 0
	for _, a := range w.attempts {
		if a.reclaim != reclaimNone {
			n++
		}
	}
	return n
}

// policyResend reports whether a reconciler takeover of row before (as
// it was) is a resend the class policy allows though an earlier attempt
// may have delivered: the attempt's provider can neither drop a repeat
// nor prove by a lookup whether it has the message (a plain provider, or
// Twilio whose lookup found messages of the same text but none proven to
// be the key's), and the class policy is resend. w.mu is held.
func (w *World) policyResend(wk *worker, before ledger.Record) bool {
	p := w.byName[before.Provider]
	if p == nil || wk.service != "reconciler" || before.Released || reconcile.DefaultPolicies[before.Class] != reconcile.Resend {
		return false
	}
	switch p.class {
	case classPlain:
		return true
	case classTwilio:
		return w.lastLookup[heldKey{wk.id, before.Key}] == provider.LookupUnproven
	}
	return false
}

// violate records the first violation of inv in the run.
func (w *World) violate(inv, key, detail string) {
	if w.violated[inv] {
		return
	}
	w.violated[inv] = true
	w.violations = append(w.violations, Violation{Invariant: inv, Key: w.short(key), Detail: detail, Step: w.steps, At: w.now().Sub(w.t0), Trace: w.traceOf(key)})
}

// traceOf returns the trace lines about key (a worker's death is traced
// under the key of the call it died at), the latest 40.
func (w *World) traceOf(key string) []string {
	var out []string
	for _, l := range w.trace {
		if l.key == key {
			out = append(out, l.text())
		}
	}
	if len(out) > 40 {
		out = append([]string{fmt.Sprintf("... %d earlier lines", len(out)-40)}, out[len(out)-40:]...)
	}
	return out
}

// draw picks the scenario.
func (w *World) draw() {
	r := w.rng
	sc := scenario{
		messages:    2 + r.IntN(6),
		fifo:        r.IntN(10) < 3,
		intensity:   0.3 + 1.7*r.Float64(),
		pageSize:    2 + r.IntN(5),
		concurrency: 1 + r.IntN(3),
	}
	if r.IntN(100) < 15 {
		sc.backlog = 1 + r.IntN(sc.pageSize+3)
		sc.redrive = r.IntN(2) == 0
	}
	sc.invalid = r.IntN(10) == 0
	sc.duplicate = !sc.fifo && r.IntN(5) == 0
	sc.callbackLoss = []float64{0, 0.3, 1}[r.IntN(3)]
	if r.IntN(3) == 0 {
		sc.carrierFailure = 0.3
	}
	w.sc = sc
	redeploys := 0
	if r.IntN(10) < 4 {
		redeploys = 1 + r.IntN(3)
	}
	w.drawSettings(redeploys)
}

// smsAddress is the phone number of recipient i.
func smsAddress(i int) string { return fmt.Sprintf("+1555000%04d", i) }

// request draws message idx's request. Its text depends only on the
// channel, the recipient, the order (one of a few) and the template
// version: several keys of a run may send the same text to one
// recipient. Half the requests carry a "name", which some template
// versions need.
func (w *World) request(idx int, event string) (notify.Request, string) {
	ch := channels[w.rng.IntN(3)]
	classes := []notify.Class{notify.ClassOTP, notify.ClassTransactional, notify.ClassMarketing}
	rcpt := w.rng.IntN(recipients)
	req := notify.Request{
		TenantID: tenant, EventID: event, Channel: notify.Channel(ch), Template: template,
		Recipient: notify.Recipient{ID: fmt.Sprintf("user-%d", rcpt)},
		Class:     classes[w.rng.IntN(3)],
		Data:      map[string]any{"order_id": fmt.Sprintf("A-%d", w.rng.IntN(orders))},
	}
	if w.rng.IntN(2) == 0 {
		req.Data["name"] = fmt.Sprintf("User %d", rcpt)
	}
	if w.rng.IntN(25) == 0 {
		req.Template = "no_such_template" // valid, but cannot be served: FAILED
	}
	switch ch {
	case "sms":
		req.Recipient.Phone = smsAddress(rcpt)
	case "email":
		req.Recipient.Email = fmt.Sprintf("user%d@example.com", rcpt)
	case "push":
		req.Recipient.PushTarget = fmt.Sprintf("arn:aws:sns:us-east-1:123456789012:endpoint/APNS/app/%d", rcpt)
	}
	w.drawValidity(&req, idx) // validity.go
	b, _ := json.Marshal(req)
	return req, string(b)
}

func (w *World) setup() {
	w.draw()
	w.drawProviders()
	w.scheduleRedeploys()
	w.scheduleTemplatePuts()
	if w.rng.IntN(5) == 0 {
		w.storeStormFrom = w.t0.Add(time.Duration(w.rng.Int64N(int64(10 * time.Minute))))
		w.storeStormUntil = w.storeStormFrom.Add(time.Duration(10+w.rng.IntN(300)) * time.Second)
		w.faults["store_throttle_storm_windows"]++
	}
	w.q = &queue{fifo: w.sc.fifo, visibility: w.sc.visibility, maxReceive: w.sc.maxReceive}
	for i := range w.sc.messages {
		req, body := w.request(i, fmt.Sprintf("e%d", i))
		m := &message{key: req.Key(), req: req}
		kt := w.truth(m.key)
		kt.name, kt.msg = fmt.Sprintf("k%d", i), m
		w.msgs = append(w.msgs, m)
		w.enqueue(m, body)
		if w.sc.duplicate && i == 0 {
			w.enqueue(m, body) // the producer sent it twice
		}
	}
	if w.sc.invalid {
		w.enqueue(nil, `{"tenant_id":"acme","event_id":"bad","channel":"fax"}`)
	}
	if w.sc.backlog > 0 {
		w.makeBacklog()
	}
	if w.sc.noise > 0 {
		var texts []string
		for o := range orders {
			msg, err := w.truthRender.Render(context.Background(), render.Input{Tenant: tenant, Template: template, Channel: "sms", Data: map[string]any{"order_id": fmt.Sprintf("A-%d", o)}})
			if err == nil {
				texts = append(texts, msg.Body)
			}
		}
		for _, p := range w.chans["sms"] {
			if p.tw != nil {
				p.tw.addNoise(w.sc.noise, texts)
			}
		}
	}
	slices.SortStableFunc(w.q.msgs, func(a, b *sqsMsg) int { return a.arrive.Compare(b.arrive) })
	w.nextRecon = w.t0.Add(time.Duration(w.rng.Int64N(int64(reconcileEvery))))
	w.tracef("", "scenario: queue visibility %s, %d receives; %s; providers %v; listing lag up to %s",
		w.sc.visibility, w.sc.maxReceive, w.dep[senderFn], slices.Sorted(maps.Keys(w.byName)), w.sc.lagMax)
}

// enqueue puts a producer's message on the queue, at a time in the run's
// first 2 minutes; m is nil for an invalid body.
func (w *World) enqueue(m *message, body string) {
	sm := &sqsMsg{id: fmt.Sprintf("m%d", len(w.q.msgs)+1), body: body, group: "invalid",
		arrive: w.t0.Add(time.Duration(w.rng.Int64N(int64(2 * time.Minute))))}
	if m != nil {
		sm.key, sm.group = m.key, m.req.Recipient.ID
		m.sqs = append(m.sqs, sm)
	}
	w.q.msgs = append(w.q.msgs, sm)
}

// makeBacklog writes, long ago, UNCERTAIN rows that were never resolved
// and have expired since (a multi-Region table keeps them: TTL is off),
// in the attention shards of the workload's keys, ahead of them in due
// order. With sc.redrive one of them is requested again now (a redrive
// from the DLQ): its expired row must not stand in the way.
func (w *World) makeBacklog() {
	shards := map[int]bool{}
	for _, m := range w.msgs {
		shards[ledger.Shard(m.key)] = true
	}
	w.ledgerOffset = -(retention + 24*time.Hour)
	ctx := context.Background()
	n := 0
	var first *message
	var firstBody string
	for i := 0; n < w.sc.backlog*len(shards) && i < 10000; i++ {
		req, body := w.request(1000+i, fmt.Sprintf("old%d", i))
		key := req.Key()
		if !shards[ledger.Shard(key)] {
			continue
		}
		e := ledger.Entry{Key: key, Tenant: req.TenantID, Channel: string(req.Channel), Class: string(req.Class), Template: req.Template, RecipientID: req.Recipient.ID, Address: req.Address(), Body: "old"}
		c, err := w.mem.Claim(ctx, e, time.Minute)
		if err != nil {
			continue
		}
		_ = w.mem.Mark(ctx, c, ledger.Outcome{State: ledger.StateUncertain, Reason: "old"})
		kt := w.truth(key)
		kt.name = fmt.Sprintf("old%d", n)
		if first == nil {
			first, firstBody = &message{key: key, req: req}, body
		}
		n++
	}
	w.ledgerOffset = 0
	w.faults["expired_backlog_rows"] += n
	if w.sc.redrive && first != nil {
		kt := w.truth(first.key)
		kt.msg = first
		kt.name = "k" + kt.name
		w.msgs = append(w.msgs, first)
		w.enqueue(first, firstBody)
	}
}

func (w *World) newWorker(service string, calm bool) *worker {
	wk := &worker{id: len(w.workers) + 1, service: service, calm: calm || w.calm,
		skew: time.Duration(w.rng.Int64N(int64(2*maxSkew))) - maxSkew}
	wk.name = fmt.Sprintf("%c%d", service[0], wk.id)
	w.workers = append(w.workers, wk)
	return wk
}

// dispatcher builds worker wk's dispatcher for function fn from the
// deployment's current settings, per invocation, as a redeploy would, and
// returns it with the function's settings.
func (w *World) dispatcher(wk *worker, fn string) (*dispatch.Dispatcher, fnConfig) {
	d := w.dep[fn]
	cfg := d.fn[fn]
	wk.claim, wk.dep = cfg.ClaimTimeout, d
	providers, fallbacks := w.providers(d)
	return must(dispatch.New(dispatch.Dispatcher{
		Ledger: w.led, Providers: providers, Fallbacks: fallbacks, Renderer: w.renderer(fn, d), Metrics: w.tally[wk.service], Health: w.health[fn],
		ProviderTimeout: cfg.ProviderTimeout, ClaimTimeout: cfg.ClaimTimeout, Settle: cfg.Settle, RetryBase: cfg.RetryBase,
		Now: func() time.Time { return time.Now().Add(wk.skew) },
	})), cfg
}

func (w *World) startSender(batch []*sqsMsg) {
	wk := w.newWorker("sender", false)
	for _, m := range batch {
		if m.key != "" {
			w.tracef(m.key, "%s receives %s (%s, receive %d)", wk.name, m.id, w.short(m.key), m.receives)
		}
	}
	disp, cfg := w.dispatcher(wk, senderFn)
	s := must(sender.New(sender.Config{Dispatcher: disp, DeadLetters: simDLQ{w}, Validity: cfg.Validity}))
	ev := w.event(batch)
	var resp events.SQSEventResponse
	w.start(wk, cfg.timeout, func(ctx context.Context) {
		resp, _ = s.HandleSQS(ctx, ev)
	}, func() { w.finishBatch(wk, batch, resp) })
}

func (w *World) startReconciler(calm bool) *worker {
	wk := w.newWorker("reconciler", calm)
	disp, cfg := w.dispatcher(wk, reconcilerFn)
	r := must(reconcile.New(reconcile.Config{Dispatcher: disp, MaxAge: cfg.MaxAge, PageSize: w.sc.pageSize, Concurrency: w.sc.concurrency}))
	w.tracef("", "%s reconciler run starts", wk.name)
	w.start(wk, cfg.timeout, func(ctx context.Context) { _, _ = r.Run(ctx) }, nil)
	return wk
}

func (w *World) startCallback(c *callback) {
	wk := w.newWorker("webhook", false)
	h := must(webhook.New(webhook.Config{Ledger: w.led, Dedup: w.dedup, Metrics: w.tally["webhook"], Now: func() time.Time { return time.Now().Add(wk.skew) }}))
	var failed bool
	w.start(wk, 10*time.Second, func(ctx context.Context) {
		_, err := h.Apply(ctx, c.cb)
		failed = err != nil
	}, func() {
		if failed && c.tries < 5 {
			c.tries++
			c.due = w.now().Add(30 * time.Second)
			w.callbacks = append(w.callbacks, c)
		}
	})
}

func (w *World) liveWorkers(service string) int {
	n := 0
	for _, wk := range w.workers {
		if wk.service == service && !wk.done && !wk.dead {
			n++
		}
	}
	return n
}

// wakeTimers makes the hangs that are over runnable.
func (w *World) wakeTimers() {
	now := w.now()
	keep := w.timers[:0]
	for _, t := range w.timers {
		if !now.Before(t.wake) {
			t.readyAt = now
			w.runnable = append(w.runnable, t)
		} else {
			keep = append(keep, t)
		}
	}
	w.timers = keep
	slices.SortFunc(w.runnable, func(a, b *task) int { return a.seq - b.seq })
}

// nextEvent is the earliest future time at which something can happen.
func (w *World) nextEvent() (time.Time, bool) {
	var best time.Time
	consider := func(t time.Time) {
		if best.IsZero() || t.Before(best) {
			best = t
		}
	}
	for _, t := range w.timers {
		consider(t.wake)
	}
	if t, ok := w.q.nextVisible(w.now()); ok {
		consider(t)
	}
	if !w.q.settled() || w.liveWorkers("sender") > 0 || len(w.callbacks) > 0 {
		consider(w.nextRecon)
	}
	for _, c := range w.callbacks {
		consider(c.due)
	}
	if len(w.events) > 0 && !w.quiet() {
		consider(w.events[0].at)
	}
	return best, !best.IsZero()
}

type option struct {
	weight float64
	do     func()
}

// step takes one scheduling decision.
func (w *World) step() bool {
	w.wakeTimers()
	now := w.now()
	var opts []option
	bound := time.Time{}
	for _, t := range w.runnable {
		if b := t.readyAt.Add(maxCallDelay); bound.IsZero() || b.Before(bound) {
			bound = b
		}
		opts = append(opts, option{10, func() {
			if !w.calm && !t.w.calm && w.rng.Float64() < 0.012*w.sc.intensity {
				w.faults["worker_death"]++
				w.tracef(t.key, "%s dies before %s %s", t.w.name, t.op, w.short(t.key))
				w.kill(t.w)
				return
			}
			if w.stall(t) {
				return
			}
			w.resume(t)
		}})
	}
	if w.liveWorkers("sender") < maxSenders && len(w.q.candidates(now)) > 0 {
		opts = append(opts, option{5, func() {
			if b := w.receive(); len(b) > 0 {
				w.startSender(b)
			}
		}})
	}
	if !now.Before(w.nextRecon) {
		opts = append(opts, option{5, func() {
			w.nextRecon = w.nextRecon.Add(reconcileEvery)
			w.startReconciler(false)
		}})
	}
	if w.liveWorkers("reconciler") > 0 && !w.calm {
		opts = append(opts, option{0.05, func() {
			w.faults["reconciler_twin_run"]++
			w.startReconciler(false)
		}})
	}
	for i, c := range w.callbacks {
		if !now.Before(c.due) {
			opts = append(opts, option{3, func() {
				w.callbacks = slices.Delete(w.callbacks, i, i+1)
				w.startCallback(c)
			}})
			break
		}
	}
	if len(w.events) > 0 && !now.Before(w.events[0].at) {
		opts = append(opts, option{3, w.fireEvent})
	}
	if !w.calm && len(w.workers) > 0 {
		opts = append(opts, option{0.2, func() {
			wk := w.workers[w.rng.IntN(len(w.workers))]
			wk.skew = time.Duration(w.rng.Int64N(int64(2*maxSkew))) - maxSkew
			w.faults["clock_jump"]++
		}})
	}
	next, ok := w.nextEvent()
	switch {
	case !bound.IsZero() && bound.After(now):
		limit := bound
		if ok && next.Before(limit) {
			limit = next
		}
		if limit.After(now) {
			opts = append(opts, option{1, func() { w.advance(time.Duration(w.rng.Int64N(int64(limit.Sub(now)))) + 1) }})
		}
	case bound.IsZero() && ok && next.After(now):
		opts = append(opts, option{2, func() { w.advance(next.Sub(now)) }})
	}
	if len(opts) == 0 {
		return false
	}
	total := 0.0
	for _, o := range opts {
		total += o.weight
	}
	x := w.rng.Float64() * total
	for _, o := range opts {
		if x < o.weight {
			o.do()
			return true
		}
		x -= o.weight
	}
	opts[len(opts)-1].do()
	return true
}

// stall sometimes pauses a worker just before it records an outcome, for
// longer than its lease but within its invocation's deadline (a process
// pause): another worker may take the claim over meanwhile, and the late
// write must then be fenced out. Pauses before a provider call are not
// modelled: a claim that outlives no provider call breaks the lease's
// premise (the claim timeout exceeds the provider timeout plus margin).
func (w *World) stall(t *task) bool {
	if w.calm || t.w.calm || t.w.service != "sender" || (t.op != "mark" && t.op != "release") || !t.wake.IsZero() {
		return false
	}
	if w.rng.Float64() >= 0.02*w.sc.intensity {
		return false
	}
	d := t.w.claim + time.Duration(w.rng.Int64N(int64(3*time.Minute)))
	if !w.now().Add(d).Before(t.w.deadline.Add(-time.Second)) {
		return false
	}
	for _, a := range w.attempts {
		if a.worker == t.w && !a.ended {
			a.overran = true // its lease passes while it is held
		}
	}
	w.faults["worker_stall"]++
	w.tracef(t.key, "%s stalls %s before %s %s", t.w.name, d.Round(time.Millisecond), t.op, w.short(t.key))
	w.runnable = slices.DeleteFunc(w.runnable, func(x *task) bool { return x == t })
	t.wake = w.now().Add(d)
	w.timers = append(w.timers, t)
	return true
}

// quiet reports whether the workload is done: every message deleted or
// dead-lettered, no live worker, no callback pending.
func (w *World) quiet() bool {
	return w.q.settled() && len(w.callbacks) == 0 && len(w.runnable) == 0 && len(w.timers) == 0 &&
		!slices.ContainsFunc(w.workers, func(wk *worker) bool { return !wk.done && !wk.dead })
}

// run runs the whole simulation: the workload under faults, the
// quiescence checks, a calm drain of reconciler runs, the final checks.
func (w *World) run() {
	w.setup()
	for ; w.steps < maxSteps; w.steps++ {
		w.checkStep()
		if w.quiet() {
			break
		}
		if !w.step() {
			break
		}
	}
	if w.steps >= maxSteps {
		// Not a violation: the run was cut short, so quiescence is not
		// judged (its rows still go through the drain).
		w.faults["step_budget_exhausted"]++
	} else {
		w.checkQuiescence()
	}
	w.checkStep()
	w.drain()
	w.checkStep()
	w.checkDrained()
	w.shutdown()
}

// drain runs the reconciler without faults until every workload row is
// final, as its schedule would over the following hours: each run at the
// next time a row is due (at least a minute apart). A row whose earlier
// attempt went through a provider the deployment no longer has waits for
// that provider, so half way through, or once only such rows are left,
// the drain deploys each channel's other provider.
func (w *World) drain() {
	w.calm = true
	for len(w.events) > 0 {
		w.fireEvent()
	}
	switched := false
	for round := range drainRounds {
		due, ok := w.earliestDue()
		if (!ok || round == drainRounds/2) && !switched {
			w.switchAll()
			switched = true
			due, ok = w.earliestDue()
		}
		if !ok {
			return
		}
		now := w.now()
		wait := time.Minute
		if d := due.Sub(now); d > wait {
			wait = d + time.Millisecond
		}
		w.advanceTo(now.Add(wait))
		wk := w.startReconciler(true)
		for n := 0; !wk.done && n < 2000; n++ {
			w.steps++
			w.wakeTimers()
			if len(w.runnable) > 0 {
				w.resume(w.runnable[0])
				continue
			}
			if next, ok := w.nextEvent(); ok && next.After(w.now()) {
				w.advance(next.Sub(w.now()))
				continue
			}
			w.advance(time.Second)
		}
		for len(w.callbacks) > 0 {
			c := w.callbacks[0]
			w.callbacks = w.callbacks[1:]
			w.startCallback(c)
			for len(w.runnable) > 0 {
				w.resume(w.runnable[0])
			}
		}
	}
}

// earliestDue is when the first non-final workload row that the
// reconciler's deployment can resolve becomes due: rows waiting for a
// provider it does not have (an earlier attempt went through it and may
// have sent: attempts beyond releases) and rows on a busy number do not
// count.
func (w *World) earliestDue() (time.Time, bool) {
	var best time.Time
	dep := w.dep[reconcilerFn]
	for _, m := range w.msgs {
		r, err := w.mem.Get(context.Background(), m.key)
		if err != nil || r.State.Final() || w.keys[m.key].searchIncomplete {
			continue
		}
		if r.Provider != "" && r.Attempts > r.Releases && !w.serves(dep, r.Channel, r.Provider) {
			continue
		}
		d := ledger.Due(r)
		if best.IsZero() || d.Before(best) {
			best = d
		}
	}
	return best, !best.IsZero()
}
