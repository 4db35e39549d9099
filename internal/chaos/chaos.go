// Package chaos runs the real local pipeline (package localpipeline: the
// function bootstraps under the Lambda Runtime Interface Emulator,
// DynamoDB Local, SQS on moto_server) through every provider adapter,
// each against its real or faithful counterpart (the adapter table,
// Lanes), under what an at-least-once world does to it, then checks every
// logical message against each counterpart's record of what it accepted.
//
// Chaos proves only what takes real processes to show: SIGKILL under the
// emulator, the AWS SDK's real retries, real SQS redelivery and redrive,
// moto_server's and the SMTP server's actual behaviour. Protocol
// properties under every interleaving (failover, content lookups,
// template versions) are the deterministic simulation's
// (internal/simtest).
//
// Each lane is one adapter with its own pipeline (table, queues,
// functions):
//
//   - http: the generic HTTP adapter (sms and email) against the
//     provider simulator, which ignores Idempotency-Key: every ambiguous
//     send is settled by lookup;
//   - sns and ses: the SNS adapter (SMS) and the SES adapter (email)
//     against moto_server, read back from /moto-api/data.json (one
//     motoLane each, through a front that injects the faults);
//   - smtp: the SMTP adapter against a real SMTP server (emersion/go-smtp)
//     that sometimes stalls after DATA.
//
// Faults, all planned from one seeded RNG (the plan is reproducible from
// the seed; the interleaving of real processes is not):
//
//   - redelivery: 1-3 extra SendMessage copies of a message's body, a few
//     seconds after it was first enqueued;
//   - concurrent delivery: records of a batch handed at the same moment to
//     a second sender instance (localpipeline.Options.Twin);
//   - crashes: SIGKILL of a sender's or a reconciler's bootstrap at random
//     moments (the emulator restarts it at its next invoke, and the
//     killed invoke fails its batch);
//   - provider faults per counterpart: refusals (429/5xx/451), no answer
//     before or after accepting, an error answer after accepting, slow
//     answers near the provider timeout, planned permanent rejections;
//   - an outage: every send of every lane refused (429/5xx) for longer
//     than the reconciler's old give-up budget (5 attempts);
//   - callbacks (http): duplicated, delayed and reordered;
//   - DynamoDB (ddbfront.Front): throttling in bursts, answers lost after the
//     write happened, answers of Claim, TakeOver and Release lost for good
//     (the SDK's retries dropped too), and the worker killed right after
//     such a lost answer, before it could release.
//
// The queue is fed as the pollers drain it (localpipeline.Feeder), its
// depth bounded. Then faults stop, every lane's reconciler runs until no
// row needs attention and its queue is drained (valid messages SQS moved
// to the dead-letter queue are redriven, as an operator would), the
// dead-letter queues are read, and the verdict is drawn per lane
// (Report.Lanes).
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
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sendonce/sendonce/internal/ddbfront"
	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/localpipeline"
	"github.com/sendonce/sendonce/internal/provider/simulator"
	"github.com/sendonce/sendonce/internal/rie"
	"github.com/sendonce/sendonce/internal/sender"
)

