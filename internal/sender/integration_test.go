package sender_test

// Tests of the whole send path against real components: the DynamoDB
// ledger on DynamoDB Local, the generic HTTP provider adapter talking to
// the provider simulator over HTTP. The simulator's count of what it
// delivered per reference is the ground truth: any reference delivered
// twice fails the test.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sendonce/sendonce/internal/ddbfront"
	"github.com/sendonce/sendonce/internal/dispatch"
	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/ledger/dynamoledger"
	"github.com/sendonce/sendonce/internal/ledger/ledgertest"
	"github.com/sendonce/sendonce/internal/metrics"
	"github.com/sendonce/sendonce/internal/provider/httpprovider"
	"github.com/sendonce/sendonce/internal/provider/simulator"
	"github.com/sendonce/sendonce/internal/render"
	"github.com/sendonce/sendonce/internal/render/rendertest"
	"github.com/sendonce/sendonce/internal/sender"
	"github.com/sendonce/sendonce/internal/templates"
	"github.com/sendonce/sendonce/internal/templates/dynamotemplates"
	"github.com/sendonce/sendonce/internal/testenv"
	"github.com/sendonce/sendonce/internal/testsupport"
	"github.com/sendonce/sendonce/notify"
	"github.com/sendonce/sendonce/provider"
	"github.com/sendonce/sendonce/provider/providertest"
)

type env struct {
	sim    *simulator.Simulator
	ledger *dynamoledger.Ledger
	// front counts the ledger's DynamoDB calls to table on the wire.
	front   *ddbfront.Front
	table   string
	metrics *metrics.Tally
	now     atomic.Pointer[time.Time]
	prov    *httpprovider.Provider
	// renderer reads the example templates of tenant "acme" from the
	// table, through a client of its own (not counted in calls).
	renderer *render.Renderer
}

type options struct {
	sim             simulator.Options
	providerTimeout time.Duration
}

