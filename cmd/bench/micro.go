package main

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"testing"

	"github.com/sendonce/sendonce/internal/benchreport"
	"github.com/sendonce/sendonce/internal/ledger/memledger"
	"github.com/sendonce/sendonce/internal/notify"
	"github.com/sendonce/sendonce/internal/provider/providertest"
	"github.com/sendonce/sendonce/internal/sender"
	"github.com/sendonce/sendonce/internal/testenv"
)

// BenchmarkSenderMemLedger measures the sender's own CPU and allocations
// per message: sender.Process of a new request with the in-memory ledger
// and the func-field fake provider, so neither DynamoDB nor HTTP is in it.
func BenchmarkSenderMemLedger(b *testing.B) {
	s, err := newSender(memledger.New(), &providertest.Fake{ProviderName: "http"})
	if err != nil {
		b.Fatal(err)
	}
	run := testenv.RandomID()
	reqs := make([]notify.Request, b.N)
	for i := range reqs {
		reqs[i] = request(run, i)
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if res := s.Process(ctx, reqs[i]); res.Status != sender.StatusSent {
			b.Fatalf("process: status %s (%s), want sent", res.Status, res.Reason)
		}
	}
}

// measureMicro runs BenchmarkSenderMemLedger in process and the key and
// request-parsing benchmarks with go test, and adds their figures.
func measureMicro(ctx context.Context, rep *benchreport.Report) error {
	r := testing.Benchmark(BenchmarkSenderMemLedger)
	if r.N == 0 {
		return fmt.Errorf("BenchmarkSenderMemLedger failed (see its output above)")
	}
	how := fmt.Sprintf("testing.Benchmark in cmd/bench: sender.Process of new requests, memledger + providertest.Fake (no I/O), %d iterations", r.N)
	rep.Add("micro", "sender per message (memledger)", float64(r.NsPerOp()), "ns/op", how)
	rep.Add("micro", "sender per message (memledger): bytes", float64(r.AllocedBytesPerOp()), "B/op", how)
	rep.Add("micro", "sender per message (memledger): allocations", float64(r.AllocsPerOp()), "allocs/op", how)

	cmd := exec.CommandContext(ctx, "go", "test", "-run", "^$", "-bench", "^Benchmark(Derive|Parse)$", "-benchmem", "-count", "1",
		"./internal/sendkey", "./internal/notify")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go test -bench: %w: %s", err, firstLine(errOut.String()+out.String()))
	}
	res, err := benchreport.ParseGoBench(&out)
	if err != nil {
		return err
	}
	want := map[string]string{
		"BenchmarkDerive": "sendkey.Derive (the idempotency key)",
		"BenchmarkParse":  "notify.Parse (request body)",
	}
	seen := 0
	for _, b := range res {
		label, ok := want[b.Name]
		if !ok {
			continue
		}
		seen++
		how := fmt.Sprintf("go test -bench %s -benchmem, %d iterations, GOMAXPROCS %d", b.Name, b.N, b.Procs)
		rep.Add("micro", label, b.Metrics["ns/op"], "ns/op", how)
		rep.Add("micro", label+": bytes", b.Metrics["B/op"], "B/op", how)
		rep.Add("micro", label+": allocations", b.Metrics["allocs/op"], "allocs/op", how)
	}
	if seen != len(want) {
		return fmt.Errorf("go test -bench gave %d of the %d expected benchmarks:\n%s", seen, len(want), out.String())
	}
	return nil
}