// Options configures a chaos run. Zero rates turn a fault off; Defaults
// returns the standard mix.
type Options struct {
	// DynamoDBEndpoint, MotoEndpoint and RIE locate the emulators (see
	// localpipeline.Options).
	DynamoDBEndpoint, MotoEndpoint, RIE string
	// Bootstraps are the functions' bootstraps, built beforehand; Run
	// builds them (within its ctx) when they are unset.
	Bootstraps localpipeline.Bootstraps

	// N is the number of valid logical messages over every lane; Invalid
	// the number of invalid bodies added to the http lane (they must
	// reach the dead-letter queue).
	N, Invalid int
	// Seed plans every fault.
	Seed uint64
	// Lanes names the lanes to run (LaneNames); empty means all.
	Lanes []string

	// Redeliver is the fraction of messages sent 1-3 extra times, each
	// copy up to RedeliverSpread after the message was first enqueued.
	Redeliver       float64
	RedeliverSpread time.Duration
	// Concurrent is the probability that a batch also goes, in part, to a
	// second instance at the same moment.
	Concurrent float64
	// CrashEvery is the mean interval between two SIGKILLs (15 % of them
	// aimed at a reconciler).
	CrashEvery time.Duration

	// ProviderFaults are drawn per send by the HTTP simulators;
	// SendFaults by the other counterparts.
	ProviderFaults simulator.RandomFaults
	SendFaults     SendFaults
	// Slow is the fraction of messages whose first send is answered after
	// 0.7-1.3 times the provider timeout.
	Slow float64
	// Permanent and Undeliverable are the fractions of messages whose
	// first send is rejected or (http only) accepted but never delivered.
	Permanent, Undeliverable float64
	// Latency and Jitter delay every HTTP simulator request.
	Latency, Jitter time.Duration
	// Callbacks configures the HTTP simulators' callbacks.
	Callbacks simulator.CallbackOptions
	// Storm is the DynamoDB error storm.
	Storm ddbfront.Storm
	// Outage is how long every send of every lane is refused, starting
	// OutageAt after the faults start (zero: no outage).
	Outage, OutageAt time.Duration

	// FaultWindow bounds the fault phase; Timeout the whole run.
	FaultWindow, Timeout time.Duration

	// Progress receives progress lines (one at least every ProgressEvery,
	// default 10s); nil discards.
	Progress      io.Writer
	ProgressEvery time.Duration

	// KeepResources leaves every lane's table and queues in the emulators
	// after the run (localpipeline.Options.KeepResources), the invalid
	// requests the check read off a dead-letter queue put back on it,
	// for a person to look at (make demo KEEP=1; LaneReport names them).
	KeepResources bool
}

// Defaults returns the standard mix for n messages and seed.
func Defaults(n int, seed uint64) Options {
	return Options{
		N: n, Seed: seed, Invalid: max(3, n/400),
		Redeliver: 0.15, RedeliverSpread: 8 * time.Second,
		Concurrent: 0.10, CrashEvery: 3 * time.Second,
		ProviderFaults: simulator.RandomFaults{
			StatusRate: 0.04, Statuses: []int{500, 502, 503, 429},
			TimeoutBeforeRate: 0.01, TimeoutAfterRate: 0.015, ResetBeforeRate: 0.005, ResetAfterRate: 0.01,
		},
		SendFaults: SendFaults{Transient: 0.04, Before: 0.01, After: 0.015, AfterError: 0.005},
		Slow:       0.02, Permanent: 0.015, Undeliverable: 0.01,
		Latency: 10 * time.Millisecond, Jitter: 60 * time.Millisecond,
		Callbacks: simulator.CallbackOptions{Duplicates: 1, Reorder: true, Delay: 5 * time.Millisecond, Workers: 8},
		Storm: ddbfront.Storm{BurstRate: 0.15, BurstFailure: 0.5, DropRate: 0.01,
			Lost: map[string]float64{"claim": 0.01, "takeover": 0.05, "release": 0.05}, LostKill: 0.3},
		Outage: 30 * time.Second, OutageAt: 10 * time.Second,
		FaultWindow: max(40*time.Second, time.Duration(n)*60*time.Millisecond),
		// A bound, not a target: on a 2-core machine shared with other
		// jobs moto_server and DynamoDB Local answer several times slower.
		Timeout: max(8*time.Minute, time.Duration(n)*150*time.Millisecond),
	}
}

// maxDepth bounds each lane's queue depth while it is fed: moto_server's
// SQS scans a queue's every message on each receive and depth query,
// single-threaded; 60 keeps a lane's pollers fed (batches of 10) at about
// a third of moto's cost at 200.
const maxDepth = 60

