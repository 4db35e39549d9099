package reconcile_test

// The fan-out's hand-out (Find) and workers (Work, HandleSQS) against the
// DynamoDB ledger on DynamoDB Local, the queue on moto_server's SQS, and
// the provider simulator's delivery count as the ground truth: a lost
// unit, a duplicated unit and a worker killed mid-unit each end with every
// message delivered exactly once.

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sendonce/sendonce/internal/dispatch"
	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/provider/simulator"
	"github.com/sendonce/sendonce/internal/reconcile"
	"github.com/sendonce/sendonce/internal/testenv"
	"github.com/sendonce/sendonce/internal/testsupport"
	"github.com/sendonce/sendonce/provider"
	"github.com/sendonce/sendonce/provider/providertest"
)

// memQueue is a Queue whose units the test takes out by hand; mangle, if
// set, decides what each Put really enqueues (to lose or repeat units).
type memQueue struct {
	mu     sync.Mutex
	units  []reconcile.Unit
	mangle func(i int, u reconcile.Unit) []reconcile.Unit
	seen   int
}

func (q *memQueue) Waiting(context.Context) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.units), nil
}

func (q *memQueue) Put(_ context.Context, us []reconcile.Unit) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, u := range us {
		if q.mangle != nil {
			q.units = append(q.units, q.mangle(q.seen, u)...)
		} else {
			q.units = append(q.units, u)
		}
		q.seen++
	}
	return len(us), nil
}

func (q *memQueue) take() []reconcile.Unit {
	q.mu.Lock()
	defer q.mu.Unlock()
	us := q.units
	q.units = nil
	return us
}

