package chaos

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sendonce/sendonce/internal/dispatch"
	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/localpipeline"
	"github.com/sendonce/sendonce/internal/metrics"
	"github.com/sendonce/sendonce/internal/provider/registry"
	"github.com/sendonce/sendonce/internal/provider/simulator"
	"github.com/sendonce/sendonce/internal/rie"
)

// failoverLane is a two-provider route, SENDONCE_SMS_PROVIDER=http,lambda:
//
//   - the primary is the generic HTTP adapter against the pipeline's
//     provider simulator (drops repeats, answers lookups), reached through
//     a front (failoverFront) that records every send and lookup per key,
//     with its outcome as the wire showed it, and injects the lane's
//     schedule;
//   - the secondary is the Lambda adapter invoking the example function
//     (examples/lambda-provider) under the Lambda Runtime Interface
//     Emulator, declared idempotent and able to look up, which forwards
//     to a second simulator of its own (lambdaPool).
//
// Each simulator's record of what it accepted is that provider's ground
// truth, by key. The lane runs its own schedule from the run's outage
// start (Options.OutageAt), once the faults are on: the primary refuses
// every send (429/503) for longer than SQS's receives of a message
// (visibility timeout × maxReceiveCount), is healthy for the senders'
// health cool-down (so they try it again), then browns out: a share of its
// sends get no answer (half of them after the simulator took the
// message), so the sender's call times out, ambiguous; then it is
// healthy again. The run's own outage switch (Outage) is ignored: the
// lane's outage is the primary's alone, so that failover can carry the
// channel through it. Its first wave is fed over the whole schedule
// (Lane.Spread), so that messages meet every phase.
//
// The verdict (summarize) checks, beside the common one, that no
// provider took a message after the other one's attempt at it was left
// without an answer unless that attempt was first settled against its own
// provider (a lookup there in between), from the providers' side; and,
// from the ledger rows' attempt histories, that every change of provider
// followed an attempt that was released (provably sent nothing).
type failoverLane struct {
	o     Options
	seed  uint64
	front *failoverFront
	pool  *lambdaPool
	dir   string

	// Schedule, fixed at construction (failoverSchedule).
	outageAt, outage, gap, brownout time.Duration
	brownoutRate                    float64

	mu        sync.Mutex
	primary   *simulator.Simulator
	secondary *simulator.Simulator
	stopSec   func()
	stopSched context.CancelFunc
	schedDone chan struct{}
	// phases records when each phase of the schedule began.
	phases []phaseAt
}

type phaseAt struct {
	name string
	at   time.Time
}

// The lane's providers, as the route names them.
const (
	failoverPrimary   = "http"
	failoverSecondary = "lambda"
	// failoverFunction is the function name the Lambda adapter invokes
	// (the emulator serves one function, whatever its name).
	failoverFunction = "function"
	// failoverToken is the secondary simulator's bearer token (the
	// example function's HTTP_PROVIDER_TOKEN).
	failoverToken = "chaos-failover-secondary"
	// failoverInstances is the number of emulators serving the function
	// (each runs one invocation at a time, as one Lambda instance does).
	failoverInstances = 4
)

// failoverSchedule returns the primary's outage (longer than SQS's
// receives of a message where the fault window leaves the room, else
// o.PrimaryOutage or o.Outage), the healthy gap before its brownout (the senders' health
// cool-down, so that they try the primary again before it browns out,
// where the window leaves the room), its brownout, and how long the
// lane's first wave is fed.
func failoverSchedule(o Options) (outage, gap, brownout, spread time.Duration) {
	vis := cmp.Or(o.VisibilityTimeout, localpipeline.DefaultVisibilityTimeout)
	receives := vis * localpipeline.DefaultMaxReceiveCount
	window := cmp.Or(o.FaultWindow, 40*time.Second)
	brownout = min(max(window/6, 3*time.Second), 20*time.Second)
	want := cmp.Or(o.PrimaryOutage, o.Outage)
	outage, gap = max(want, receives+5*time.Second), dispatch.DefaultHealthCooldown
	room := window - o.OutageAt - brownout - 5*time.Second
	if outage+gap > room {
		gap = 0
	}
	if outage > room {
		outage = max(min(want, room), 0)
	}
	spread = min(o.OutageAt+outage+gap+brownout+5*time.Second, window)
	return outage, gap, brownout, spread
}