// Violation is one broken guarantee.
type Violation struct {
	// Lane is the adapter's lane ("" for the run as a whole).
	Lane string
	// Kind is "delivered twice", "lost", "abandoned, never accepted",
	// "contradiction", "unresolved", "invalid not dead-lettered", "not
	// drained", "address in logs" or "invalid EMF".
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

// lane is one running lane.
type lane struct {
	def   Lane
	cp    Counterpart
	p     *localpipeline.Pipeline
	w     localpipeline.Workload
	feed  *localpipeline.Feeder
	first map[string]int // body → index in the feeder

	copies   []copyAt // sorted by delay
	copyNext []int    // per copy: 0 pending, 1 added (the feeding loop's)
	nCopies  atomic.Int64
	slow     int
	drained  bool
	// busy: the feeding loop still has work, or the queue is not empty.
	busy atomic.Bool
	// flush makes every copy due at once (the calm phase).
	flush atomic.Bool
	// deadLetters are the invalid bodies (with their reason) the calm
	// phase took off the dead-letter queue; redriven counts the valid
	// messages it found there and sent back to the queue.
	deadLetters []localpipeline.DeadLetter
	redriven    int
	// kept are the invalid bodies the check found dead-lettered, to put
	// back with Options.KeepResources.
	kept []localpipeline.DeadLetter
}

type copyAt struct {
	orig  int
	delay time.Duration
	body  string
}

// Run starts one pipeline per lane under o, runs each lane's workload
// through it with faults, reconciles, checks, and stops the pipelines. It
// returns an error only when the run could not be carried out; broken
// guarantees are in the report.
func Run(ctx context.Context, o Options) (rep Report, err error) {
	o.Timeout = cmp.Or(o.Timeout, 5*time.Minute)
	o.FaultWindow = cmp.Or(o.FaultWindow, o.Timeout/2)
	o.ProgressEvery = cmp.Or(o.ProgressEvery, 10*time.Second)
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.N <= 0 {
		return Report{}, errors.New("chaos: N must be positive")
	}
	defs, err := selectLanes(o.Lanes)
	if err != nil {
		return Report{}, err
	}
	master := rand.New(rand.NewPCG(o.Seed, o.Seed^0xc4a05))
	seeds := func() uint64 { return master.Uint64() }
	proxySeed, crashSeed, twinSeed, planSeed := seeds(), seeds(), seeds(), seeds()
	start := time.Now()
	logf := func(format string, args ...any) {
		fmt.Fprintf(o.Progress, "[%6.1fs] "+format+"\n", append([]any{time.Since(start).Seconds()}, args...)...)
	}

	// Bootstraps are built once for every lane, unless given.
	boot := o.Bootstraps
	if boot == (localpipeline.Bootstraps{}) {
		dir, err := os.MkdirTemp("", "sendonce-chaos-")
		if err != nil {
			return Report{}, fmt.Errorf("chaos: %w", err)
		}
		defer os.RemoveAll(dir)
		logf("building ./functions/sender, webhook, reconciler")
		if boot, err = localpipeline.BuildBootstraps(ctx, dir); err != nil {
			return Report{}, err
		}
	}

	proxy, err := ddbfront.New(o.DynamoDBEndpoint, ddbfront.Options{Storm: o.Storm, Seed: proxySeed})
	if err != nil {
		return Report{}, err
	}
	defer proxy.Close()
	sqsFront, err := NewSQSFront(o.MotoEndpoint)
	if err != nil {
		return Report{}, fmt.Errorf("chaos: moto_server endpoint: %w", err)
	}
	sqsURL, stopFront, err := serve(sqsFront)
	if err != nil {
		return Report{}, err
	}
	defer stopFront()
	var instMu sync.Mutex
	instances := map[string]*rie.Instance{} // proxy tag → instance
	var twinOn atomic.Bool
	var twinMu sync.Mutex
	twinRNG := rand.New(rand.NewPCG(twinSeed, twinSeed^0x7a1))
	twin := func(batch []types.Message) []types.Message {
		if !twinOn.Load() {
			return nil
		}
		twinMu.Lock()
		defer twinMu.Unlock()
		if twinRNG.Float64() >= o.Concurrent {
			return nil
		}
		k := 1 + twinRNG.IntN(len(batch))
		out := make([]types.Message, 0, k)
		for _, i := range twinRNG.Perm(len(batch))[:k] {
			out = append(out, batch[i])
		}
		return out
	}

	// One pipeline per lane.
	var lanes []*lane
	defer func() {
		for _, l := range lanes {
			if l.p != nil {
				_ = l.p.Close()
			}
			l.cp.Close()
		}
	}()
	share := 0.0
	for _, d := range defs {
		share += d.Share
	}
	left := o.N
	for i, d := range defs {
		n := int(float64(o.N)*d.Share/share + 0.5)
		if i == len(defs)-1 {
			n = left
		}
		n = max(1, min(n, left))
		left -= n
		l, err := startLane(ctx, o, d, n, i, seeds(), boot, proxy, sqsURL, twin, func(tag string, inst *rie.Instance) {
			instMu.Lock()
			instances[tag] = inst
			instMu.Unlock()
		})
		if l != nil {
			lanes = append(lanes, l)
		}
		if err != nil {
			return Report{}, err
		}
		logf("lane %s: %d messages %v, %d sender instances, table %s", d.Name, n, d.Channels, d.Instances, l.p.Table)
	}

	// The plan: slow first answers, planned rejections, redelivered copies.
	plan := rand.New(rand.NewPCG(planSeed, planSeed^0x91a))
	for _, l := range lanes {
		for _, m := range l.w.Messages {
			var slow time.Duration
			if m.Valid && m.Fault.Kind == "" && plan.Float64() < o.Slow {
				slow = time.Duration((0.7 + 0.6*plan.Float64()) * float64(localpipeline.DefaultProviderTimeout))
				l.slow++
			}
			if m.Valid || m.Fault.Kind != "" {
				l.cp.Plan(m, slow)
			}
		}
		for _, m := range l.w.Messages {
			if m.Valid && plan.Float64() < o.Redeliver {
				for range 1 + plan.IntN(3) {
					l.copies = append(l.copies, copyAt{orig: l.first[m.Body], delay: time.Duration(plan.Float64() * float64(o.RedeliverSpread)), body: m.Body})
				}
			}
		}
		slices.SortStableFunc(l.copies, func(a, b copyAt) int { return cmp.Compare(a.delay, b.delay) })
		l.copyNext = make([]int, len(l.copies))
	}

	// Fault phase.
	runCtx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	var senders, reconcilers []*rie.Instance
	for _, l := range lanes {
		senders = append(senders, l.p.Senders()...)
		reconcilers = append(reconcilers, l.p.ReconcilerInstance())
		l.cp.SetFaults(faultsOn)
	}
	crasher := NewCrasher(senders, reconcilers, o.CrashEvery, crashSeed)
	crasher.OnKill = func(inst *rie.Instance) {
		instMu.Lock()
		defer instMu.Unlock()
		for tag, in := range instances {
			if in == inst {
				proxy.Killed(tag)
			}
		}
	}
	proxy.Kill = func(tag string) bool {
		instMu.Lock()
		inst := instances[tag]
		instMu.Unlock()
		return inst != nil && crasher.Kill(inst)
	}
	proxy.Enable(true)
	twinOn.Store(true)
	faultStart := time.Now()
	outageDone := func() bool { return o.Outage <= 0 || time.Since(faultStart) > o.OutageAt+o.Outage+2*time.Second }
	crashCtx, stopCrash := context.WithCancel(runCtx)
	var bg, faultWG sync.WaitGroup
	faultWG.Go(func() { crasher.Run(crashCtx) })
	defer stopCrash()
	var outageRan atomic.Bool
	if o.Outage > 0 {
		faultWG.Go(func() {
			localpipeline.Sleep(crashCtx, o.OutageAt)
			if crashCtx.Err() != nil {
				return
			}
			outageRan.Store(true)
			logf("outage: every send of every lane refused for %s", o.Outage)
			for _, l := range lanes {
				l.cp.SetFaults(outage)
			}
			localpipeline.Sleep(crashCtx, o.Outage)
			for _, l := range lanes {
				l.cp.SetFaults(faultsOn)
			}
			logf("outage over")
		})
	}
	var phase atomic.Value
	phase.Store("faults on")
	progCtx, stopProgress := context.WithCancel(runCtx)
	defer stopProgress()
	bg.Go(func() { // a progress line every ProgressEvery, whatever the phase
		localpipeline.Every(progCtx, o.ProgressEvery, func() {
			logf("%s | %s | faults: %s", phase.Load(), laneProgress(progCtx, lanes), faultsSoFar(lanes, proxy, crasher))
		})
	})
	// Each lane is fed by its own loop: a slow SendMessageBatch on one
	// queue does not hold the others back.
	feedCtx, stopFeed := context.WithCancel(runCtx)
	defer stopFeed()
	var feedWG sync.WaitGroup
	for _, l := range lanes {
		l.busy.Store(true)
		feedWG.Go(func() { l.feedLoop(feedCtx) })
	}
	quiet := 0
	for runCtx.Err() == nil {
		localpipeline.Sleep(runCtx, time.Second)
		busy := false
		for _, l := range lanes {
			busy = busy || l.busy.Load()
		}
		if busy {
			quiet = 0
		} else {
			quiet++
		}
		if quiet >= 2 && outageDone() || time.Since(faultStart) >= o.FaultWindow && (!outageRan.Load() || outageDone()) {
			break
		}
	}

	// Calm phase: no more faults; the feeding loops go on with the rest
	// of the backlog, every copy now due.
	for _, l := range lanes {
		l.flush.Store(true)
	}
	stopCrash()
	faultWG.Wait()
	phase.Store("calm")
	twinOn.Store(false)
	proxy.Enable(false)
	for _, l := range lanes {
		l.cp.SetFaults(faultsOff)
	}
	faultTime := time.Since(faultStart)
	logf("faults off: reconciling and draining")
	var wg sync.WaitGroup
	for _, l := range lanes {
		wg.Go(func() { l.drained = l.calm(runCtx) })
	}
	wg.Wait()
	stopFeed()
	feedWG.Wait()
	stopProgress()
	bg.Wait()
	for _, l := range lanes {
		l.cp.Quiesce(runCtx)
	}
	drained := true
	for _, l := range lanes {
		drained = drained && l.drained
	}
	logf("%s", map[bool]string{true: "drained", false: "TIMED OUT"}[drained])

	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Minute)
	defer rcancel()
	rep = Report{Seed: o.Seed, N: o.N, Elapsed: time.Since(start), FaultTime: faultTime}
	var errs []error
	instMu.Lock()
	for tag, inst := range instances {
		for _, at := range inst.TimedOut() {
			proxy.Died(tag, at) // the emulator stopped the process mid-invocation
		}
	}
	instMu.Unlock()
	lostKeys, diedHolding := proxy.LostKeys(), proxy.DiedHolding()
	if dir := os.Getenv(DumpEnv); dir != "" {
		_ = os.WriteFile(filepath.Join(dir, "lost.log"), []byte(strings.Join(proxy.Journal(), "\n")+"\n"), 0o644)
	}
	for _, l := range lanes {
		lr, vs, err := l.check(rctx, lostKeys, diedHolding)
		errs = append(errs, err)
		if s, ok := l.cp.(interface {
			summarize(context.Context, *lane, *LaneReport) ([]Violation, error)
		}); ok {
			more, err := s.summarize(rctx, l, &lr)
			vs, errs = append(vs, more...), append(errs, err)
		}
		lr.Table, lr.QueueURL, lr.DLQURL, lr.RedactKeyARN = l.p.Table, l.p.QueueURL, l.p.DLQURL, l.p.RedactKeyARN()
		if o.KeepResources {
			errs = append(errs, l.p.DeadLetterAgain(rctx, l.kept))
		}
		rep.Lanes = append(rep.Lanes, lr)
		rep.Violations = append(rep.Violations, vs...)
		rep.Invalid += lr.Invalid
		rep.Copies += len(l.w.First) + len(l.copies)
		if !l.drained {
			rep.Violations = append(rep.Violations, Violation{Lane: l.def.Name, Kind: "not drained", Detail: "the queue or the attention index was not empty before the timeout"})
		}
	}
	rep.Faults = faultTable(rep, o.Outage, crasher.Stats(), proxy.Stats())
	slices.SortStableFunc(rep.Violations, func(a, b Violation) int { return cmp.Compare(a.Lane+a.Kind+a.Key, b.Lane+b.Kind+b.Key) })
	return rep, errors.Join(errs...)
}

