package main

import (
	"context"
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/provider/simulator"
	"github.com/sendonce/sendonce/internal/testsupport"
)

const simToken = "sim-token"

// request returns a send request for key as sendonce encodes it.
func request(t *testing.T, op, key, channel string) json.RawMessage {
	t.Helper()
	m := base()
	m["op"], m["key"], m["channel"] = op, key, channel
	if channel == "email" {
		m["to"] = "ana@example.com"
		m["content"] = map[string]any{"subject": "Shipped", "text": "Your order shipped", "html": "<p>Your order <b>shipped</b></p>"}
	}
	return encode(t, m)
}

func key(n string) string { return "v1_" + strings.Repeat(n, 64)[:64] }

// TestHandlerForwards: each answer of the gateway (the provider
// simulator, with its faults) becomes the protocol's answer, or a function
// error when the gateway may have taken the message; the simulator's
// deliveries are the ground truth.
func TestHandlerForwards(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		fault *simulator.Fault
		// status is the answer's; "" means Handle fails.
		status, code string
		delivered    int
	}{
		{name: "Accepted", status: StatusAccepted, delivered: 1},
		{name: "Rejected400", fault: &simulator.Fault{Kind: simulator.FaultStatus, Status: 400}, status: StatusRejected, code: "400"},
		{name: "Rejected422", fault: &simulator.Fault{Kind: simulator.FaultStatus, Status: 422}, status: StatusRejected, code: "422"},
		{name: "Throttled", fault: &simulator.Fault{Kind: simulator.FaultStatus, Status: 429}, status: StatusRetry, code: "429"},
		{name: "Unavailable", fault: &simulator.Fault{Kind: simulator.FaultStatus, Status: 503}, status: StatusRetry, code: "503"},
		// Another 5xx may hide an accepted message: a function error.
		{name: "InternalError", fault: &simulator.Fault{Kind: simulator.FaultStatus, Status: 500}},
		{name: "BadGateway", fault: &simulator.Fault{Kind: simulator.FaultStatus, Status: 502}},
		{name: "ResetAfterAccept", fault: &simulator.Fault{Kind: simulator.FaultResetAfterAccept}, delivered: 1},
		{name: "ResetBeforeAccept", fault: &simulator.Fault{Kind: simulator.FaultResetBeforeAccept}},
		{name: "HangAfterAccept", fault: &simulator.Fault{Kind: simulator.FaultTimeoutAfterAccept}, delivered: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sim, url := testsupport.Simulator(t, simulator.Options{Token: simToken})
			if tt.fault != nil {
				sim.AddFault(*tt.fault)
			}
			// Margin is what lets the handler answer before the deadline
			// when the gateway hangs, on a loaded machine too (100 ms was
			// once passed by 63 ms under make test's load).
			h := &Handler{BaseURL: url, Token: simToken}
			k := key("a")
			// The invocation's deadline, as Lambda gives it.
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			start := time.Now()
			a, err := h.Handle(ctx, request(t, OpSend, k, "email"))
			if tt.status == "" {
				if err == nil {
					t.Fatalf("Handle = %+v; want a function error (the gateway may have the message)", a)
				}
				if d := time.Since(start); d > 2*time.Second {
					t.Errorf("Handle took %s, past the invocation's deadline", d)
				}
			} else if err != nil || a.Status != tt.status || a.Code != tt.code || a.Version != 1 {
				t.Fatalf("Handle = %+v, %v; want status %s, code %q", a, err, tt.status, tt.code)
			}
			if got := sim.Delivered(k); got != tt.delivered {
				t.Errorf("the simulator delivered %d, want %d", got, tt.delivered)
			}
			if tt.status == StatusAccepted {
				msg := sim.Messages()[0]
				if a.ID != msg.ID || msg.HTML != "<p>Your order <b>shipped</b></p>" || msg.Subject != "Shipped" || msg.IdempotencyKey != k {
					t.Errorf("answer %+v for the simulator's %+v", a, msg)
				}
				// A repeat of the key: the same id, nothing new delivered.
				again, err := h.Handle(context.Background(), request(t, OpSend, k, "email"))
				if err != nil || again.ID != a.ID || sim.Delivered(k) != 1 {
					t.Errorf("repeat = %+v, %v with %d delivered; want %s once", again, err, sim.Delivered(k), a.ID)
				}
			}
		})
	}
}

