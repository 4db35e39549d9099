package main

import (
	"context"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"golang.org/x/sync/errgroup"

	"github.com/sendonce/sendonce/internal/benchreport"
	"github.com/sendonce/sendonce/internal/benchreport/ddbcost"
	"github.com/sendonce/sendonce/internal/ddbfront"
	"github.com/sendonce/sendonce/internal/dispatch"
	"github.com/sendonce/sendonce/internal/ledger/dynamoledger"
	"github.com/sendonce/sendonce/internal/sender"
	"github.com/sendonce/sendonce/internal/tableschema"
	"github.com/sendonce/sendonce/internal/testenv"
	"github.com/sendonce/sendonce/notify"
	"github.com/sendonce/sendonce/provider"
)

// peerConfig shapes the peer section.
type peerConfig struct {
	// NodeDir holds bench/peer.mjs and its installed package.
	NodeDir string
	// InFlight is the calls in flight on each side.
	InFlight int
	// Fresh is the keys of the first-send and duplicate phases;
	// Concurrent the keys of the concurrent phase, each sent PerKey times
	// at once; Lost the keys whose first response is lost; Large the keys
	// of the 20 KB email phase.
	Fresh, Concurrent, PerKey, Lost, Large int
	// Rounds of Round each (per leg) after Warmup (per leg).
	Rounds        int
	Round, Warmup time.Duration
}

// countingProvider is the no-op provider of the peer workload: it counts
// sends per key and, while lose is set, answers the first send to a key
// with an ambiguous error after counting it, as a provider whose response
// was lost after it accepted. It promises nothing (no idempotent sends,
// no lookup), like the Powertools handler's call.
type countingProvider struct {
	mu    sync.Mutex
	sends map[string]int
	lose  atomic.Bool
	phase struct{ sends, duplicates int }
}

func newCountingProvider() *countingProvider { return &countingProvider{sends: map[string]int{}} }

func (p *countingProvider) Name() string                        { return "bench" }
func (p *countingProvider) Capabilities() provider.Capabilities { return provider.Capabilities{} }

func (p *countingProvider) Send(_ context.Context, m provider.Message) (provider.Receipt, error) {
	p.mu.Lock()
	prev := p.sends[m.Key]
	p.sends[m.Key] = prev + 1
	p.phase.sends++
	if prev > 0 {
		p.phase.duplicates++
	}
	p.mu.Unlock()
	if p.lose.Load() && prev == 0 {
		return provider.Receipt{}, &provider.Error{Kind: provider.Ambiguous, Provider: "bench", Op: "send", Reason: "response lost after the provider accepted"}
	}
	return provider.Receipt{MessageID: "msg-" + m.Key[len(m.Key)-12:]}, nil
}

// takePhase returns the sends and duplicate sends since the last call.
func (p *countingProvider) takePhase() (sends, duplicates int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s, d := p.phase.sends, p.phase.duplicates
	p.phase.sends, p.phase.duplicates = 0, 0
	return s, d
}

// peerSender is a sender over dynamoledger on table, for sms and email
// through p.
func peerSender(db *dynamodb.Client, table string, p provider.Adapter) (*sender.Sender, error) {
	l, err := dynamoledger.New(db, table, dynamoledger.Config{})
	if err != nil {
		return nil, err
	}
	return newSender(l, p)
}

// step is one pass of requests through a side.
type step struct {
	reqs []notify.Request
	lose bool
}

// peerPhase is one part of the workload.
type peerPhase struct {
	name, how string
	// keys is the messages the phase is about: figures are per key.
	keys  int
	steps []step
	// wantSends is the sends a correct exactly-once sender makes.
	wantSends int
	// eventIndex runs the phase on sendonce's side only, in a table with
	// the optional event index (EventIndex=true).
	eventIndex bool
}

// phaseResult is one side's figures for one phase.
type phaseResult struct {
	acc               ddbfront.Usage
	sends, duplicates int
	outcomes          map[string]int
}

// largeEmail is a 20 KB HTML email: the stored template largeTemplate,
// whose HTML part is 20 KB, on a few bytes of data.
func largeEmail(run string, i int) notify.Request {
	r := request(run, i)
	r.EventID = fmt.Sprintf("evt-%s-large-%d", run, i)
	r.Channel = notify.ChannelEmail
	r.Template = largeTemplate
	r.Recipient = notify.Recipient{ID: fmt.Sprintf("user-%d", i), Email: fmt.Sprintf("user-%d@example.com", i)}
	r.Data = map[string]any{"order_id": fmt.Sprintf("A-%d", i), "name": "Ana"}
	return r
}