func selectLanes(names []string) ([]Lane, error) {
	if len(names) == 0 {
		return Lanes, nil
	}
	var out []Lane
	for _, n := range names {
		i := slices.IndexFunc(Lanes, func(l Lane) bool { return l.Name == n })
		if i < 0 {
			return nil, fmt.Errorf("chaos: unknown lane %q (want one of %s)", n, strings.Join(LaneNames(), ", "))
		}
		out = append(out, Lanes[i])
	}
	return out, nil
}

// startLane starts lane d's counterpart and pipeline (reaching moto_server
// at sqsURL, the SQSFront) and builds its workload of n messages. A lane returned with an error must still be
// closed.
func startLane(ctx context.Context, o Options, d Lane, n, idx int, seed uint64, boot localpipeline.Bootstraps, proxy *ddbfront.Front, sqsURL string,
	twin func([]types.Message) []types.Message, register func(string, *rie.Instance)) (*lane, error) {
	cp, err := d.New(ctx, o, seed)
	if err != nil {
		return nil, fmt.Errorf("chaos: lane %s: %w", d.Name, err)
	}
	l := &lane{def: d, cp: cp, first: map[string]int{}}
	var endpointErr error
	po := localpipeline.Options{
		// SQS (and the rest of moto) through the front that keeps
		// moto_server's SQS from losing messages (SQSFront).
		DynamoDBEndpoint: o.DynamoDBEndpoint, MotoEndpoint: sqsURL, RIE: o.RIE,
		TemplateTenants: []string{"chaos-" + d.Name}, // the lane's workload tenant (below)
		Bootstraps:      boot,
		SenderInstances: d.Instances,
		Env:             cp.Env(),
		InstanceEnv: func(inst string) map[string]string {
			u, err := proxy.Listen(d.Name + "/" + inst)
			if err != nil {
				endpointErr = err
			}
			return map[string]string{"AWS_ENDPOINT_URL_DYNAMODB": u}
		},
		// The http lane's provider (httpLane); the other lanes' is idle.
		Simulator:     simulator.Options{Seed: seed ^ 0x51, Latency: o.Latency, Jitter: o.Jitter, Callbacks: o.Callbacks, IdempotencyDisabled: true},
		Twin:          twin,
		KeepResources: o.KeepResources,
	}
	p, err := localpipeline.Start(ctx, po)
	if err != nil {
		return l, fmt.Errorf("chaos: lane %s: %w", d.Name, err)
	}
	l.p = p
	if endpointErr != nil {
		return l, endpointErr
	}
	for i, inst := range p.Senders() {
		register(fmt.Sprintf("%s/sender-%d", d.Name, i+1), inst)
	}
	register(d.Name+"/reconciler", p.ReconcilerInstance())
	cp.Attach(p)
	invalid, undeliverable := 0, 0.0
	if d.Name == "http" {
		invalid, undeliverable = o.Invalid, o.Undeliverable
	}
	l.w = localpipeline.NewWorkload(localpipeline.WorkloadOptions{
		N: n, Seed: seed, Tenant: "chaos-" + d.Name, Permanent: o.Permanent, Undeliverable: undeliverable, Invalid: invalid,
		Channels: d.Channels, AddressBase: addressBase(idx),
	})
	l.feed = p.NewFeeder(maxDepth)
	base := l.feed.Add(l.w.First...)
	for i, b := range l.w.First {
		if _, ok := l.first[b]; !ok {
			l.first[b] = base + i
		}
	}
	return l, nil
}

