// Package chaos runs the real local pipeline (package localpipeline: the
// function bootstraps under the Lambda Runtime Interface Emulator,
// DynamoDB Local, SQS on moto_server, the provider simulator) under what
// an at-least-once world does to it, then checks every logical message
// against the simulators' ground truth.
//
// Faults, each at a configurable rate, all planned from one seeded RNG
// (the plan is reproducible from the seed; the interleaving of real
// processes is not):
//
//   - redelivery: 1-3 extra SendMessage copies of a message's body, spread
//     over the run;
//   - concurrent delivery: records of a batch handed at the same moment to
//     a second sender instance (localpipeline.Options.Twin);
//   - crashes: SIGKILL of a sender's or the reconciler's bootstrap at
//     random moments (the emulator restarts it at its next invoke, and the
//     killed invoke fails its batch, whose records reappear after the
//     visibility timeout); simulator latency widens the window in which a
//     provider call is in flight;
//   - provider faults: 5xx/429, timeouts before and after accepting,
//     connection resets, slow answers near the provider timeout, planned
//     permanent rejections (400) and undeliverable messages;
//   - callbacks: duplicated, delayed and reordered;
//   - a DynamoDB error storm (Proxy): throttling errors in bursts, and
//     responses lost after the write happened;
//   - a provider that ignores Idempotency-Key serving one channel (email
//     by default, SENDONCE_HTTP_PROVIDER_IDEMPOTENT=false), so its
//     ambiguous sends go UNCERTAIN and are resolved by lookup.
//
// Then faults stop, the reconciler runs until no row needs attention, the
// queue drains, the dead-letter queue is read, and each valid message must
// be delivered exactly once, FAILED with a reason, or ABANDONED by policy.
package chaos

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/localpipeline"
	"github.com/sendonce/sendonce/internal/provider/registry"
	"github.com/sendonce/sendonce/internal/provider/simulator"
	"github.com/sendonce/sendonce/internal/sender"
)

// Options configures a chaos run. Zero rates turn a fault off; Defaults
// returns the standard mix.
type Options struct {
	// DynamoDBEndpoint, MotoEndpoint and RIE locate the emulators (see
	// localpipeline.Options).
	DynamoDBEndpoint, MotoEndpoint, RIE string

	// N is the number of valid logical messages; Invalid the number of
	// invalid bodies added (they must reach the dead-letter queue).
	N, Invalid int
	// Seed plans every fault.
	Seed uint64
	// Instances is the number of sender instances.
	Instances int

	// Redeliver is the fraction of messages sent 1-3 extra times, the
	// copies spread over RedeliverSpread.
	Redeliver       float64
	RedeliverSpread time.Duration
	// Concurrent is the probability that a batch also goes, in part, to a
	// second instance at the same moment.
	Concurrent float64
	// CrashEvery is the mean interval between two SIGKILLs; ReconcilerShare
	// the fraction of them aimed at the reconciler.
	CrashEvery      time.Duration
	ReconcilerShare float64

	// ProviderFaults are drawn per send by both simulators.
	ProviderFaults simulator.RandomFaults
	// Slow is the fraction of messages whose first send is answered after
	// 0.7-1.3 times the provider timeout.
	Slow float64
	// Permanent and Undeliverable are the fractions of messages whose
	// first send is rejected (400) or accepted but never delivered.
	Permanent, Undeliverable float64
	// Latency and Jitter delay every provider request.
	Latency, Jitter time.Duration
	// Callbacks configures the simulators' callbacks (duplicates, delay,
	// reorder).
	Callbacks simulator.CallbackOptions
	// Storm is the DynamoDB error storm.
	Storm StormOptions
	// LookupOnly names the channel served by a provider that ignores
	// Idempotency-Key ("" for none: both channels then go to a provider
	// that honours it and the adapter relies on it).
	LookupOnly string

	// ProviderTimeout, Settle, VisibilityTimeout and ClaimTimeout are the
	// pipeline's (localpipeline defaults when zero).
	ProviderTimeout, Settle, VisibilityTimeout, ClaimTimeout time.Duration
	// FaultWindow bounds the fault phase; Timeout the whole run.
	FaultWindow, Timeout time.Duration

	// Progress receives progress lines; nil discards.
	Progress io.Writer
}

