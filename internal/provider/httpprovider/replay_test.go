package httpprovider_test

import (
	"context"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/provider/httpprovider"
	"github.com/sendonce/sendonce/internal/provider/simulator"
	"github.com/sendonce/sendonce/internal/testsupport"
	"github.com/sendonce/sendonce/provider"
)

// TestNoTransparentReplay reproduces the duplicates `make chaos -seed 1`
// found on the lookup-only provider: a POST carrying Idempotency-Key is
// replayable for net/http, so when a reused keep-alive connection is reset
// after the provider accepted, the transport silently sends it again. A
// provider that ignores the key delivers twice, and the adapter reports a
// clean success instead of the ambiguous outcome docs/http-provider.md prescribes.
func TestNoTransparentReplay(t *testing.T) {
	t.Parallel()
	sim, url := testsupport.Simulator(t, simulator.Options{Token: "tok", IdempotencyDisabled: true})
	p, err := httpprovider.New(httpprovider.Config{BaseURL: url, Token: "tok", Timeout: 2 * time.Second, DisableIdempotency: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	msg := func(key string) provider.Message {
		return provider.Message{Key: key, Channel: "email", To: "ana@example.com", Subject: "s", Body: "b"}
	}
	// A first send leaves a keep-alive connection for the second to reuse.
	if _, err := p.Send(ctx, msg("v1_warmup")); err != nil {
		t.Fatalf("warm-up send: %v", err)
	}
	key := "v1_reset_after_accept"
	sim.AddFault(simulator.Fault{Kind: simulator.FaultResetAfterAccept, Reference: key, Count: 1})
	_, err = p.Send(ctx, msg(key))
	if got, want := sim.Delivered(key), 1; got != want {
		t.Errorf("delivered %d times, want %d (the transport replayed the POST)", got, want)
	}
	if err == nil || provider.KindOf(err) != provider.Ambiguous {
		t.Errorf("Send after a reset following acceptance: err %v, want an ambiguous error", err)
	}
}