// TestHandlerGatewayUnreachable: nothing could be written: retry, not a
// function error; a wrong token is the function's configuration: retry.
func TestHandlerGatewayUnreachable(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	a, err := (&Handler{BaseURL: closed, Token: simToken}).Handle(context.Background(), request(t, OpSend, key("b"), "sms"))
	if err != nil || a.Status != StatusRetry {
		t.Errorf("unreachable: %+v, %v; want retry", a, err)
	}
	sim, url := testsupport.Simulator(t, simulator.Options{Token: simToken})
	a, err = (&Handler{BaseURL: url, Token: "wrong"}).Handle(context.Background(), request(t, OpSend, key("b"), "sms"))
	if err != nil || a.Status != StatusRetry || a.Code != "401" || sim.Delivered(key("b")) != 0 {
		t.Errorf("wrong token: %+v, %v; want retry 401 and nothing delivered", a, err)
	}
}

// TestHandlerRefusesBadRequests: a request of another version is retried
// (the function is older than sendonce), a broken one rejected; neither
// reaches the gateway.
func TestHandlerRefusesBadRequests(t *testing.T) {
	t.Parallel()
	sim, url := testsupport.Simulator(t, simulator.Options{Token: simToken})
	h := &Handler{BaseURL: url, Token: simToken}
	v2 := base()
	v2["version"] = 2
	broken := base()
	delete(broken, "to")
	for _, tt := range []struct {
		payload []byte
		status  string
	}{{encode(t, v2), StatusRetry}, {encode(t, broken), StatusRejected}, {[]byte(`"hi"`), StatusRejected}} {
		a, err := h.Handle(context.Background(), tt.payload)
		if err != nil || a.Status != tt.status {
			t.Errorf("%s: %+v, %v; want %s", tt.payload, a, err, tt.status)
		}
	}
	if st := sim.Stats(); st.Requests != 0 {
		t.Errorf("the gateway got %d requests, want none", st.Requests)
	}
}

func TestHandlerLookup(t *testing.T) {
	t.Parallel()
	sim, url := testsupport.Simulator(t, simulator.Options{Token: simToken})
	h := &Handler{BaseURL: url, Token: simToken}
	ctx := context.Background()
	sent, failed, absent := key("c"), key("d"), key("e")
	if _, err := h.Handle(ctx, request(t, OpSend, sent, "sms")); err != nil {
		t.Fatal(err)
	}
	sim.AddFault(simulator.Fault{Kind: simulator.FaultUndeliverable, Reference: failed})
	if _, err := h.Handle(ctx, request(t, OpSend, failed, "sms")); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		key, status string
		id          bool
	}{{sent, StatusAccepted, true}, {failed, StatusRejected, true}, {absent, StatusNotFound, false}} {
		a, err := h.Handle(ctx, request(t, OpLookup, tt.key, "sms"))
		if err != nil || a.Status != tt.status || (a.ID != "") != tt.id {
			t.Errorf("lookup %s: %+v, %v; want %s", tt.key[:5], a, err, tt.status)
		}
	}
	sim.AddFault(simulator.Fault{Kind: simulator.FaultStatus, Op: simulator.OpLookup, Status: 500})
	if a, err := h.Handle(ctx, request(t, OpLookup, sent, "sms")); err != nil || a.Status != StatusRetry {
		t.Errorf("lookup during a gateway failure: %+v, %v; want retry", a, err)
	}
	if got := sim.Delivered(sent) + sim.Delivered(failed); got != 2 {
		t.Errorf("delivered %d, want 2 (lookups send nothing)", got)
	}
}

func TestFromEnv(t *testing.T) {
	t.Parallel()
	if _, err := fromEnv(func(string) string { return "" }); err == nil {
		t.Error("fromEnv accepted an empty environment")
	}
	env := map[string]string{"HTTP_PROVIDER_URL": "http://127.0.0.1:9", "HTTP_PROVIDER_TOKEN": "t"}
	h, err := fromEnv(func(k string) string { return env[k] })
	if err != nil || h.BaseURL != env["HTTP_PROVIDER_URL"] || h.Token != "t" || h.Client == nil {
		t.Errorf("fromEnv = %+v, %v", h, err)
	}
}