// Defaults returns the standard mix for n messages and seed.
func Defaults(n int, seed uint64) Options {
	return Options{
		N: n, Seed: seed, Invalid: max(3, n/200), Instances: 4,
		Redeliver: 0.15, RedeliverSpread: max(5*time.Second, time.Duration(n)*8*time.Millisecond),
		Concurrent: 0.10, CrashEvery: 3 * time.Second, ReconcilerShare: 0.15,
		ProviderFaults: simulator.RandomFaults{
			StatusRate: 0.04, Statuses: []int{500, 502, 503, 429},
			TimeoutBeforeRate: 0.01, TimeoutAfterRate: 0.015, ResetBeforeRate: 0.005, ResetAfterRate: 0.01,
		},
		Slow: 0.02, Permanent: 0.015, Undeliverable: 0.01,
		Latency: 10 * time.Millisecond, Jitter: 60 * time.Millisecond,
		Callbacks:   simulator.CallbackOptions{Duplicates: 1, Reorder: true, Delay: 5 * time.Millisecond, Workers: 8, Queue: 8 * n},
		Storm:       StormOptions{BurstRate: 0.15, BurstFailure: 0.5, DropRate: 0.01},
		LookupOnly:  "email",
		FaultWindow: max(30*time.Second, time.Duration(n)*100*time.Millisecond),
		Timeout:     max(3*time.Minute, time.Duration(n)*250*time.Millisecond),
	}
}

// Violation is one broken guarantee.
type Violation struct {
	// Kind is "delivered twice", "lost", "contradiction", "unresolved",
	// "invalid not dead-lettered", "not drained", "address in logs" or
	// "invalid EMF".
	Kind string
	// Key is the message's idempotency key, if the violation has one.
	Key string
	// Detail explains it; Events are the functions' log lines about Key.
	Detail string
	Events []string
}

// FaultCount is one row of the fault table.
type FaultCount struct {
	Fault              string
	Injected, Observed int
	// How says where each number comes from.
	How string
}

// Report is what a chaos run came to.
type Report struct {
	Seed               uint64
	N, Invalid, Copies int
	Elapsed, FaultTime time.Duration
	Drained            bool

	// Faults lists each fault injected and what the pipeline observed.
	Faults []FaultCount
	// DeliveredOnce counts valid messages the providers delivered once and
	// the ledger holds SENT; Failed counts FAILED by reason; Abandoned
	// counts ABANDONED rows, AbandonedDelivered those the provider had
	// nonetheless accepted once.
	DeliveredOnce      int
	Failed             map[string]int
	Abandoned          int
	AbandonedDelivered int
	// States counts every valid message's final ledger state.
	States map[ledger.State]int
	// DeadLettered counts invalid bodies on the dead-letter queue;
	// Redriven valid messages moved there by maxReceiveCount (each must
	// still have been resolved from its ledger row).
	DeadLettered, Redriven, RedrivenResolved int

	Metrics                        localpipeline.MetricTotals
	Poller                         localpipeline.PollerStats
	ReconcileRuns, ReconcileErrors int

	Violations []Violation

	deliveryFailed, throttleLogged int
}

// OK reports whether no guarantee was broken.
func (r Report) OK() bool { return len(r.Violations) == 0 }

