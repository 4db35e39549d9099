package main

import (
	"context"
	"testing"

	"github.com/sendonce/sendonce/internal/dispatch"
	"github.com/sendonce/sendonce/internal/ledger/memledger"
	"github.com/sendonce/sendonce/internal/testenv"
	"github.com/sendonce/sendonce/notify"
	"github.com/sendonce/sendonce/provider/providertest"
)

// BenchmarkSenderMemLedger measures the sender's own CPU and allocations
// per message: sender.Process of a new request with the in-memory ledger
// and the func-field fake provider, so neither DynamoDB nor HTTP is in it.
// `make bench` runs it with every other Go benchmark.
func BenchmarkSenderMemLedger(b *testing.B) {
	s, err := newSender(memledger.New(memledger.Config{}), &providertest.Fake{ProviderName: "http"})
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
		if res := s.Process(ctx, reqs[i]); res.Disposition != dispatch.Sent {
			b.Fatalf("process: status %s (%s), want sent", res.Disposition, res.Reason)
		}
	}
}