// failoverSpread is the lane's Lane.Spread.
func failoverSpread(o Options) time.Duration {
	_, _, _, spread := failoverSchedule(o)
	return spread
}

func newFailoverLane(ctx context.Context, o Options, seed uint64) (Counterpart, error) {
	l := &failoverLane{o: o, seed: seed, brownoutRate: 0.25}
	l.outage, l.gap, l.brownout, _ = failoverSchedule(o)
	l.outageAt = o.OutageAt
	dir, err := os.MkdirTemp("", "sendonce-chaos-failover-")
	if err != nil {
		return nil, fmt.Errorf("failover: %w", err)
	}
	l.dir = dir
	ok := false
	defer func() {
		if !ok {
			l.Close()
		}
	}()
	root, err := rie.ModuleRoot(ctx)
	if err != nil {
		return nil, err
	}
	boot := filepath.Join(dir, "bootstrap")
	if err := rie.BuildBootstrap(ctx, root, "./examples/lambda-provider", boot); err != nil {
		return nil, fmt.Errorf("failover: build the example function: %w", err)
	}
	l.secondary = simulator.New(simulator.Options{Token: failoverToken, Seed: seed ^ 0x2d, Latency: 2 * time.Millisecond, Jitter: 8 * time.Millisecond})
	secURL, stopSec, err := serve(l.secondary.Handler())
	if err != nil {
		return nil, err
	}
	l.stopSec = stopSec
	l.pool, err = startLambdaPool(ctx, o.RIE, boot, failoverInstances, map[string]string{
		"HTTP_PROVIDER_URL": secURL, "HTTP_PROVIDER_TOKEN": failoverToken,
	})
	if err != nil {
		return nil, err
	}
	l.front, err = newFailoverFront(seed, l.brownoutRate)
	if err != nil {
		return nil, err
	}
	ok = true
	return l, nil
}

func (l *failoverLane) Env() map[string]string {
	return map[string]string{
		registry.EnvSMSProvider: failoverPrimary + "," + failoverSecondary, registry.EnvEmailProvider: "",
		registry.EnvHTTPURL:             l.front.url,
		registry.EnvSMSLambdaARN:        failoverFunction,
		registry.EnvSMSLambdaIdempotent: "true", registry.EnvSMSLambdaLookup: "true",
		"AWS_ENDPOINT_URL_LAMBDA": l.pool.url,
	}
}

// Attach points the front at the pipeline's simulator: the primary.
func (l *failoverLane) Attach(p *localpipeline.Pipeline) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.primary = p.Simulator()
	l.front.target.Store(strings.TrimRight(p.SimulatorURL(), "/"))
	return nil
}

// Plan gives a planned rejection to both providers (a recipient's
// permanent error holds on every route) and a slow first answer to the
// primary.
func (l *failoverLane) Plan(m localpipeline.Message, slow time.Duration) error {
	if m.Fault.Kind != "" {
		if err := l.primary.AddFault(m.Fault); err != nil {
			return err
		}
		return l.secondary.AddFault(m.Fault)
	}
	if slow > 0 {
		return l.primary.AddFault(simulator.Fault{Kind: simulator.FaultLatency, Delay: slow, Reference: m.Key, Count: 1})
	}
	return nil
}

// Faults turns the primary's random faults on or off; on, the first
// time, it starts the lane's schedule, and off ends it.
func (l *failoverLane) Faults(on bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if on {
		_ = l.primary.SetRandom(l.o.ProviderFaults)
		if l.stopSched == nil {
			ctx, cancel := context.WithCancel(context.Background())
			l.stopSched, l.schedDone = cancel, make(chan struct{})
			go l.schedule(ctx)
		}
		return
	}
	if l.stopSched != nil {
		l.stopSched()
		l.mu.Unlock()
		<-l.schedDone
		l.mu.Lock()
	}
	l.front.mode.Store(int32(modeNormal))
	l.primary.ClearFaults()
	l.primary.SetLatency(0, 0)
}