// addressBase is the first recipient number of the lane at index idx of
// a run: lanes apart, and at a random offset, not the seed's, so that a
// run sharing a moto_server with an earlier one of the same seed (a test
// run twice against make services-start, make demo KEEP=1 twice) does not
// count that run's SMS and email as its own.
func addressBase(idx int) int { return idx*1000000 + rand.IntN(900000) }

// addDueCopies queues the redelivered copies whose time has come.
func (l *lane) addDueCopies() {
	now := time.Now()
	var due []string
	for i, c := range l.copies {
		if l.copyNext[i] != 0 {
			continue
		}
		at := l.feed.EnqueuedAt(c.orig)
		if !l.flush.Load() && (at.IsZero() || now.Before(at.Add(c.delay))) {
			continue
		}
		l.copyNext[i] = 1
		l.nCopies.Add(1)
		due = append(due, c.body)
	}
	if len(due) > 0 {
		l.feed.AddFront(due...)
	}
}

// feedLoop keeps the lane's queue fed (due copies first) until ctx ends,
// keeping busy up to date.
func (l *lane) feedLoop(ctx context.Context) {
	for ctx.Err() == nil {
		l.addDueCopies()
		depth, n, err := l.feed.Step(ctx)
		l.busy.Store(err != nil || depth > 0 || n > 0 || l.feed.Backlog() > 0 || int(l.nCopies.Load()) < len(l.copies))
		localpipeline.Sleep(ctx, 500*time.Millisecond)
	}
}