// Run starts a pipeline under o, runs the workload through it with faults,
// reconciles, checks, and stops the pipeline. It returns an error only
// when the run could not be carried out; broken guarantees are in the
// report.
func Run(ctx context.Context, o Options) (Report, error) {
	o.Instances = cmp.Or(o.Instances, localpipeline.DefaultSenderInstances)
	o.Timeout = cmp.Or(o.Timeout, 5*time.Minute)
	o.FaultWindow = cmp.Or(o.FaultWindow, o.Timeout/2)
	o.ProviderTimeout = cmp.Or(o.ProviderTimeout, localpipeline.DefaultProviderTimeout)
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.N <= 0 {
		return Report{}, errors.New("chaos: N must be positive")
	}
	master := rand.New(rand.NewPCG(o.Seed, o.Seed^0xc4a05))
	seeds := func() uint64 { return master.Uint64() }
	proxySeed, crashSeed, twinSeed, simSeed, sim2Seed, workSeed, planSeed := seeds(), seeds(), seeds(), seeds(), seeds(), seeds(), seeds()

	// The DynamoDB proxy and the provider router listen first: their URLs
	// go into the functions' environment.
	proxy := NewProxy(o.DynamoDBEndpoint, o.Storm, proxySeed)
	proxyURL, stopProxy, err := serve(proxy)
	if err != nil {
		return Report{}, err
	}
	defer stopProxy()
	router := NewRouter()
	routerURL, stopRouter, err := serve(router)
	if err != nil {
		return Report{}, err
	}
	defer stopRouter()

	var twinOn atomic.Bool
	var twinMu sync.Mutex
	twinRNG := rand.New(rand.NewPCG(twinSeed, twinSeed^0x7a1))
	env := map[string]string{
		"AWS_ENDPOINT_URL_DYNAMODB": proxyURL,
		registry.EnvHTTPURL:         routerURL,
	}
	if o.LookupOnly != "" {
		env[registry.EnvHTTPIdempotent] = "false"
	}
	p, err := localpipeline.Start(ctx, localpipeline.Options{
		DynamoDBEndpoint: o.DynamoDBEndpoint, MotoEndpoint: o.MotoEndpoint, RIE: o.RIE,
		SenderInstances: o.Instances, VisibilityTimeout: o.VisibilityTimeout, ClaimTimeout: o.ClaimTimeout,
		ProviderTimeout: o.ProviderTimeout, Settle: o.Settle,
		Env: env,
		Simulator: simulator.Options{
			Seed: simSeed, Latency: o.Latency, Jitter: o.Jitter, Callbacks: o.Callbacks,
		},
		Twin: func(batch []types.Message) []types.Message {
			if !twinOn.Load() {
				return nil
			}
			twinMu.Lock()
			defer twinMu.Unlock()
			if twinRNG.Float64() >= o.Concurrent {
				return nil
			}
			k := 1 + twinRNG.IntN(len(batch))
			idx := twinRNG.Perm(len(batch))[:k]
			out := make([]types.Message, 0, k)
			for _, i := range idx {
				out = append(out, batch[i])
			}
			return out
		},
		Progress: o.Progress,
	})
	if err != nil {
		return Report{}, err
	}
	defer func() { _ = p.Close() }()

	sims := map[string]*simulator.Simulator{"sms": p.Simulator(), "email": p.Simulator()}
	router.Route("sms", p.SimulatorURL())
	router.Route("email", p.SimulatorURL())
	if o.LookupOnly != "" {
		sim2, url2 := p.NewSimulator(simulator.Options{
			Seed: sim2Seed, Latency: o.Latency, Jitter: o.Jitter, Callbacks: o.Callbacks, IdempotencyDisabled: true,
		})
		sims[o.LookupOnly] = sim2
		router.Route(o.LookupOnly, url2)
	}
	distinct := distinctSims(sims)

	// The workload and its plan.
	w := localpipeline.NewWorkload(localpipeline.WorkloadOptions{
		N: o.N, Seed: workSeed, Tenant: "chaos", Permanent: o.Permanent, Undeliverable: o.Undeliverable, Invalid: o.Invalid,
	})
	plan := rand.New(rand.NewPCG(planSeed, planSeed^0x91a))
	slow := 0
	for _, m := range w.Messages {
		if m.Fault.Kind != "" {
			if err := sims[m.Channel].AddFault(m.Fault); err != nil {
				return Report{}, err
			}
			continue
		}
		if m.Valid && plan.Float64() < o.Slow {
			d := time.Duration((0.7 + 0.6*plan.Float64()) * float64(o.ProviderTimeout))
			if err := sims[m.Channel].AddFault(simulator.Fault{Kind: simulator.FaultLatency, Delay: d, Reference: m.Key, Count: 1}); err != nil {
				return Report{}, err
			}
			slow++
		}
	}
	type copyAt struct {
		at   time.Duration
		body string
	}
	var copies []copyAt
	for _, m := range w.Messages {
		if m.Valid && plan.Float64() < o.Redeliver {
			for range 1 + plan.IntN(3) {
				copies = append(copies, copyAt{time.Duration(plan.Float64() * float64(o.RedeliverSpread)), m.Body})
			}
		}
	}
	slices.SortFunc(copies, func(a, b copyAt) int { return cmp.Compare(a.at, b.at) })
	for _, s := range distinct {
		if err := s.SetRandom(o.ProviderFaults); err != nil {
			return Report{}, err
		}
	}

	// Fault phase.
	start := time.Now()
	runCtx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	proxy.Enable(true)
	twinOn.Store(true)
	crasher := NewCrasher(p.Senders(), p.ReconcilerInstance(), o.CrashEvery, o.ReconcilerShare, router.InFlight, crashSeed)
	crashCtx, stopCrash := context.WithCancel(runCtx)
	var crashWG sync.WaitGroup
	crashWG.Add(1)
	go func() { defer crashWG.Done(); crasher.Run(crashCtx) }()
	defer stopCrash()

	if err := p.Enqueue(runCtx, w.First...); err != nil {
		return Report{}, err
	}
	fmt.Fprintf(o.Progress, "[%5.1fs] enqueued %d messages (%d valid, %d invalid); %d redelivered copies over %s; faults on\n",
		time.Since(start).Seconds(), len(w.First), o.N, o.Invalid, len(copies), o.RedeliverSpread)
	// Copies are timed from the end of the first wave (moto takes a while
	// to accept thousands of messages while the pollers drain them).
	wave := time.Now()
	lastProgress := wave
	sent := 0
	quiet := 0
	for runCtx.Err() == nil {
		sleepCtx(runCtx, 250*time.Millisecond)
		var batch []string
		for sent < len(copies) && copies[sent].at <= time.Since(wave) {
			batch = append(batch, copies[sent].body)
			sent++
		}
		if len(batch) > 0 {
			if err := p.Enqueue(runCtx, batch...); err != nil && runCtx.Err() == nil {
				return Report{}, err
			}
		}
		vis, inflight, err := p.QueueDepth(runCtx)
		if err != nil {
			continue
		}
		if sent == len(copies) && vis+inflight == 0 {
			quiet++
		} else {
			quiet = 0
		}
		if quiet >= 2 || time.Since(start) >= o.FaultWindow {
			break
		}
		if time.Since(lastProgress) >= 5*time.Second {
			lastProgress = time.Now()
			fmt.Fprintf(o.Progress, "[%5.1fs] faults on: queue %d visible, %d in flight; crashes %+v\n", time.Since(start).Seconds(), vis, inflight, crasher.Stats())
		}
	}
	for sent < len(copies) { // a fault window shorter than the spread
		if err := p.Enqueue(runCtx, copies[sent].body); err != nil {
			break
		}
		sent++
	}

	// Calm phase: no more faults.
	stopCrash()
	crashWG.Wait()
	crasher.Observe()
	twinOn.Store(false)
	proxy.Enable(false)
	for _, s := range distinct {
		s.ClearFaults()
		s.SetLatency(0, 0)
	}
	faultTime := time.Since(start)
	fmt.Fprintf(o.Progress, "[%5.1fs] faults off: reconciling and draining\n", faultTime.Seconds())
	drained := false
	quiet = 0
	for runCtx.Err() == nil {
		vis, inflight, err := p.QueueDepth(runCtx)
		if err != nil {
			continue
		}
		rows, err := p.Attention(runCtx)
		if err != nil {
			continue
		}
		if len(rows) > 0 {
			_, _ = p.Reconcile(runCtx)
		}
		if vis+inflight == 0 && len(rows) == 0 {
			quiet++
		} else {
			quiet = 0
			fmt.Fprintf(o.Progress, "[%5.1fs] queue %d visible, %d in flight; %d rows need attention\n", time.Since(start).Seconds(), vis, inflight, len(rows))
		}
		if quiet >= 2 {
			drained = true
			break
		}
		sleepCtx(runCtx, time.Second)
	}
	crasher.Observe()
	for _, s := range distinct {
		waitCallbacks(runCtx, s, o.Callbacks.Duplicates)
	}
	fmt.Fprintf(o.Progress, "[%5.1fs] %s\n", time.Since(start).Seconds(), map[bool]string{true: "drained", false: "TIMED OUT"}[drained])

	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer rcancel()
	rep, err := check(rctx, p, w, sims, distinct)
	rep.Seed, rep.N, rep.Invalid, rep.Copies = o.Seed, o.N, o.Invalid, len(w.First)+len(copies)
	rep.Elapsed, rep.FaultTime, rep.Drained = time.Since(start), faultTime, drained
	if !drained {
		rep.Violations = append([]Violation{{Kind: "not drained", Detail: "the queue or the attention index was not empty before the timeout"}}, rep.Violations...)
	}
	rep.Faults = faultTable(rep, len(copies), slow, crasher.Stats(), proxy.Stats(), router, distinct, o)
	return rep, err
}

