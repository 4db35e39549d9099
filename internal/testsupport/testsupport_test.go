package testsupport_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/provider"
	"github.com/sendonce/sendonce/internal/provider/httpprovider"
	"github.com/sendonce/sendonce/internal/provider/simulator"
	"github.com/sendonce/sendonce/internal/testsupport"
)

func TestClock(t *testing.T) {
	t.Parallel()
	c := testsupport.NewClock(testsupport.Start)
	if got := c.Now(); !got.Equal(testsupport.Start) {
		t.Fatalf("Now = %v, want %v", got, testsupport.Start)
	}
	if got, want := c.Advance(90*time.Second), testsupport.Start.Add(90*time.Second); !got.Equal(want) || !c.Now().Equal(want) {
		t.Errorf("Advance = %v (Now %v), want %v", got, c.Now(), want)
	}
	if got, want := c.Advance(-30*time.Second), testsupport.Start.Add(time.Minute); !got.Equal(want) {
		t.Errorf("Advance(-30s) = %v, want %v", got, want)
	}
	later := testsupport.Start.Add(time.Hour)
	c.Set(later)
	if got := c.Now(); !got.Equal(later) {
		t.Errorf("after Set: Now = %v, want %v", got, later)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { c.Advance(time.Second); _ = c.Now() })
	}
	wg.Wait()
	if got, want := c.Now(), later.Add(8*time.Second); !got.Equal(want) {
		t.Errorf("after 8 concurrent Advance(1s): %v, want %v", got, want)
	}
}

func TestBuffer(t *testing.T) {
	t.Parallel()
	var b testsupport.Buffer
	log := b.Logger(-4) // slog.LevelDebug
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() { log.Debug("line", "i", i) })
	}
	wg.Wait()
	if got := strings.Count(b.String(), `"msg":"line"`); got != 16 {
		t.Errorf("buffer holds %d lines, want 16:\n%s", got, b.String())
	}
	if _, err := fmt.Fprint(&b, "tail"); err != nil || !strings.HasSuffix(b.String(), "tail") {
		t.Errorf("Write: err %v, buffer ends %q", err, b.String()[max(0, len(b.String())-10):])
	}
}

// TestRestricted: the wrappers change what the adapter claims, never what
// it does, and the simulator they drive is served until the test ends.
func TestRestricted(t *testing.T) {
	t.Parallel()
	sim, url := testsupport.Simulator(t, simulator.Options{Token: "tok"})
	p, err := httpprovider.New(httpprovider.Config{BaseURL: url, Token: "tok", Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := testsupport.LookupOnly(p).Capabilities(), (provider.Capabilities{LookupByReference: true}); got != want {
		t.Errorf("LookupOnly: %+v, want %+v", got, want)
	}
	none := testsupport.NoCapabilities(p)
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