// calm reconciles until no row needs attention and the feeding loop has
// nothing left with the queue and the dead-letter queue empty (twice in a
// row), and reports whether that happened before ctx ended. A valid
// message SQS moved to the dead-letter queue (maxReceiveCount: e.g. a
// record the sender kept retrying because too little of its invocation
// was left) is sent back to the queue, as the documented operator's
// redrive does: it must then be delivered once like any other.
func (l *lane) calm(ctx context.Context) bool {
	quiet := 0
	for ctx.Err() == nil {
		if l.redrive(ctx) > 0 {
			quiet = 0
		}
		rows, err := l.p.Attention(ctx)
		if err != nil {
			localpipeline.Sleep(ctx, time.Second)
			continue
		}
		due := false
		now := time.Now()
		for _, r := range rows {
			if r.State == ledger.StateUncertain || r.Released || !now.Before(r.LeaseUntil) {
				due = true
				break
			}
		}
		if due {
			_, _ = l.p.Reconcile(ctx)
		}
		if !l.busy.Load() && len(rows) == 0 {
			quiet++
		} else {
			quiet = 0
		}
		if quiet >= 2 {
			return true
		}
		localpipeline.Sleep(ctx, time.Second)
	}
	return false
}

// redrive moves the valid messages on the lane's dead-letter queue back
// to its queue (the feeder's front) and keeps the invalid ones for the
// check. It returns how many it found.
func (l *lane) redrive(ctx context.Context) int {
	if vis, _, err := l.p.DLQDepth(ctx); err != nil || vis == 0 {
		return 0
	}
	dls, _ := l.p.DrainDLQ(ctx) // what it could not read stays for the check
	var back []string
	for _, d := range dls {
		if _, ok := d.Attributes[sender.AttrErrorReason]; ok {
			l.deadLetters = append(l.deadLetters, d)
			continue
		}
		back = append(back, d.Body)
	}
	if len(back) > 0 {
		l.redriven += len(back)
		l.feed.AddFront(back...)
	}
	return len(dls)
}