func (e *env) fanout(t *testing.T, p provider.Adapter) *reconcile.Reconciler {
	t.Helper()
	r, err := reconcile.New(reconcile.Config{
		Dispatcher: testsupport.Dispatcher(t, dispatch.Dispatcher{
			Ledger:          e.ledger,
			Providers:       map[string]provider.Adapter{"sms": p},
			ProviderTimeout: testProviderTimeout,
			ClaimTimeout:    time.Minute,
			Settle:          time.Minute,
			Now:             e.clock,
		}),
		MaxRows:     10000,
		PageSize:    100,
		UnitSize:    10,
		Concurrency: 4,
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// work runs each unit on its own worker, all at once.
func work(t *testing.T, r *reconcile.Reconciler, units []reconcile.Unit) map[reconcile.Action]int {
	t.Helper()
	var (
		mu  sync.Mutex
		wg  sync.WaitGroup
		all = map[reconcile.Action]int{}
	)
	for _, u := range units {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rep, done := r.Work(context.Background(), u)
			if !done {
				t.Error("unit not finished without a deadline")
			}
			mu.Lock()
			for a, n := range rep.Actions {
				all[a] += n
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	return all
}

func (e *env) deliveredOnce(t *testing.T, keys []string) {
	t.Helper()
	for _, k := range keys {
		if n := e.sim.Delivered(k); n != 1 {
			t.Fatalf("reference %s delivered %d times, want 1", k, n)
		}
	}
	for _, k := range keys {
		r, err := e.ledger.Get(context.Background(), k)
		if err != nil || r.State != ledger.StateSent {
			t.Fatalf("row %s = %s, %v; want SENT", k, r.State, err)
		}
	}
}

func TestFindHandsOutDueRowsOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t, simulator.Options{IdempotencyDisabled: true})
	keys := e.uncertain(t, 95, "otp")
	r := e.fanout(t, providertest.NoCapabilities(e.prov))
	q := &memQueue{}
	rep, err := r.Find(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	// Not due yet (settle): an UNCERTAIN row is due from when it was marked,
	// so it is handed out; Work then leaves it waiting until the settle time.
	if rep.Found != 95 || rep.Units != 10 {
		t.Fatalf("find = %+v, want 95 rows in 10 units", rep)
	}
	seen := map[string]int{}
	for _, u := range q.units {
		if len(u.Keys) > 10 {
			t.Errorf("unit of %d keys, want at most 10", len(u.Keys))
		}
		for _, k := range u.Keys {
			seen[k]++
		}
	}
	for _, k := range keys {
		if seen[k] != 1 {
			t.Fatalf("key %s handed out %d times, want 1", k, seen[k])
		}
	}
	// Units still waiting: the next run hands nothing out.
	if rep, err = r.Find(ctx, q); err != nil || !rep.Busy || rep.Found != 0 {
		t.Fatalf("second find with 10 units waiting = %+v, %v; want busy, nothing found", rep, err)
	}
	e.advance(2 * time.Minute)
	acts := work(t, r, q.take())
	if acts[reconcile.ActionResent] != 95 {
		t.Fatalf("actions %v, want 95 resent", acts)
	}
	e.deliveredOnce(t, keys)
	if rep, err = r.Find(ctx, q); err != nil || rep.Found != 0 || rep.Busy {
		t.Fatalf("find after the drain = %+v, %v; want nothing", rep, err)
	}
}

func TestLostUnitIsFoundAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t, simulator.Options{IdempotencyDisabled: true})
	keys := e.uncertain(t, 50, "otp")
	e.advance(2 * time.Minute)
	r := e.fanout(t, providertest.NoCapabilities(e.prov))
	var lost []string
	q := &memQueue{mangle: func(i int, u reconcile.Unit) []reconcile.Unit {
		if i == 2 { // the queue took it, then it vanished
			lost = u.Keys
			return nil
		}
		return []reconcile.Unit{u}
	}}
	if _, err := r.Find(ctx, q); err != nil {
		t.Fatal(err)
	}
	work(t, r, q.take())
	for _, k := range lost {
		if n := e.sim.Delivered(k); n != 0 {
			t.Fatalf("lost unit's key %s delivered %d times before it was found again", k, n)
		}
	}
	rep, err := r.Find(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Found != len(lost) || len(lost) != 10 {
		t.Fatalf("second find handed out %d rows, want the lost unit's %d", rep.Found, len(lost))
	}
	work(t, r, q.take())
	e.deliveredOnce(t, keys)
}

func TestDuplicatedUnitSendsOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		wrap func(a providertest.Adapter) provider.Adapter
	}{
		{"NoCapabilitiesOTPPolicy", func(a providertest.Adapter) provider.Adapter { return providertest.NoCapabilities(a) }},
		{"LookupOnly", func(a providertest.Adapter) provider.Adapter { return providertest.LookupOnly(a) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, simulator.Options{IdempotencyDisabled: true})
			keys := e.uncertain(t, 60, "otp")
			e.advance(2 * time.Minute)
			r := e.fanout(t, tc.wrap(e.prov))
			q := &memQueue{mangle: func(_ int, u reconcile.Unit) []reconcile.Unit { return []reconcile.Unit{u, u, u} }}
			if _, err := r.Find(ctx, q); err != nil {
				t.Fatal(err)
			}
			units := q.take()
			if len(units) != 18 {
				t.Fatalf("%d units, want 6 three times", len(units))
			}
			acts := work(t, r, units)
			if acts[reconcile.ActionResent] != 60 || acts[reconcile.ActionResent]+acts[reconcile.ActionNotDue]+acts[reconcile.ActionConflict] != 180 {
				t.Errorf("actions %v, want 60 resent and 120 not due or conflicts", acts)
			}
			e.deliveredOnce(t, keys)
		})
	}
}

// killing is a provider whose send of one key reaches the provider and
// then never returns: the worker dies between its send and its Mark.
type killing struct {
	providertest.Adapter
	key     string
	reached chan struct{}
	hold    chan struct{}
}

func (k *killing) Send(ctx context.Context, m provider.Message) (provider.Receipt, error) {
	rc, err := k.Adapter.Send(ctx, m)
	if m.Key == k.key {
		close(k.reached)
		<-k.hold
		return provider.Receipt{}, context.Canceled
	}
	return rc, err
}

