package main

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/benchreport"
	"github.com/sendonce/sendonce/internal/dispatch"
	"github.com/sendonce/sendonce/internal/testenv"
	"github.com/sendonce/sendonce/provider"
)

func TestCountingProvider(t *testing.T) {
	t.Parallel()
	p := newCountingProvider()
	ctx := context.Background()
	m := provider.Message{Key: "v1_0123456789abcdef"}
	p.lose.Store(true)
	if _, err := p.Send(ctx, m); provider.KindOf(err) != provider.Ambiguous {
		t.Errorf("first send while losing: %v, want an ambiguous error", err)
	}
	if _, err := p.Send(ctx, m); err != nil {
		t.Errorf("second send while losing: %v, want only the first response lost", err)
	}
	p.lose.Store(false)
	if _, err := p.Send(ctx, provider.Message{Key: "v1_fedcba9876543210"}); err != nil {
		t.Errorf("send: %v", err)
	}
	if s, d := p.takePhase(); s != 3 || d != 1 {
		t.Errorf("takePhase = %d sends, %d duplicates; want 3, 1", s, d)
	}
	if s, d := p.takePhase(); s != 0 || d != 0 {
		t.Errorf("takePhase after take = %d, %d; want 0, 0", s, d)
	}
}

func TestPercentile(t *testing.T) {
	t.Parallel()
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	if got := percentile(ds, 99); got != 99*time.Millisecond {
		t.Errorf("p99 = %s, want 99ms", got)
	}
	if got := percentile(ds, 50); got != 50*time.Millisecond {
		t.Errorf("p50 = %s, want 50ms", got)
	}
	if got := percentile(nil, 99); got != 0 {
		t.Errorf("p99 of none = %s, want 0", got)
	}
}

func TestProcStatBusy(t *testing.T) {
	t.Parallel()
	// user nice system idle iowait irq softirq steal guest guest_nice
	if got, want := procStatBusy([]byte("cpu  100 5 50 1000 20 3 2 1 40 0\ncpu0 1 2 3 4\n")), 161*time.Second/100; got != want {
		t.Errorf("procStatBusy = %s, want %s (161 busy ticks)", got, want)
	}
	if got := procStatBusy([]byte("intr 1 2 3\n")); got != 0 {
		t.Errorf("procStatBusy(no cpu line) = %s, want 0", got)
	}
}

func TestCPUWatchSelf(t *testing.T) {
	t.Parallel()
	w := newCPUWatch(0, 0) // no process of ours: everything is "other"
	w.Begin()
	deadline := time.Now().Add(100 * time.Millisecond)
	for time.Now().Before(deadline) {
	}
	others, _, ok := w.End()
	if !ok || others < 0.2 {
		t.Errorf("End = %.2f cores (ok %v) while this test spun a core; want at least 0.2", others, ok)
	}
}

// BenchmarkPeerSender is the sendonce side of the peer section's first
// sends, for a CPU profile of the sender path (docs/benchmarks.md):
// sender.Process of fresh keys over dynamoledger on DynamoDB Local with the
// counting no-op provider, 16 goroutines.
//
//	scripts/local-aws.sh run go test -run '^$' -bench BenchmarkPeerSender -cpuprofile cpu.out ./cmd/bench
func BenchmarkPeerSender(b *testing.B) {
	db := testenv.DynamoDB(b)
	table := testenv.NewTable(b, db)
	s, err := peerSender(db, table, newCountingProvider())
	if err != nil {
		b.Fatal(err)
	}
	run := testenv.RandomID()
	var seq atomic.Int64
	ctx := context.Background()
	b.SetParallelism(max(1, 16/runtime.GOMAXPROCS(0)))
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if res := s.Process(ctx, request(run, int(seq.Add(1)))); res.Disposition != dispatch.Sent {
				b.Errorf("process: %s (%s), want sent", res.Disposition, res.Reason)
				return
			}
		}
	})
}

// TestMeasurePeer runs a small peer section end to end (Node driver, cost
// proxy, both sides, throughput rounds) and checks what must hold whatever
// the ledger writes. It needs bench/'s Node package (make test installs
// it).
func TestMeasurePeer(t *testing.T) {
	t.Parallel()
	rep := &benchreport.Report{}
	cfg := peerConfig{NodeDir: "../../bench", InFlight: 4, Fresh: 6, Concurrent: 3, PerKey: 4, Lost: 2, Large: 1,
		Rounds: 2, Round: 150 * time.Millisecond, Warmup: 100 * time.Millisecond}
	if err := measurePeer(context.Background(), testenv.DynamoDBEndpoint(t), cfg, rep); err != nil {
		t.Fatalf("measurePeer: %v", err)
	}
	want := map[string]float64{
		"Powertools, first send: DynamoDB calls":             2,
		"Powertools, first send: write units, real DynamoDB": 2,
		"Powertools, duplicate: write units, real DynamoDB":  1,
		"Powertools, duplicate: write units, DynamoDB Local": 0,
		"sendonce, duplicate: write units, real DynamoDB":    1,
		// Issue 15's floor by default; the optional event index adds its
		// entry (EventIndex=true).
		"sendonce, first send: write units, real DynamoDB":              2,
		"sendonce, first send, event index: write units, real DynamoDB": 3,
		"Powertools, lost response: duplicate sends":                    float64(cfg.Lost),
	}
	for _, ph := range []string{"first send", "duplicate", "concurrent", "lost response", "first send, 20 KB email", "first send, event index"} {
		want["sendonce, "+ph+": duplicate sends"] = 0
	}
	for _, ph := range []string{"first send", "first send, event index"} {
		row, _ := rep.Find("peer", "sendonce, "+ph+": write units, real DynamoDB")
		t.Logf("sendonce, %s: %v WCU/msg (%s)", ph, row.Value, row.How)
	}
	for name, v := range want {
		if row, ok := rep.Find("peer", name); !ok || row.Value != v {
			t.Errorf("%s = %v (found %v), want %v", name, row.Value, ok, v)
		}
	}
	for _, name := range []string{"sendonce first send (median)", "Powertools first send (median)", "sendonce / Powertools, first send (median of rounds)",
		"sendonce p99 first send / p99 Go raw put", "Powertools p99 first send / p99 JS raw put"} {
		if row, ok := rep.Find("peer", name); !ok || !(row.Value > 0) {
			t.Errorf("%s = %v (found %v), want a positive figure", name, row.Value, ok)
		}
	}
	if row, _ := rep.Find("peer", "sendonce first send (median)"); len(row.Samples) != cfg.Rounds {
		t.Errorf("sendonce first send has %d samples, want one per round (%d)", len(row.Samples), cfg.Rounds)
	}
}