// schedule runs the primary's outage, then its brownout, until ctx ends.
func (l *failoverLane) schedule(ctx context.Context) {
	defer close(l.schedDone)
	defer l.front.mode.Store(int32(modeNormal))
	for _, ph := range []struct {
		name  string
		mode  frontMode
		after time.Duration
	}{{"normal", modeNormal, l.outageAt}, {"outage", modeOutage, l.outage}, {"recovered", modeNormal, l.gap}, {"brownout", modeBrownout, l.brownout}} {
		l.front.mode.Store(int32(ph.mode))
		l.mu.Lock()
		l.phases = append(l.phases, phaseAt{ph.name, time.Now()})
		l.mu.Unlock()
		localpipeline.Sleep(ctx, ph.after)
		if ctx.Err() != nil {
			return
		}
	}
	l.mu.Lock()
	l.phases = append(l.phases, phaseAt{"healthy", time.Now()})
	l.mu.Unlock()
}

// Outage is ignored: the lane's outage is the primary's own (schedule).
func (l *failoverLane) Outage(bool) {}

// Delivered counts, per key, the messages both providers accepted.
func (l *failoverLane) Delivered(context.Context, localpipeline.Workload) (map[string]int, map[string]string, error) {
	return simDelivered(l.primary, l.secondary)
}

func (l *failoverLane) Sent() int {
	keys := map[string]bool{}
	for _, s := range []*simulator.Simulator{l.primary, l.secondary} {
		for k := range s.DeliveredAll() {
			keys[k] = true
		}
	}
	return len(keys)
}

func (l *failoverLane) Capability(string) Capability { return CanAvoid }

func (l *failoverLane) Faulted() map[string]int {
	out := l.front.faulted()
	for k, v := range l.primary.Stats().Faults {
		out["primary: "+string(k)] += v
	}
	for _, s := range []*simulator.Simulator{l.primary, l.secondary} {
		out["repeats dropped (Idempotency-Key)"] += s.Stats().DuplicatesSuppressed
	}
	return out
}

func (l *failoverLane) InFlight() int64 { return l.front.inFlight.Load() + l.pool.inFlight.Load() }

// Quiesce waits (bounded by ctx and a minute) until the primary has
// posted every callback.
func (l *failoverLane) Quiesce(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	localpipeline.WaitCallbacks(ctx, l.primary, l.o.Callbacks.Duplicates)
}

func (l *failoverLane) Close() {
	l.mu.Lock()
	stop := l.stopSched
	l.mu.Unlock()
	if stop != nil {
		stop()
	}
	if l.front != nil {
		l.front.close()
	}
	if l.pool != nil {
		l.pool.close()
	}
	if l.stopSec != nil {
		l.stopSec()
	}
	if l.secondary != nil {
		l.secondary.Close()
	}
	if l.dir != "" {
		_ = os.RemoveAll(l.dir)
	}
}

// wireEvent is one call at a provider as the provider's side saw it.
type wireEvent struct {
	at time.Time
	// lookup: a lookup; else a send, whose answer is noAnswer when the
	// caller got none (it went away first, or the provider hung): the
	// send is ambiguous to the caller.
	lookup, noAnswer bool
}

// frontMode is the primary's state in the lane's schedule.
type frontMode int32

const (
	modeNormal frontMode = iota
	modeOutage
	modeBrownout
)

// failoverFront stands in front of the primary's simulator: it records
// every send and lookup per key and applies the schedule's mode.
type failoverFront struct {
	url    string
	stop   func()
	client *http.Client
	target atomic.Value // the simulator's base URL
	mode   atomic.Int32
	rate   float64

	inFlight atomic.Int64
	wire     wireLog

	mu     sync.Mutex
	rng    *rand.Rand
	counts map[string]int
}