func TestWorkerKilledMidUnit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t, simulator.Options{IdempotencyDisabled: true})
	keys := e.uncertain(t, 20, "otp")
	e.advance(2 * time.Minute)
	q := &memQueue{}
	if _, err := e.fanout(t, e.prov).Find(ctx, q); err != nil {
		t.Fatal(err)
	}
	units := q.take()
	victim := units[0].Keys[3]
	kp := &killing{Adapter: providertest.LookupOnly(e.prov), key: victim, reached: make(chan struct{}), hold: make(chan struct{})}
	dying := e.fanout(t, kp)
	go dying.Work(ctx, units[0]) // never finishes while hold is open
	<-kp.reached
	defer close(kp.hold)

	// SQS hands the unit out again after its visibility timeout, to a
	// healthy worker: the victim's row is held (its lease has not passed),
	// its unit's other rows are done; the second unit is done by it.
	healthy := e.fanout(t, providertest.LookupOnly(e.prov))
	// Let the dying worker finish its unit's other rows first.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		done := 0
		for _, k := range units[0].Keys {
			if r, err := e.ledger.Get(ctx, k); err == nil && r.State == ledger.StateSent {
				done++
			}
		}
		if done == len(units[0].Keys)-1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the dying worker settled %d of its unit's other %d rows", done, len(units[0].Keys)-1)
		}
	}
	acts := work(t, healthy, units)
	if acts[reconcile.ActionNotDue] != 10 || acts[reconcile.ActionResent] != 10 {
		t.Errorf("redelivery: %v, want the first unit not due (9 done, the victim held) and the second resent", acts)
	}
	if row, _ := e.ledger.Get(ctx, victim); row.State != ledger.StatePending {
		t.Fatalf("victim row %s, want PENDING under the dead worker's lease", row.State)
	}
	// The lease and the settle time pass; the finder finds the row again and
	// a lookup shows the dead worker's send reached the provider.
	e.advance(3 * time.Minute)
	rep, err := healthy.Find(ctx, q)
	if err != nil || rep.Found != 1 {
		t.Fatalf("find after the lease = %+v, %v; want the victim's row alone", rep, err)
	}
	acts = work(t, healthy, q.take())
	if acts[reconcile.ActionReconciledSent] != 1 {
		t.Errorf("after the lease: %v, want the victim reconciled as sent by lookup", acts)
	}
	e.deliveredOnce(t, keys)
}

// TestSQSFanOut runs the fan-out through moto_server's SQS: Find hands
// out with SendMessageBatch, workers receive and run HandleSQS, units
// they finish are deleted. Every message is delivered once.
func TestSQSFanOut(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t, simulator.Options{IdempotencyDisabled: true})
	keys := e.uncertain(t, 120, "otp")
	e.advance(2 * time.Minute)
	client := testenv.SQSAt(testenv.MotoEndpoint(t))
	qo, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("units-" + testenv.RandomID())})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = client.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: qo.QueueUrl}) })
	q := &reconcile.SQSQueue{Client: client, QueueURL: aws.ToString(qo.QueueUrl)}
	r := e.fanout(t, providertest.NoCapabilities(e.prov))
	rep, err := r.Find(ctx, q)
	if err != nil || rep.Units != 12 || rep.Found != 120 {
		t.Fatalf("find = %+v, %v; want 120 rows in 12 units", rep, err)
	}
	if n, err := q.Waiting(ctx); err != nil || n != 12 {
		t.Fatalf("waiting = %d, %v; want 12", n, err)
	}
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: qo.QueueUrl, MaxNumberOfMessages: 2, VisibilityTimeout: 60})
				if err != nil {
					t.Error(err)
					return
				}
				if len(out.Messages) == 0 {
					return
				}
				ev := events.SQSEvent{}
				for _, m := range out.Messages {
					ev.Records = append(ev.Records, events.SQSMessage{MessageId: aws.ToString(m.MessageId), Body: aws.ToString(m.Body)})
				}
				resp := r.HandleSQS(ctx, ev, slog.New(slog.DiscardHandler))
				if len(resp.BatchItemFailures) != 0 {
					t.Errorf("batch item failures %v", resp.BatchItemFailures)
				}
				for _, m := range out.Messages {
					if _, err := client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: qo.QueueUrl, ReceiptHandle: m.ReceiptHandle}); err != nil {
						t.Error(err)
					}
				}
			}
		}()
	}
	wg.Wait()
	e.deliveredOnce(t, keys)
}

func TestParseUnit(t *testing.T) {
	t.Parallel()
	for _, body := range []string{"", "{", `{"keys":[]}`, `{"keys":[""]}`, `[1]`} {
		if _, err := reconcile.ParseUnit(body); err == nil {
			t.Errorf("ParseUnit(%q) = nil error, want one", body)
		}
	}
	u, err := reconcile.ParseUnit(`{"keys":["a","b"],"found_at":"2026-12-01T00:00:00Z"}`)
	if err != nil || fmt.Sprint(u.Keys) != "[a b]" {
		t.Errorf("ParseUnit = %v, %v", u, err)
	}
}