func setupEnv(t *testing.T, o options) *env {
	t.Helper()
	e := &env{metrics: metrics.NewTally()}
	start := time.Now()
	e.now.Store(&start)
	o.sim.Token = "sim-token"
	e.sim = simulator.New(o.sim)
	srv := httptest.NewServer(e.sim.Handler())
	t.Cleanup(func() { srv.Close(); e.sim.Close() })

	front, err := ddbfront.New(testenv.DynamoDBEndpoint(t), ddbfront.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(front.Close)
	db := testenv.DynamoDBAt(front.URL)
	table := testenv.NewTable(t, db)
	e.front, e.table = front, table
	e.ledger, err = dynamoledger.New(db, table, dynamoledger.Config{Now: e.clock})
	if err != nil {
		t.Fatal(err)
	}
	tpl := dynamotemplates.New(testenv.DynamoDB(t), table, dynamotemplates.Config{})
	if _, err := templates.ImportExamples(t.Context(), tpl, "acme"); err != nil {
		t.Fatal(err)
	}
	e.renderer = render.New(tpl, render.Config{})
	if o.providerTimeout == 0 {
		o.providerTimeout = 2 * time.Second
	}
	e.prov, err = httpprovider.New(httpprovider.Config{BaseURL: srv.URL, Token: "sim-token", Timeout: o.providerTimeout})
	if err != nil {
		t.Fatal(err)
	}
	e.front.Take(table)
	return e
}

func (e *env) clock() time.Time { return *e.now.Load() }

func (e *env) advance(d time.Duration) {
	t := e.clock().Add(d)
	e.now.Store(&t)
}

func (e *env) sender(t *testing.T, p provider.Adapter) *sender.Sender {
	t.Helper()
	if p == nil {
		p = e.prov
	}
	s, err := sender.New(sender.Config{
		Dispatcher: testsupport.Dispatcher(t, dispatch.Dispatcher{
			Ledger:          e.ledger,
			Providers:       map[string]provider.Adapter{"sms": p, "email": p},
			Renderer:        e.renderer,
			Metrics:         e.metrics,
			ProviderTimeout: 2 * time.Second,
			ClaimTimeout:    60 * time.Second,
			Settle:          time.Second,
			Now:             e.clock,
		}),
		DeadLetters: discardDLQ{},
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

type discardDLQ struct{}

func (discardDLQ) Put(context.Context, events.SQSMessage, *notify.InvalidError) error { return nil }

func req(event string) notify.Request {
	return notify.Request{
		TenantID: "acme", EventID: event, Channel: notify.ChannelSMS, Template: "order_shipped",
		Recipient: notify.Recipient{ID: "user-42", Phone: "+15551234567"},
		Class:     notify.ClassTransactional, Data: map[string]any{"order_id": event},
	}
}

func (e *env) assertDeliveredOnce(t *testing.T, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if n := e.sim.Delivered(k); n != 1 {
			t.Errorf("reference %s delivered %d times, want exactly 1", k, n)
		}
	}
	if d := e.sim.Duplicates(); len(d) > 0 {
		t.Errorf("duplicates delivered: %v", d)
	}
}

func (e *env) row(t *testing.T, key string) ledger.Record {
	t.Helper()
	return ledgertest.Row(t, e.ledger, key)
}

// TestConcurrentDeliveriesOfOneKey: 64 workers process the same request at
// once, for 50 different keys. Each reference is delivered exactly once.
// (Each key is the same 64-way race on one conditional write; 50 of them,
// 3,200 claims, cost a quarter of the 200 this test used to run, which
// made it the slowest test of make test at 37 to 61 s. The simulation
// races claims at every interleaving its seeds reach.)
func TestConcurrentDeliveriesOfOneKey(t *testing.T) {
	t.Parallel()
	e := setupEnv(t, options{})
	s := e.sender(t, nil)
	const keys, workers = 50, 64
	var sent int
	for i := range keys {
		r := req(fmt.Sprintf("evt_conc_%d", i))
		var wg sync.WaitGroup
		var mu sync.Mutex
		var results []dispatch.Result
		start := make(chan struct{})
		for range workers {
			wg.Go(func() {
				<-start
				res := s.Process(context.Background(), r)
				mu.Lock()
				results = append(results, res)
				mu.Unlock()
			})
		}
		close(start)
		wg.Wait()
		if n := e.sim.Delivered(r.Key()); n != 1 {
			t.Fatalf("key %d: delivered %d times, want 1", i, n)
		}
		// The claim's winner reports sent, or uncertain when a loaded
		// machine's provider call outlived its timeout after the
		// simulator took the message; the others a duplicate, or a retry
		// because the winner holds the claim. On a loaded machine the
		// winner may itself report a retry (its SENT mark outlived the
		// deadline: nothing is decided, the redelivery finds the row);
		// never may two workers report the message sent.
		winners, own := 0, []string{}
		for _, res := range results {
			switch {
			case res.Disposition == dispatch.Sent || res.Disposition == dispatch.Uncertain:
				winners++
			case res.Disposition == dispatch.Duplicate:
			case res.Disposition == dispatch.Retry && strings.Contains(res.Reason, "another worker holds the claim"):
			default:
				own = append(own, res.Disposition.String()+": "+res.Reason)
			}
		}
		sent += winners
		if winners+len(own) != 1 {
			t.Errorf("key %d: %d workers reported it sent or uncertain and %d reported another outcome of their own (%q), want one worker in all (the claim's)", i, winners, len(own), own)
		} else if len(own) == 1 {
			t.Logf("key %d: the claim's winner reported %s (delivered once)", i, own[0])
		}
	}
	if sent < keys {
		t.Logf("%d of %d keys reported sent or uncertain by their claim's winner", sent, keys)
	}
	if d := e.sim.Duplicates(); len(d) > 0 {
		t.Errorf("duplicates: %v", d)
	}
}

// TestDynamoDBCallsPerMessage counts the DynamoDB requests the sender makes.
func TestDynamoDBCallsPerMessage(t *testing.T) {
	t.Parallel()
	e := setupEnv(t, options{})
	s := e.sender(t, nil)
	r := req("evt_calls")
	if res := s.Process(context.Background(), r); res.Disposition != dispatch.Sent {
		t.Fatalf("first delivery: %+v", res)
	}
	if got, want := e.front.Take(e.table).Calls, map[string]int{"PutItem": 1, "UpdateItem": 1}; !maps.Equal(got, want) {
		t.Errorf("first delivery made %v, want %v (2 writes, 0 reads)", got, want)
	}
	if res := s.Process(context.Background(), r); res.Disposition != dispatch.Duplicate {
		t.Fatalf("redelivery: %+v", res)
	}
	if got, want := e.front.Take(e.table).Calls, map[string]int{"PutItem": 1}; !maps.Equal(got, want) {
		t.Errorf("redelivery of a SENT message made %v, want %v (1 write attempt, 0 reads)", got, want)
	}
}

// crashingProvider lets a test stop the flow at a boundary: after the
// claim (before the provider is called) or after the provider accepted
// (before SENT is written), as a worker killed there would.
type crashingProvider struct {
	provider.Adapter
	crashBefore, crashAfter bool
}

var errCrash = &provider.Error{Kind: provider.Ambiguous, Provider: "http", Op: "send", Reason: "worker crashed"}

func (c *crashingProvider) Send(ctx context.Context, m provider.Message) (provider.Receipt, error) {
	if c.crashBefore {
		panic(errCrash)
	}
	r, err := c.Adapter.Send(ctx, m)
	if c.crashAfter {
		panic(errCrash)
	}
	return r, err
}

func (c *crashingProvider) Lookup(ctx context.Context, m provider.Message) (provider.LookupResult, error) {
	return c.Adapter.(provider.Looker).Lookup(ctx, m)
}

// processCrashing runs one delivery that dies at the provider boundary and
// returns without writing anything further, like a killed worker.
func processCrashing(s *sender.Sender, r notify.Request) {
	defer func() { _ = recover() }()
	s.Process(context.Background(), r)
}

func TestCrashAtEachBoundaryThenRedeliver(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		idempotent  bool // the simulator honours Idempotency-Key
		crashBefore bool
		crashAfter  bool
		ackLost     bool // SENT written, the SQS ack lost
	}{
		{name: "AfterClaim", idempotent: true, crashBefore: true},
		{name: "AfterProviderAcceptedBeforeSENT", idempotent: true, crashAfter: true},
		{name: "AfterProviderAcceptedBeforeSENTNoIdempotency", idempotent: false, crashAfter: true},
		{name: "AfterSENTBeforeAck", idempotent: true, ackLost: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := setupEnv(t, options{sim: simulator.Options{IdempotencyDisabled: !tt.idempotent}})
			r := req("evt_crash")
			var p provider.Adapter = e.prov
			if !tt.idempotent {
				// The gateway ignores Idempotency-Key; the adapter must not
				// promise what the provider does not do.
				p = providertest.LookupOnly(e.prov)
			}
			if tt.ackLost {
				if res := e.sender(t, p).Process(context.Background(), r); res.Disposition != dispatch.Sent {
					t.Fatalf("first delivery: %+v", res)
				}
			} else {
				processCrashing(e.sender(t, &crashingProvider{Adapter: p, crashBefore: tt.crashBefore, crashAfter: tt.crashAfter}), r)
				if got := e.row(t, r.Key()).State; got != ledger.StatePending {
					t.Fatalf("after the crash the row is %s, want PENDING", got)
				}
				// A redelivery while the dead worker's lease is live waits.
				if res := e.sender(t, p).Process(context.Background(), r); res.Disposition != dispatch.Retry {
					t.Fatalf("redelivery within the lease: %+v, want retry", res)
				}
				e.advance(61 * time.Second)
			}
			// Redelivery (the SQS message comes back).
			res := e.sender(t, p).Process(context.Background(), r)
			want := dispatch.Sent
			if tt.ackLost {
				want = dispatch.Duplicate
			}
			if res.Disposition != want {
				t.Fatalf("redelivery: %+v, want %v", res, want)
			}
			e.assertDeliveredOnce(t, r.Key())
			row := e.row(t, r.Key())
			if row.State != ledger.StateSent || row.ProviderMessageID == "" || row.Address != "" || row.Body != "" {
				t.Errorf("final row = %+v, want SENT with provider id, no address, no body", row)
			}
		})
	}
}

// TestProviderTimeoutAfterAccepting: the provider accepts, then the answer
// is lost to a timeout. The message may be at the provider, so the row is
// UNCERTAIN (never released: a release would let another provider send
// it), pinned to the provider it went through. That provider drops
// repeats, so this is the fast path: the sender reports the SQS record
// failed, and the next receive settles the row through the same provider
// with the same key (its lookup finds the message: SENT), without a
// reconciler run; the provider delivered the message once.
func TestProviderTimeoutAfterAccepting(t *testing.T) {
	t.Parallel()
	e := setupEnv(t, options{}) // the default 2 s: the next receive's lookup and send must not meet the deadline beside load
	r := req("evt_timeout")
	e.sim.AddFault(simulator.Fault{Kind: simulator.FaultTimeoutAfterAccept, Count: 1})
	s := e.sender(t, nil)
	body, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	ev := events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m1", Body: string(body)}}}
	resp, err := s.HandleSQS(context.Background(), ev)
	if err != nil || len(resp.BatchItemFailures) != 1 {
		t.Fatalf("first receive: %+v, %v; want the record reported failed, for the next receive to repeat it", resp, err)
	}
	if e.sim.Delivered(r.Key()) != 1 {
		t.Fatalf("the simulator did not accept the first attempt")
	}
	if row := e.row(t, r.Key()); row.State != ledger.StateUncertain || row.Released || row.Provider != e.prov.Name() {
		t.Fatalf("row after the ambiguous attempt: %s, released %t, provider %q; want UNCERTAIN, not released, pinned to %q", row.State, row.Released, row.Provider, e.prov.Name())
	}
	// The next receive of the same SQS message.
	resp, err = s.HandleSQS(context.Background(), ev)
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("second receive: %+v, %v; want the record acknowledged", resp, err)
	}
	e.assertDeliveredOnce(t, r.Key())
	if row := e.row(t, r.Key()); row.State != ledger.StateSent || row.ProviderMessageID == "" {
		t.Errorf("row %s %q, want SENT with the provider's id on the next receive", row.State, row.ProviderMessageID)
	}
}