func distinctSims(m map[string]*simulator.Simulator) []*simulator.Simulator {
	var out []*simulator.Simulator
	for _, ch := range []string{"sms", "email"} {
		if s := m[ch]; s != nil && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// serve serves h on a loopback port.
func serve(h http.Handler) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("chaos: listen: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String(), func() { _ = srv.Close() }, nil
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// waitCallbacks waits (bounded by ctx and a minute) until s has posted
// every callback of every accepted message.
func waitCallbacks(ctx context.Context, s *simulator.Simulator, dups int) {
	per := 2 * (1 + max(dups, 0))
	deadline := time.Now().Add(time.Minute)
	for ctx.Err() == nil && time.Now().Before(deadline) {
		st := s.Stats()
		if st.CallbacksSent+st.CallbacksFailed+st.CallbacksDropped*per >= st.Accepted*per {
			return
		}
		sleepCtx(ctx, 100*time.Millisecond)
	}
}

// check compares every logical message with the ground truth.
func check(ctx context.Context, p *localpipeline.Pipeline, w localpipeline.Workload, sims map[string]*simulator.Simulator, distinct []*simulator.Simulator) (Report, error) {
	rep := Report{Failed: map[string]int{}, States: map[ledger.State]int{}, Poller: p.Stats()}
	delivered := map[string]int{}
	status := map[string]string{}
	for _, s := range distinct {
		for _, m := range s.Messages() {
			delivered[m.Reference]++
			status[m.Reference] = string(m.Status)
		}
	}
	logs := p.Logs()
	var all []string
	for _, l := range logs {
		all = append(all, l)
	}
	events := func(key string) []string {
		var out []string
		for name, l := range logs {
			for _, line := range strings.Split(l, "\n") {
				if strings.Contains(line, key) && !strings.Contains(line, `"_aws"`) {
					out = append(out, name+": "+line)
				}
			}
		}
		return out
	}
	var errs []error
	valid := map[string]bool{}
	for _, m := range w.Messages {
		if !m.Valid {
			continue
		}
		valid[m.Key] = true
		n := delivered[m.Key]
		rec, err := p.Ledger().Get(ctx, m.Key)
		if err != nil && !errors.Is(err, ledger.ErrNotFound) {
			errs = append(errs, err)
			continue
		}
		state := rec.State
		if err != nil {
			state = "NO ROW"
		}
		rep.States[state]++
		v := Violation{Key: m.Key}
		switch {
		case n > 1:
			v.Kind, v.Detail = "delivered twice", fmt.Sprintf("%s delivered %d times (ledger %s)", m.Channel, n, state)
		case !state.Final() && n == 0:
			v.Kind, v.Detail = "lost", fmt.Sprintf("%s, never delivered", state)
		case !state.Final():
			v.Kind, v.Detail = "unresolved", fmt.Sprintf("%s, but delivered", state)
		case state == ledger.StateSent && n == 0:
			v.Kind, v.Detail = "lost", "SENT in the ledger, but no provider accepted it"
		case state == ledger.StateFailed && n == 1 && status[m.Key] != "failed":
			v.Kind, v.Detail = "contradiction", fmt.Sprintf("FAILED (%s), but the provider accepted it (status %s)", rec.Reason, status[m.Key])
		case state == ledger.StateFailed && rec.Reason == "":
			v.Kind, v.Detail = "contradiction", "FAILED without a reason"
		}
		if v.Kind != "" {
			v.Events = events(m.Key)
			rep.Violations = append(rep.Violations, v)
		}
		if rec.DeliveryStatus == "failed" || rec.DeliveryStatus == "undelivered" {
			rep.deliveryFailed++
		}
		switch state {
		case ledger.StateSent:
			if n == 1 {
				rep.DeliveredOnce++
			}
		case ledger.StateFailed:
			rep.Failed[rec.Reason]++
		case ledger.StateAbandoned:
			rep.Abandoned++
			if n == 1 {
				rep.AbandonedDelivered++
			}
		}
	}
	for ref, n := range delivered {
		if !valid[ref] {
			rep.Violations = append(rep.Violations, Violation{Kind: "delivered twice", Key: ref, Detail: fmt.Sprintf("delivered %d times, not a workload message", n)})
		}
	}

	dls, err := p.DrainDLQ(ctx)
	if err != nil {
		errs = append(errs, err)
	}
	got := map[string]int{}
	for _, d := range dls {
		if _, ok := d.Attributes[sender.AttrErrorReason]; ok {
			got[d.Body]++
			continue
		}
		rep.Redriven++
		for _, m := range w.Messages {
			if m.Body == d.Body && m.Valid {
				if rec, err := p.Ledger().Get(ctx, m.Key); err == nil && rec.State.Final() {
					rep.RedrivenResolved++
				}
				break
			}
		}
	}
	for _, m := range w.Messages {
		if m.Valid {
			continue
		}
		if got[m.Body] > 0 {
			rep.DeadLettered++
			continue
		}
		rep.Violations = append(rep.Violations, Violation{Kind: "invalid not dead-lettered", Detail: m.Body})
	}
	for name, l := range logs {
		for _, a := range w.Addresses() {
			if strings.Contains(l, a) {
				rep.Violations = append(rep.Violations, Violation{Kind: "address in logs", Detail: name + ": " + a})
			}
		}
	}
	for _, l := range all {
		rep.throttleLogged += strings.Count(l, "ProvisionedThroughputExceeded") + strings.Count(l, "ThrottlingException")
	}
	rep.Metrics = localpipeline.ParseEMF(all...)
	for _, l := range rep.Metrics.Invalid {
		rep.Violations = append(rep.Violations, Violation{Kind: "invalid EMF", Detail: l})
	}
	_, rep.ReconcileRuns, rep.ReconcileErrors = p.ReconcileTotals()
	slices.SortStableFunc(rep.Violations, func(a, b Violation) int { return cmp.Compare(a.Kind+a.Key, b.Kind+b.Key) })
	return rep, errors.Join(errs...)
}
