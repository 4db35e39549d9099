package providertest_test

import (
	"context"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/provider/httpprovider"
	"github.com/sendonce/sendonce/internal/provider/simulator"
	"github.com/sendonce/sendonce/internal/testsupport"
	"github.com/sendonce/sendonce/provider"
	"github.com/sendonce/sendonce/provider/providertest"
)

// TestRestricted: the wrappers change what the adapter claims, never what
// it does, and the simulator they drive is served until the test ends.
func TestRestricted(t *testing.T) {
	t.Parallel()
	sim, url := testsupport.Simulator(t, simulator.Options{Token: "tok"})
	p, err := httpprovider.New(httpprovider.Config{BaseURL: url, Token: "tok", Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := providertest.LookupOnly(p).Capabilities(), (provider.Capabilities{LookupByReference: true}); got != want {
		t.Errorf("LookupOnly: %+v, want %+v", got, want)
	}
	none := providertest.NoCapabilities(p)
	if got := none.Capabilities(); got != (provider.Capabilities{}) {
		t.Errorf("NoCapabilities: %+v, want none", got)
	}
	m := provider.Message{Key: "v1_testsupport", Tenant: "acme", Channel: "sms", To: "+15550001111", Body: "hi"}
	if _, err := none.Send(context.Background(), m); err != nil {
		t.Fatalf("Send through the wrapper: %v", err)
	}
	if got := sim.Delivered(m.Key); got != 1 {
		t.Errorf("simulator delivered %s %d times, want 1", m.Key, got)
	}
	if res, err := none.Lookup(context.Background(), m); err != nil || res.Status != provider.LookupAccepted {
		t.Errorf("Lookup through the wrapper: %+v, %v; want accepted", res, err)
	}
}