func newFailoverFront(seed uint64, brownoutRate float64) (*failoverFront, error) {
	f := &failoverFront{client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}, rate: brownoutRate,
		rng: rand.New(rand.NewPCG(seed, seed^0xf0f0)), counts: map[string]int{}}
	url, stop, err := serve(f)
	if err != nil {
		return nil, err
	}
	f.url, f.stop = url, stop
	return f, nil
}

func (f *failoverFront) close() { f.stop() }

func (f *failoverFront) note(key string, ev wireEvent, fault string) {
	f.wire.note(key, ev)
	f.mu.Lock()
	defer f.mu.Unlock()
	if fault != "" {
		f.counts[fault]++
	}
}

// The front's injected faults, by name.
const (
	faultOutage         = "primary outage: refused (429/503)"
	faultBrownoutBefore = "primary brownout: no answer, nothing accepted"
	faultBrownoutAfter  = "primary brownout: accepted, no answer"
)

func (f *failoverFront) faulted() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]int{}
	for k, v := range f.counts {
		out[k] = v
	}
	return out
}

// wireLog records a provider's calls per key, as its side saw them.
type wireLog struct {
	mu     sync.Mutex
	events map[string][]wireEvent
}

// note records ev for key (none without a key).
func (w *wireLog) note(key string, ev wireEvent) {
	if key == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.events == nil {
		w.events = map[string][]wireEvent{}
	}
	w.events[key] = append(w.events[key], ev)
}

// eventsOf returns a copy of the events of every key.
func (w *wireLog) eventsOf() map[string][]wireEvent {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string][]wireEvent, len(w.events))
	for k, v := range w.events {
		out[k] = slices.Clone(v)
	}
	return out
}

func (f *failoverFront) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.inFlight.Add(1)
	defer f.inFlight.Add(-1)
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return
	}
	base, _ := f.target.Load().(string)
	at := time.Now()
	if r.Method == http.MethodGet {
		f.note(r.URL.Query().Get("reference"), wireEvent{at: at, lookup: true}, "")
		status, hdr, out, err := localpipeline.Forward(r.Context(), f.client, r, base+r.URL.RequestURI(), nil)
		if err != nil {
			localpipeline.HangUp(w)
			return
		}
		localpipeline.Answer(w, status, hdr, out)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	switch frontMode(f.mode.Load()) {
	case modeOutage:
		f.note(key, wireEvent{at: at}, faultOutage)
		status := http.StatusServiceUnavailable
		if at.UnixNano()%2 == 0 {
			status = http.StatusTooManyRequests
		}
		http.Error(w, `{"error":"unavailable"}`, status)
		return
	case modeBrownout:
		f.mu.Lock()
		x := f.rng.Float64()
		f.mu.Unlock()
		switch {
		case x < f.rate/2:
			f.note(key, wireEvent{at: at, noAnswer: true}, faultBrownoutBefore)
			<-r.Context().Done()
			localpipeline.HangUp(w)
			return
		case x < f.rate:
			f.note(key, wireEvent{at: at, noAnswer: true}, faultBrownoutAfter)
			// The simulator takes it even though the caller will be gone.
			ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 30*time.Second)
			_, _, _, _ = localpipeline.Forward(ctx, f.client, r, base+r.URL.RequestURI(), body)
			cancel()
			<-r.Context().Done()
			localpipeline.HangUp(w)
			return
		}
	}
	status, hdr, out, err := localpipeline.Forward(r.Context(), f.client, r, base+r.URL.RequestURI(), body)
	f.note(key, wireEvent{at: at, noAnswer: err != nil}, "")
	if err != nil {
		localpipeline.HangUp(w)
		return
	}
	localpipeline.Answer(w, status, hdr, out)
}