// laneProgress is one progress line's figures per lane: sent (distinct
// messages the counterpart accepted), pending and uncertain rows, queue
// depth and backlog. Lanes are read at once, each bounded by a few
// seconds (a figure not read in time shows "?"), so that a line comes
// every ProgressEvery even when the emulators answer slowly.
func laneProgress(ctx context.Context, lanes []*lane) string {
	parts := make([]string, len(lanes))
	var wg sync.WaitGroup
	for i, l := range lanes {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, 7*time.Second)
			defer cancel()
			pending, uncertain, depth := "?", "?", "?"
			if rows, err := l.p.Attention(ctx); err == nil {
				p, u := localpipeline.Waiting(rows)
				pending, uncertain = fmt.Sprint(p), fmt.Sprint(u)
			}
			if vis, inflight, err := l.p.QueueDepth(ctx); err == nil {
				depth = fmt.Sprintf("%d+%d", vis, inflight)
			}
			parts[i] = fmt.Sprintf("%s: sent %d/%d, pending %s, uncertain %s, queue %s, backlog %d",
				l.def.Name, l.cp.Sent(), l.valid(), pending, uncertain, depth, l.feed.Backlog()+len(l.copies)-int(l.nCopies.Load()))
		})
	}
	wg.Wait()
	return strings.Join(parts, " | ")
}

func (l *lane) valid() int {
	n := 0
	for _, m := range l.w.Messages {
		if m.Valid {
			n++
		}
	}
	return n
}

// faultsSoFar sums the faults injected so far.
func faultsSoFar(lanes []*lane, proxy *ddbfront.Front, c *Crasher) string {
	provider := 0
	for _, l := range lanes {
		for _, v := range l.cp.Faulted() {
			provider += v
		}
	}
	ps, cs := proxy.Stats(), c.Stats()
	lost := int64(0)
	for _, v := range ps.Lost {
		lost += v
	}
	return fmt.Sprintf("provider %d, kills %d (+%d after a lost answer), DynamoDB throttled %d, answers lost %d (for good %d)",
		provider, cs.SenderKills+cs.ReconcilerKills, cs.AfterLostAnswer, ps.Throttled, ps.Dropped, lost)
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
