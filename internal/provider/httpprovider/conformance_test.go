package httpprovider_test

import (
	"net"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/provider/httpprovider"
	"github.com/sendonce/sendonce/internal/provider/simulator"
	"github.com/sendonce/sendonce/provider"
	"github.com/sendonce/sendonce/provider/providertest"
)

// TestConformance runs the public provider conformance suite against the
// HTTP adapter and the provider simulator, with the simulator's own
// records as the count of what the provider received.
func TestConformance(t *testing.T) {
	t.Parallel()
	sim := simulator.New(simulator.Options{Token: testToken})
	t.Cleanup(sim.Close)
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(srv.Close)

	stalled := simulator.New(simulator.Options{Token: testToken})
	t.Cleanup(stalled.Close)
	stalled.AddFault(simulator.Fault{Kind: simulator.FaultTimeoutAfterAccept})
	stalledSrv := httptest.NewServer(stalled.Handler())
	t.Cleanup(stalledSrv.Close)

	adapter := func(t *testing.T, url string) provider.Adapter {
		t.Helper()
		p, err := httpprovider.New(httpprovider.Config{BaseURL: url, Token: testToken, Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	message := func(key, to string) provider.Message {
		return provider.Message{Key: key, Tenant: "acme", Channel: "sms", Class: "transactional", To: to, Body: "Your order shipped"}
	}
	providertest.Run(t, providertest.Harness{
		New:     func(t *testing.T) provider.Adapter { return adapter(t, srv.URL) },
		Message: func(_ *testing.T, key string) provider.Message { return message(key, testPhone) },
		Received: func(_ *testing.T, key string) int {
			n := 0
			for _, m := range sim.Messages() {
				if m.Reference == key {
					n++
				}
			}
			return n
		},
		Refused: func(_ *testing.T, key string) provider.Message {
			sim.AddFault(simulator.Fault{Kind: simulator.FaultStatus, Status: 400, Reference: key}) // refused for good
			return message(key, testPhone)
		},
		Stalled: func(t *testing.T) provider.Adapter { return adapter(t, stalledSrv.URL) },
		Unreachable: func(t *testing.T) provider.Adapter {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := l.Addr().String()
			l.Close() // nothing listens there now
			return adapter(t, "http://"+addr)
		},
	})
}