// summarize draws the lane's own verdict (see failoverLane) over its
// valid keys: it sets lr's summary line and returns the violations it
// found.
func (l *failoverLane) summarize(ctx context.Context, ln *lane, lr *LaneReport) ([]Violation, error) {
	var vs []Violation
	byProvider := map[string]map[string][]time.Time{} // provider → key → acceptance times
	for name, s := range map[string]*simulator.Simulator{failoverPrimary: l.primary, failoverSecondary: l.secondary} {
		byProvider[name] = map[string][]time.Time{}
		for _, m := range s.Messages() {
			byProvider[name][m.Reference] = append(byProvider[name][m.Reference], m.AcceptedAt)
		}
	}
	wire := map[string]map[string][]wireEvent{failoverPrimary: l.front.wire.eventsOf(), failoverSecondary: l.pool.wire.eventsOf()}
	var (
		keys, both, unsettledWire, ambiguousCalls, settledAmbiguous int
		ledgerFailovers, unsettledLedger, truncated, rows           int
	)
	for _, m := range ln.w.Messages {
		if !m.Valid {
			continue
		}
		keys++
		if len(byProvider[failoverPrimary][m.Key]) > 0 && len(byProvider[failoverSecondary][m.Key]) > 0 {
			both++
		}
		amb, settled, bad := wireVerdict(
			map[string][]time.Time{failoverPrimary: byProvider[failoverPrimary][m.Key], failoverSecondary: byProvider[failoverSecondary][m.Key]},
			map[string][]wireEvent{failoverPrimary: wire[failoverPrimary][m.Key], failoverSecondary: wire[failoverSecondary][m.Key]})
		ambiguousCalls, settledAmbiguous, unsettledWire = ambiguousCalls+amb, settledAmbiguous+settled, unsettledWire+len(bad)
		for _, d := range bad {
			vs = append(vs, Violation{Kind: "failover after an unsettled ambiguous attempt", Key: m.Key, Detail: d})
		}
		rec, state, err := ln.p.Row(ctx, m.Key)
		if err != nil {
			return vs, err
		}
		if state == localpipeline.NoRow {
			continue
		}
		rows++
		changes, badChanges, complete := ledgerVerdict(rec)
		ledgerFailovers += changes
		unsettledLedger += len(badChanges)
		if !complete {
			truncated++
		}
		for _, d := range badChanges {
			vs = append(vs, Violation{Kind: "failover after an unsettled ambiguous attempt", Key: m.Key, Detail: d})
		}
	}
	for i := range vs {
		vs[i].Lane = ln.def.Name
		vs[i].Events = events(ln.p.Logs(), vs[i].Key)
	}
	count := func(name string) int { return len(byProvider[name]) }
	emfFailovers := int(lr.Metrics.Counts[metrics.Failovers])
	lr.Summary = fmt.Sprintf("failover lane: %d delivered twice; %d lost; delivered by %s (primary) %d, by %s (secondary) %d, by both %d; "+
		"failovers %d (EMF Failovers; %d provider changes in %d ledger rows' attempt histories, %d of them truncated); "+
		"%d after an ambiguous attempt that was not first settled against its provider "+
		"(ledger: %d provider changes after an attempt not released; providers' side: %d sends without an answer, %d acceptances elsewhere after one, %d settled by a lookup first); "+
		"schedule: %s",
		lr.DeliveredTwice, lr.Lost, failoverPrimary, count(failoverPrimary), failoverSecondary, count(failoverSecondary), both,
		emfFailovers, ledgerFailovers, rows, truncated,
		unsettledLedger+unsettledWire, unsettledLedger, ambiguousCalls, unsettledWire+settledAmbiguous, settledAmbiguous,
		l.scheduleText())
	return vs, nil
}

// scheduleText describes the schedule as it ran.
func (l *failoverLane) scheduleText() string {
	vis := cmp.Or(l.o.VisibilityTimeout, localpipeline.DefaultVisibilityTimeout)
	f := l.front.faulted()
	l.mu.Lock()
	defer l.mu.Unlock()
	ran := map[string]time.Duration{}
	for i := 0; i+1 < len(l.phases); i++ {
		ran[l.phases[i].name] = l.phases[i+1].at.Sub(l.phases[i].at)
	}
	return fmt.Sprintf("primary outage %s (%s planned; SQS receives of a message: %d × %s visibility), %d sends refused; healthy %s; brownout %s (%s planned), %d sends without an answer (%d taken by the primary)",
		ran["outage"].Round(time.Second), l.outage.Round(time.Second), localpipeline.DefaultMaxReceiveCount, vis, f[faultOutage],
		ran["recovered"].Round(time.Second), ran["brownout"].Round(time.Second), l.brownout.Round(time.Second), f[faultBrownoutBefore]+f[faultBrownoutAfter], f[faultBrownoutAfter])
}

