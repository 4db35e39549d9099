package reconcile_test

// make drain-bench: a backlog of released rows on DynamoDB Local, handed
// out by Find and drained by 1, 4 and 16 reconcile workers, each the real
// functions/reconcileworker bootstrap under the Lambda RIE, against the
// provider simulator. Without -drain, make test runs it small (50 rows,
// 2 workers) for its exactly-once assertions; the figure takes minutes.

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sendonce/sendonce/internal/dispatch"
	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/ledger/dynamoledger"
	"github.com/sendonce/sendonce/internal/provider/simulator"
	"github.com/sendonce/sendonce/internal/reconcile"
	"github.com/sendonce/sendonce/internal/rie"
	"github.com/sendonce/sendonce/internal/testenv"
	"github.com/sendonce/sendonce/internal/testsupport"
)

var (
	drain        = flag.Bool("drain", false, "run the drain figure (make drain-bench)")
	drainRows    = flag.Int("drain.rows", 20000, "released rows per level")
	drainLevels  = flag.String("drain.levels", "1,4,16", "worker counts")
	drainLatency = flag.Duration("drain.latency", 100*time.Millisecond, "the provider simulator's answer time")
)

func TestDrainUnderRIE(t *testing.T) {
	rows, levels, latency := *drainRows, *drainLevels, *drainLatency
	if !*drain {
		rows, levels, latency = 50, "2", 10*time.Millisecond
	}
	ctx := context.Background()
	// make test's prebuilt bootstrap (rie.Build), not a build of its own.
	bootstrap := rie.Build(t, "reconcileworker")
	sim := simulator.New(simulator.Options{Token: "tok", IdempotencyDisabled: true})
	sim.SetLatency(latency, 0)
	srv := httptest.NewServer(sim.Handler())
	defer func() { srv.Close(); sim.Close() }()
	db := testenv.DynamoDB(t)

	t.Logf("%d released rows per level, provider answering in %s, each worker one RIE instance settling 4 rows of a unit at once", rows, latency)
	t.Logf("%-8s %10s %10s %10s", "workers", "seconds", "rows/s", "delivered")
	for _, s := range strings.Split(levels, ",") {
		workers, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || workers <= 0 {
			t.Fatalf("level %q", s)
		}
		table := testenv.NewTable(t, db)
		l, err := dynamoledger.New(db, table, dynamoledger.Config{})
		if err != nil {
			t.Fatal(err)
		}
		keys := released(t, l, rows, workers)
		r, err := reconcile.New(reconcile.Config{Dispatcher: testsupport.Dispatcher(t, dispatch.Dispatcher{Ledger: l, ProviderTimeout: 5 * time.Second, ClaimTimeout: time.Minute}), MaxRows: rows, PageSize: 1000})
		if err != nil {
			t.Fatal(err)
		}
		q := &memQueue{}
		if rep, err := r.Find(ctx, q); err != nil || rep.Found != len(keys) {
			t.Fatalf("find: %+v, %v; want %d rows", rep, err, len(keys))
		}
		units := make(chan reconcile.Unit, len(q.units))
		for _, u := range q.take() {
			units <- u
		}
		close(units)
		env := map[string]string{
			"AWS_ENDPOINT_URL_DYNAMODB": testenv.DynamoDBEndpoint(t), "SENDONCE_TABLE": table,
			"SENDONCE_SMS_PROVIDER": "http", "SENDONCE_HTTP_PROVIDER_URL": srv.URL, "SENDONCE_HTTP_PROVIDER_TOKEN": "tok",
			"SENDONCE_RECONCILE_CONCURRENCY": "4", "SENDONCE_LOG_LEVEL": "error",
		}
		insts := make([]*rie.Instance, workers)
		for i := range insts {
			if insts[i], err = rie.Launch(ctx, rie.Config{Bootstrap: bootstrap, FunctionName: "sendonce-reconcileworker", Timeout: 60 * time.Second, Env: env}); err != nil {
				t.Fatal(err)
			}
			defer insts[i].Close()
		}
		start := time.Now()
		var wg sync.WaitGroup
		for _, in := range insts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for u := range units {
					b, _ := json.Marshal(u)
					ev, _ := json.Marshal(events.SQSEvent{Records: []events.SQSMessage{{MessageId: u.Keys[0], Body: string(b)}}})
					out, err := in.Invoke(ctx, ev)
					if err != nil {
						t.Errorf("invoke: %v %s", err, out)
						return
					}
				}
			}()
		}
		wg.Wait()
		took := time.Since(start)
		delivered := 0
		for _, k := range keys {
			if n := sim.Delivered(k); n > 1 {
				t.Errorf("%s delivered %d times", k, n)
			} else {
				delivered += n
			}
		}
		if delivered != len(keys) {
			t.Errorf("%d workers: %d of %d rows delivered", workers, delivered, len(keys))
		}
		t.Logf("%-8d %10.1f %10.0f %10d", workers, took.Seconds(), float64(len(keys))/took.Seconds(), delivered)
	}
}

// released writes n released rows (claimed, then released before any
// send: nothing reached the provider), due now.
func released(t *testing.T, l *dynamoledger.Ledger, n, level int) []string {
	t.Helper()
	ctx := context.Background()
	keys := make([]string, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	errs := make(chan error, 1)
	for i := range n {
		keys[i] = key(level*1_000_000 + i)
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			c, err := l.Claim(ctx, ledger.Entry{Key: keys[i], Tenant: "acme", Channel: "sms", Class: "otp", Provider: "http",
				Template: "otp", RecipientID: "user-1", Address: "+15551230000", Body: "code " + fmt.Sprint(i)}, time.Minute)
			if err == nil {
				err = l.Release(ctx, c, "transient: 503", time.Now().Add(-time.Second))
			}
			if err != nil {
				select {
				case errs <- err:
				default:
				}
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	return keys
}