// TestBatchThroughHandleSQS runs a batch with redeliveries of the same
// events in it and in a second batch.
func TestBatchThroughHandleSQS(t *testing.T) {
	t.Parallel()
	e := setupEnv(t, options{})
	s := e.sender(t, nil)
	var recs []events.SQSMessage
	var keys []string
	for i := range 5 {
		r := req(fmt.Sprintf("evt_batch_%d", i))
		keys = append(keys, r.Key())
		b, _ := json.Marshal(r)
		recs = append(recs, events.SQSMessage{MessageId: fmt.Sprint("m", i), Body: string(b)},
			events.SQSMessage{MessageId: fmt.Sprint("dup", i), Body: string(b)})
	}
	for range 2 {
		resp, err := s.HandleSQS(context.Background(), events.SQSEvent{Records: recs})
		if err != nil {
			t.Fatal(err)
		}
		// Copies in one batch race: the loser sees a live claim and is
		// retried; a redelivery after the first batch is a duplicate.
		for _, f := range resp.BatchItemFailures {
			t.Logf("retry %s", f.ItemIdentifier)
		}
	}
	e.assertDeliveredOnce(t, keys...)
	if got := e.metrics.Get(metrics.DuplicatesPrevented) + e.metrics.Get(metrics.InFlightConflicts); got != 15 {
		t.Errorf("duplicates prevented + in-flight conflicts = %d, want 15", got)
	}
}