// wireVerdict judges one key from the providers' side: accepted holds,
// per provider, when it accepted the key's message, and wire its calls
// about the key. A provider may take the message only if every earlier
// send of another provider that got no answer (ambiguous to the caller)
// was followed, before, by a lookup at that provider: the attempt was
// settled against its own provider first. It returns the sends without
// an answer, the acceptances elsewhere after one that a lookup settled
// first, and a description of each one that nothing settled.
func wireVerdict(accepted map[string][]time.Time, wire map[string][]wireEvent) (ambiguous, settled int, unsettled []string) {
	for _, evs := range wire {
		for _, e := range evs {
			if !e.lookup && e.noAnswer {
				ambiguous++
			}
		}
	}
	for _, took := range slices.Sorted(maps.Keys(accepted)) {
		for _, at := range accepted[took] {
			for _, other := range slices.Sorted(maps.Keys(wire)) {
				if other == took {
					continue
				}
				evs := wire[other]
				for _, e := range evs {
					if e.lookup || !e.noAnswer || !e.at.Before(at) {
						continue
					}
					if slices.ContainsFunc(evs, func(q wireEvent) bool { return q.lookup && q.at.After(e.at) && q.at.Before(at) }) {
						settled++
						continue
					}
					unsettled = append(unsettled, fmt.Sprintf("%s took it at %s after a send through %s at %s got no answer, with no lookup at %s in between",
						took, at.Format(time.RFC3339Nano), other, e.at.Format(time.RFC3339Nano), other))
				}
			}
		}
	}
	return ambiguous, settled, unsettled
}

// ledgerVerdict judges one row from its attempts (attemptsOf): it
// returns how many times the provider changed from one attempt to the
// next, a description of each change after an attempt that was not
// released (it may have sent), and whether the history was complete.
func ledgerVerdict(rec ledger.Record) (changes int, unsettled []string, complete bool) {
	atts, complete := attemptsOf(rec)
	for i := 1; i < len(atts); i++ {
		if atts[i].provider == atts[i-1].provider {
			continue
		}
		changes++
		if atts[i-1].outcome != "released" {
			unsettled = append(unsettled, fmt.Sprintf("an attempt went through %s after the one before through %s ended %q (history %q, latest attempt %d)",
				atts[i].provider, atts[i-1].provider, atts[i-1].outcome, rec.History, rec.Attempts))
		}
	}
	return changes, unsettled, complete
}

// attempt is one attempt of a ledger row: its provider and how it ended
// ("released", "uncertain", "lease passed"; "" for the latest).
type attempt struct {
	provider, outcome string
}

// attemptsOf returns rec's attempts in order, from its History and its
// latest attempt, and whether the history holds every earlier one
// (ledger.MaxHistory bounds it).
func attemptsOf(rec ledger.Record) ([]attempt, bool) {
	var out []attempt
	first := 0
	for i, h := range rec.History {
		// "2 twilio released: ...", "1 http uncertain: ...", "1 sns lease passed".
		fields := strings.SplitN(h, " ", 3)
		if len(fields) < 3 {
			continue
		}
		if i == 0 {
			first, _ = strconv.Atoi(fields[0])
		}
		outcome := fields[2]
		switch {
		case strings.HasPrefix(outcome, "released"):
			outcome = "released"
		case strings.HasPrefix(outcome, "uncertain"):
			outcome = "uncertain"
		case strings.HasPrefix(outcome, "lease passed"):
			outcome = "lease passed"
		}
		out = append(out, attempt{provider: fields[1], outcome: outcome})
	}
	out = append(out, attempt{provider: rec.Provider})
	return out, len(rec.History) == 0 || first == 1
}