func peerPhases(run string, cfg peerConfig) []peerPhase {
	batch := func(tag string, n int) []notify.Request {
		out := make([]notify.Request, n)
		for i := range out {
			out[i] = request(run+"-"+tag, i)
		}
		return out
	}
	fresh := batch("fresh", cfg.Fresh)
	var conc []notify.Request
	for _, r := range batch("conc", cfg.Concurrent) {
		for range cfg.PerKey {
			conc = append(conc, r)
		}
	}
	lost := batch("lost", cfg.Lost)
	evt := batch("evt", cfg.Fresh)
	large := make([]notify.Request, cfg.Large)
	for i := range large {
		large[i] = largeEmail(run, i)
	}
	return []peerPhase{
		{name: "first send", how: fmt.Sprintf("%d fresh keys, SMS of ~40 characters", cfg.Fresh), keys: cfg.Fresh, steps: []step{{reqs: fresh}}, wantSends: cfg.Fresh},
		{name: "duplicate", how: fmt.Sprintf("the same %d keys again, each already sent", cfg.Fresh), keys: cfg.Fresh, steps: []step{{reqs: fresh}}},
		{name: "concurrent", how: fmt.Sprintf("%d fresh keys, %d calls of each at once (%d calls)", cfg.Concurrent, cfg.PerKey, len(conc)), keys: cfg.Concurrent, steps: []step{{reqs: conc}}, wantSends: cfg.Concurrent},
		{name: "lost response", how: fmt.Sprintf("%d fresh keys whose first send's response is lost (the provider counts it, then the call fails), then each delivered again", cfg.Lost), keys: cfg.Lost, steps: []step{{reqs: lost, lose: true}, {reqs: lost}}, wantSends: cfg.Lost},
		{name: "first send, 20 KB email", how: fmt.Sprintf("%d fresh keys, an email whose stored template renders a 20 KB HTML part", cfg.Large), keys: cfg.Large, steps: []step{{reqs: large}}, wantSends: cfg.Large},
		// What EventIndex=true costs per message.
		{name: "first send, event index", how: fmt.Sprintf("%d fresh keys, SMS of ~40 characters, into a table with the optional event index (EventIndex=true)", cfg.Fresh), keys: cfg.Fresh, steps: []step{{reqs: evt}}, wantSends: cfg.Fresh, eventIndex: true},
	}
}

// runGo sends reqs through s with inFlight calls at a time and counts
// the statuses.
func runGo(ctx context.Context, s *sender.Sender, reqs []notify.Request, inFlight int) map[string]int {
	var mu sync.Mutex
	out := map[string]int{}
	var g errgroup.Group
	g.SetLimit(inFlight)
	for _, r := range reqs {
		g.Go(func() error {
			st := s.Process(ctx, r).Disposition.String()
			mu.Lock()
			defer mu.Unlock()
			out[st]++
			return nil
		})
	}
	_ = g.Wait() // nothing fails: Process answers with a status
	return out
}

// nodeRun is the Node driver's answer to "run".
type nodeRun struct {
	Outcomes       map[string]int `json:"outcomes"`
	Sends          int            `json:"sends"`
	DuplicateSends int            `json:"duplicate_sends"`
}

// nodeTput is the Node driver's answer to "tput".
type nodeTput struct {
	N       int       `json:"n"`
	Seconds float64   `json:"seconds"`
	LatUS   []float64 `json:"lat_us"`
}

// leg is one timed run of one side in a throughput round.
type leg struct {
	n       int
	seconds float64
	lat     []time.Duration
}

func (l leg) rate() float64 { return float64(l.n) / l.seconds }