// loseWrites applies the next lose PutItem/UpdateItem calls of the wrapped
// client, then answers with an error, as a response lost after the SDK's
// retries looks to the ledger.
type loseWrites struct {
	dynamoledger.API
	mu         sync.Mutex
	puts, upds int
}

var errAnswerLost = errors.New("read tcp: connection reset by peer (answer lost)")

func (l *loseWrites) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	out, err := l.API.PutItem(ctx, in, o...)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err == nil && l.puts > 0 {
		l.puts--
		return nil, errAnswerLost
	}
	return out, err
}

func (l *loseWrites) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	out, err := l.API.UpdateItem(ctx, in, o...)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err == nil && l.upds > 0 && in.UpdateExpression != nil && strings.Contains(*in.UpdateExpression, "attempts + ") {
		l.upds--
		return nil, errAnswerLost
	}
	return out, err
}

// TestLostClaimAnswerAgainstDynamoDB (defect 3, on DynamoDB Local): the
// claim's PutItem applies but its answer is lost. The sender releases the
// claim it tried to take, so the row is released and the redelivery sends
// once, with no lookup and no UNCERTAIN row, through a provider that can
// neither drop repeats nor be asked. Then the same for a takeover.
func TestLostClaimAnswerAgainstDynamoDB(t *testing.T) {
	t.Parallel()
	e := setupEnv(t, options{})
	db := testenv.DynamoDB(t)
	lossy := &loseWrites{API: db, puts: 1, upds: 1}
	l, err := dynamoledger.New(lossy, testenv.NewTable(t, db), dynamoledger.Config{Now: e.clock})
	if err != nil {
		t.Fatal(err)
	}
	fails := 1
	var sent []string
	p := &providertest.Fake{SendFunc: func(_ context.Context, m provider.Message) (provider.Receipt, error) {
		if fails > 0 {
			fails--
			return provider.Receipt{}, providertest.Error(provider.Transient, "503")
		}
		sent = append(sent, m.Key)
		return provider.Receipt{MessageID: "msg_1"}, nil
	}}
	s, err := sender.New(sender.Config{
		Dispatcher: testsupport.Dispatcher(t, dispatch.Dispatcher{
			Ledger:          l,
			Providers:       map[string]provider.Adapter{"sms": p},
			Renderer:        rendertest.Examples(t, "acme"),
			ProviderTimeout: 2 * time.Second,
			ClaimTimeout:    60 * time.Second,
			Settle:          time.Second,
			Now:             e.clock,
		}),
		DeadLetters: discardDLQ{},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r := req("lost-claim-ddb")
	wantReleased := func(after string) {
		t.Helper()
		row, err := l.Get(ctx, r.Key())
		if err != nil {
			t.Fatalf("%s: Get: %v", after, err)
		}
		if row.State != ledger.StatePending || !row.Released {
			t.Fatalf("%s: row %s released=%v, want PENDING released: nothing was sent", after, row.State, row.Released)
		}
	}
	if res := s.Process(ctx, r); res.Disposition != dispatch.Retry || p.Calls() != 0 {
		t.Fatalf("lost claim answer: %s (%s) after %d sends, want retry and no send", res.Disposition, res.Reason, p.Calls())
	}
	wantReleased("lost claim answer")
	e.advance(61 * time.Second)
	if res := s.Process(ctx, r); res.Disposition != dispatch.Retry { // 503: released
		t.Fatalf("503: %s (%s), want retry", res.Disposition, res.Reason)
	}
	if res := s.Process(ctx, r); res.Disposition != dispatch.Retry { // the takeover's answer is lost
		t.Fatalf("lost takeover answer: %s (%s), want retry", res.Disposition, res.Reason)
	}
	wantReleased("lost takeover answer")
	e.advance(61 * time.Second)
	if res := s.Process(ctx, r); res.Disposition != dispatch.Sent {
		t.Fatalf("redelivery: %s (%s), want sent", res.Disposition, res.Reason)
	}
	if len(sent) != 1 || p.Calls() != 2 {
		t.Errorf("accepted %d sends of %d calls, want 1 of 2", len(sent), p.Calls())
	}
}