// driveLat runs op from workers goroutines for d and keeps each call's
// latency. The first error stops every worker.
func driveLat(ctx context.Context, workers int, d time.Duration, op func(ctx context.Context) error) (leg, error) {
	var mu sync.Mutex
	var lat []time.Duration
	g, ctx := errgroup.WithContext(ctx)
	start := time.Now()
	for range workers {
		g.Go(func() error {
			var mine []time.Duration
			defer func() {
				mu.Lock()
				defer mu.Unlock()
				lat = append(lat, mine...)
			}()
			for time.Since(start) < d && ctx.Err() == nil {
				t0 := time.Now()
				if err := op(ctx); err != nil {
					return err
				}
				mine = append(mine, time.Since(t0))
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return leg{}, err
	}
	return leg{n: len(lat), seconds: time.Since(start).Seconds(), lat: lat}, nil
}

// percentile returns the p-th percentile (nearest rank) of ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

// rawWire is the item both raw conditional PutItem legs write (pk is set
// per call), in DynamoDB's JSON protocol, as the Node driver takes it: the
// size of a small idempotency record. rawItem is the Go SDK's.
func rawWire() map[string]map[string]string {
	expires := fmt.Sprint(time.Now().Add(time.Hour).Unix())
	return map[string]map[string]string{"state": {"S": "INPROGRESS"}, "expires_at": {"N": expires}, "claim": {"S": "0123456789abcdef0123456789abcdef"}}
}

// rawItem is rawWire's item in the Go SDK's form.
func rawItem() ddbcost.Item {
	item := ddbcost.Item{}
	for name, v := range rawWire() {
		if n, ok := v["N"]; ok {
			item[name] = &types.AttributeValueMemberN{Value: n}
		} else {
			item[name] = &types.AttributeValueMemberS{Value: v["S"]}
		}
	}
	return item
}

// measurePeer runs the same workload through sendonce's sender and
// Powertools' idempotency utility on one DynamoDB Local: the accounting
// phases through the cost proxy, then interleaved throughput rounds
// straight to DynamoDB Local (docs/benchmarks.md, "Peer"). It fails when
// either side meets a DynamoDB error or sendonce sends a message other
// than exactly once.
func measurePeer(ctx context.Context, endpoint string, cfg peerConfig, rep *benchreport.Report) error {
	db := dynamoClient(endpoint)
	soTable, dropSO, err := createTable(ctx, db, "peer")
	defer dropSO()
	if err != nil {
		return err
	}
	// The same schema with the optional event index (EventIndex=true).
	evtTable, dropEvt, err := createTable(ctx, db, "peer-evt", tableschema.WithEventIndex(true))
	defer dropEvt()
	if err != nil {
		return err
	}
	// Powertools' documented table: partition key "id", TTL on "expiration".
	ptTable, dropPT, err := createPlainTable(ctx, db, "powertools", "id", "expiration")
	defer dropPT()
	if err != nil {
		return err
	}
	rawTable, dropRaw, err := createPlainTable(ctx, db, "raw", "pk", "")
	defer dropRaw()
	if err != nil {
		return err
	}

	px, err := ddbfront.New(endpoint, ddbfront.Options{Cost: true})
	if err != nil {
		return err
	}
	defer px.Close()
	nd, err := startNode(ctx, cfg.NodeDir)
	if err != nil {
		return err
	}
	defer nd.Close()
	var vers struct {
		Versions map[string]string `json:"versions"`
	}
	if err := nd.call(ctx, map[string]any{"cmd": "versions"}, &vers); err != nil {
		return err
	}

	prov := newCountingProvider()
	soAcc, err := peerSender(dynamoClient(px.URL), soTable, prov)
	if err != nil {
		return err
	}
	soEvt, err := peerSender(dynamoClient(px.URL), evtTable, prov)
	if err != nil {
		return err
	}
	soDirect, err := peerSender(db, soTable, prov)
	if err != nil {
		return err
	}
	run := testenv.RandomID()

	// Accounting: every phase through the cost proxy, on sendonce's side,
	// then on Powertools'.
	phases := peerPhases(run, cfg)
	so := make([]phaseResult, len(phases))
	pt := make([]phaseResult, len(phases))
	for i, ph := range phases {
		s, table := soAcc, soTable
		if ph.eventIndex {
			s, table = soEvt, evtTable
		}
		px.Take(table)
		so[i].outcomes = map[string]int{}
		for _, st := range ph.steps {
			prov.lose.Store(st.lose)
			for k, v := range runGo(ctx, s, st.reqs, cfg.InFlight) {
				so[i].outcomes[k] += v
			}
			prov.lose.Store(false)
		}
		so[i].sends, so[i].duplicates = prov.takePhase()
		so[i].acc = px.Take(table)
		if so[i].sends != ph.wantSends || so[i].acc.Errors > 0 {
			return fmt.Errorf("sendonce %s: %d sends (want %d), %d errors, outcomes %v", ph.name, so[i].sends, ph.wantSends, so[i].acc.Errors, so[i].outcomes)
		}
		if ph.eventIndex {
			continue
		}
		px.Take(ptTable)
		pt[i].outcomes = map[string]int{}
		for _, st := range ph.steps {
			var a nodeRun
			if err := nd.call(ctx, map[string]any{"cmd": "run", "endpoint": px.URL, "table": ptTable, "events": st.reqs, "concurrency": cfg.InFlight, "lose": st.lose}, &a); err != nil {
				return fmt.Errorf("powertools %s: %w", ph.name, err)
			}
			for k, v := range a.Outcomes {
				pt[i].outcomes[k] += v
			}
			pt[i].sends += a.Sends
			pt[i].duplicates += a.DuplicateSends
		}
		pt[i].acc = px.Take(ptTable)
		if pt[i].acc.Errors > 0 {
			return fmt.Errorf("powertools %s: %d DynamoDB errors, outcomes %v", ph.name, pt[i].acc.Errors, pt[i].outcomes)
		}
	}

	// Throughput: first sends of fresh keys, four legs per round in a
	// rotating order, each against its own client's raw conditional put.
	dynPID := dynamoLocalPID()
	watch := newCPUWatch(os.Getpid(), nd.PID(), dynPID)
	wire := rawWire()
	tmpl := rawItem()
	var seq atomic.Int64
	goRaw := func(ctx context.Context) error {
		item := maps.Clone(tmpl)
		item["pk"] = &types.AttributeValueMemberS{Value: fmt.Sprintf("go-%s-%d", run, seq.Add(1))}
		_, err := db.PutItem(ctx, &dynamodb.PutItemInput{
			TableName: aws.String(rawTable), Item: item,
			ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
			ExpressionAttributeNames: map[string]string{"#pk": "pk"},
		})
		return err
	}
	goSend := func(ctx context.Context) error {
		res := soDirect.Process(ctx, request(run+"-tput", int(seq.Add(1))))
		if res.Disposition != dispatch.Sent {
			return fmt.Errorf("process: status %s (%s), want sent", res.Disposition, res.Reason)
		}
		return nil
	}
	ptEvent := request(run+"-tput-pt", 0)
	var legN atomic.Int64
	nodeLeg := func(kind, table string, d time.Duration) (leg, error) {
		var t nodeTput
		var template any = ptEvent
		if kind == "raw" {
			template = wire
		}
		if err := nd.call(ctx, map[string]any{"cmd": "tput", "kind": kind, "endpoint": endpoint, "table": table, "template": template,
			"prefix": fmt.Sprintf("js-%s-%d", run, legN.Add(1)), "seconds": d.Seconds(), "concurrency": cfg.InFlight}, &t); err != nil {
			return leg{}, err
		}
		l := leg{n: t.N, seconds: t.Seconds}
		for _, us := range t.LatUS {
			l.lat = append(l.lat, time.Duration(us*1e3))
		}
		return l, nil
	}
	names := []string{"Go raw PutItem", "sendonce", "JS raw PutItem", "Powertools"}
	legs := []func(time.Duration) (leg, error){
		func(d time.Duration) (leg, error) { return driveLat(ctx, cfg.InFlight, d, goRaw) },
		func(d time.Duration) (leg, error) { return driveLat(ctx, cfg.InFlight, d, goSend) },
		func(d time.Duration) (leg, error) { return nodeLeg("raw", rawTable, d) },
		func(d time.Duration) (leg, error) { return nodeLeg("powertools", ptTable, d) },
	}
	for i, f := range legs {
		if _, err := f(cfg.Warmup); err != nil {
			return fmt.Errorf("warm-up %s: %w", names[i], err)
		}
	}
	prov.takePhase() // the warm-up's sends
	rates := make([][]float64, len(legs))
	lats := make([][]time.Duration, len(legs))
	var soPT, soRaw, ptRaw, quietSoPT []float64
	busyRounds := 0
	// CPU used per call by the leg's own process and by DynamoDB Local.
	var cpuOwn, cpuDyn [4]time.Duration
	var calls [4]int
	var busyNotes []string
	for r := range cfg.Rounds {
		got := make([]leg, len(legs))
		roundBusy := false
		for k := range legs {
			i := (r + k) % len(legs)
			own := os.Getpid()
			if i >= 2 {
				own = nd.PID()
			}
			ownCPU, dynCPU := ProcCPU(own), ProcCPU(dynPID)
			watch.Begin()
			l, err := legs[i](cfg.Round)
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", r+1, names[i], err)
			}
			others, load, ok := watch.End()
			cpuOwn[i] += ProcCPU(own) - ownCPU
			cpuDyn[i] += ProcCPU(dynPID) - dynCPU
			calls[i] += l.n
			if !ok || others >= busyThreshold {
				roundBusy = true
				busyNotes = append(busyNotes, fmt.Sprintf("round %d %s: other processes %.2f cores (load %.1f)", r+1, names[i], others, load))
			}
			got[i] = l
			rates[i] = append(rates[i], l.rate())
			lats[i] = append(lats[i], l.lat...)
		}
		if roundBusy {
			busyRounds++
		}
		soPT = append(soPT, got[1].rate()/got[3].rate())
		soRaw = append(soRaw, got[1].rate()/got[0].rate())
		ptRaw = append(ptRaw, got[3].rate()/got[2].rate())
		if !roundBusy {
			quietSoPT = append(quietSoPT, got[1].rate()/got[3].rate())
		}
	}
	if _, dups := prov.takePhase(); dups > 0 {
		return fmt.Errorf("sendonce sent %d fresh keys twice during the throughput rounds", dups)
	}

	// Report.
	how := fmt.Sprintf("%d calls in flight per side; %s warm-up per leg, then %d rounds of 4 interleaved %s legs (Go raw PutItem, sendonce, JS raw PutItem, Powertools; order rotated each round) on one DynamoDB Local, first sends of fresh keys; sendonce = sender.Process over dynamoledger with a no-op counting provider; Powertools = makeIdempotent + DynamoDBPersistenceLayer (%s, Node %s)",
		cfg.InFlight, cfg.Warmup, cfg.Rounds, cfg.Round, vers.Versions["@aws-lambda-powertools/idempotency"], vers.Versions["node"])
	add := func(name string, samples []float64, unit, how string) {
		rep.AddSamples("peer", name, samples, unit, how)
	}
	add("sendonce first send (median)", rates[1], "msgs/s", how)
	add("Powertools first send (median)", rates[3], "msgs/s", "the same rounds")
	add("sendonce / Powertools, first send (median of rounds)", soPT, "ratio", "per round, sendonce's rate over Powertools' in the same round")
	if len(quietSoPT) > 0 && len(quietSoPT) < len(soPT) {
		add("sendonce / Powertools, quiet rounds only (median)", quietSoPT, "ratio", fmt.Sprintf("the %d rounds in which no leg was flagged busy", len(quietSoPT)))
	}
	add("sendonce / Go raw conditional PutItem (median of rounds)", soRaw, "ratio", "per round; the raw leg puts a 3-attribute item with attribute_not_exists into a key-only table through the same Go client")
	add("Powertools / JS raw conditional PutItem (median of rounds)", ptRaw, "ratio", "per round; the same item, table and condition through the JS SDK v3 client Powertools uses")
	add("Go raw conditional PutItem (median)", rates[0], "writes/s", "context only: DynamoDB Local's speed here")
	add("JS raw conditional PutItem (median)", rates[2], "writes/s", "context only")
	p99 := func(i int) float64 { return float64(percentile(lats[i], 99)) / float64(time.Millisecond) }
	rep.Add("peer", "sendonce p99 first send / p99 Go raw put", p99(1)/p99(0), "ratio",
		fmt.Sprintf("p99 over every call of every round: sendonce %.1f ms, Go raw put %.1f ms (p50 %.1f / %.1f ms)", p99(1), p99(0),
			float64(percentile(lats[1], 50))/1e6, float64(percentile(lats[0], 50))/1e6))
	rep.Add("peer", "Powertools p99 first send / p99 JS raw put", p99(3)/p99(2), "ratio",
		fmt.Sprintf("p99 over every call of every round: Powertools %.1f ms, JS raw put %.1f ms (p50 %.1f / %.1f ms)", p99(3), p99(2),
			float64(percentile(lats[3], 50))/1e6, float64(percentile(lats[2], 50))/1e6))
	perCall := func(d time.Duration, i int) float64 {
		return float64(d) / float64(time.Millisecond) / float64(max(1, calls[i]))
	}
	rep.Add("peer", "client CPU per first send, sendonce / Powertools", perCall(cpuOwn[1], 1)/perCall(cpuOwn[3], 3), "ratio",
		fmt.Sprintf("CPU time of the leg's own process over its calls, every round (/proc/<pid>/stat): sendonce %.2f ms (Go raw put %.2f ms), Powertools %.2f ms (JS raw put %.2f ms); on a busy machine a process's share of the cores, not its CPU per call, is what load changes",
			perCall(cpuOwn[1], 1), perCall(cpuOwn[0], 0), perCall(cpuOwn[3], 3), perCall(cpuOwn[2], 2)))
	rep.Add("peer", "DynamoDB Local CPU per first send, sendonce / Powertools", perCall(cpuDyn[1], 1)/perCall(cpuDyn[3], 3), "ratio",
		fmt.Sprintf("DynamoDB Local's CPU time during each leg over its calls: sendonce %.2f ms, Powertools %.2f ms, Go raw put %.2f ms, JS raw put %.2f ms",
			perCall(cpuDyn[1], 1), perCall(cpuDyn[3], 3), perCall(cpuDyn[0], 0), perCall(cpuDyn[2], 2)))
	rep.Add("peer", "rounds with another process busy", float64(busyRounds), "rounds",
		fmt.Sprintf("of %d: a round is flagged when, during any of its legs, processes other than cmd/bench, its Node driver and DynamoDB Local (pid %d) used %.1f core or more on average (/proc/stat)", cfg.Rounds, dynPID, busyThreshold))
	if len(busyNotes) > 0 {
		rep.Note("Peer rounds flagged busy (%d of %d): %s.", busyRounds, cfg.Rounds, strings.Join(busyNotes, "; "))
	}

	for i, ph := range phases {
		addAccounting(rep, "sendonce", ph, so[i])
		if !ph.eventIndex {
			addAccounting(rep, "Powertools", ph, pt[i])
		}
	}
	if b := px.ConditionalFailureBody(); b != "" && !strings.Contains(b, "ConsumedCapacity") {
		rep.Note("DynamoDB Local answers a failed conditional write with no ConsumedCapacity (body seen: %s), so its reported units leave those writes out; the real-DynamoDB figures charge them (1 unit per started KB of the item, 1 where no item exists).", truncate(strings.Join(strings.Fields(b), " "), 120))
	}
	return nil
}

// addAccounting adds one side's rows for one phase: its calls, write units
// and duplicate sends per key.
func addAccounting(rep *benchreport.Report, side string, ph peerPhase, r phaseResult) {
	prefix, a := side+", "+ph.name+": ", r.acc
	per := func(x float64) float64 { return x / float64(ph.keys) }
	rep.Add("peer", prefix+"DynamoDB calls", per(float64(a.Total())), "calls/msg",
		fmt.Sprintf("%s; outcomes: %s; through the cost proxy: %s; %d conditional failures; %s read units reported",
			ph.how, callList(r.outcomes), callList(a.Calls), a.ConditionFailed, benchreport.FormatValue(a.ReportedRCU)))
	rep.Add("peer", prefix+"write units, DynamoDB Local", per(a.ReportedWCU), "WCU/msg",
		fmt.Sprintf("ReturnConsumedCapacity=INDEXES as DynamoDB Local reports it (index part %s); failed conditional writes report none", benchreport.FormatValue(per(a.ReportedIndexWCU))))
	rep.Add("peer", prefix+"write units, real DynamoDB", per(float64(a.TableWCU+a.IndexWCU)), "WCU/msg",
		fmt.Sprintf("from item sizes (package ddbcost): table %s + index %s per msg; %s index entries written or removed per msg%s",
			benchreport.FormatValue(per(float64(a.TableWCU))), benchreport.FormatValue(per(float64(a.IndexWCU))), benchreport.FormatValue(per(float64(a.IndexWrites))), largest(a.MaxItem)))
	rep.Add("peer", prefix+"duplicate sends", float64(r.duplicates), "sends",
		fmt.Sprintf("sends to a key that had been sent before, over the phase's %d keys (%d sends in all)", ph.keys, r.sends))
}

func largest(size int) string {
	if size == 0 {
		return "; no item written"
	}
	return fmt.Sprintf("; largest item written %d bytes", size)
}
