package simulator_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/provider/simulator"
	"github.com/sendonce/sendonce/provider"
)

func TestAdmin(t *testing.T) {
	t.Parallel()
	b := setup(t, simulator.Options{}, "")
	// No fault here is a slow answer: a patient client keeps a loaded
	// machine's late answers from reading as timeouts.
	patient := b.patient(t)
	ctx := context.Background()

	if status, _ := post(t, b, "GET", "/_sim/stats", "wrong", nil, ""); status != http.StatusUnauthorized {
		t.Errorf("stats with a wrong token = %d, want 401", status)
	}
	faults := `[{"kind":"status","status":503,"count":1,"reference":"a"},
	            {"kind":"timeout_after_accept","hang":"10ms","count":1,"reference":"b"}]`
	if status, body := post(t, b, "POST", "/_sim/faults", token, nil, faults); status != http.StatusNoContent {
		t.Fatalf("POST /_sim/faults = %d %s, want 204", status, body)
	}
	status, body := post(t, b, "GET", "/_sim/faults", token, nil, "")
	var listed struct {
		Faults []simulator.Fault `json:"faults"`
	}
	if err := json.Unmarshal([]byte(body), &listed); status != 200 || err != nil || len(listed.Faults) != 2 || listed.Faults[1].Hang != 10*time.Millisecond {
		t.Errorf("GET /_sim/faults = %d %s, want both faults with hang 10ms", status, body)
	}
	if _, err := patient.Send(ctx, msg("a")); provider.KindOf(err) != provider.Transient {
		t.Errorf("send a err = %v, want transient", err)
	}
	for _, k := range []string{"a", "b", "b"} {
		if _, err := patient.Send(ctx, msg(k)); err != nil {
			t.Errorf("send %s: %v", k, err)
		}
	}

	status, body = post(t, b, "GET", "/_sim/delivered?reference=b", token, nil, "")
	var one struct {
		Reference string
		Delivered int
	}
	if err := json.Unmarshal([]byte(body), &one); status != 200 || err != nil || one.Delivered != 1 {
		t.Errorf("GET /_sim/delivered?reference=b = %d %s, want delivered 1", status, body)
	}
	status, body = post(t, b, "GET", "/_sim/delivered", token, nil, "")
	var all struct {
		Delivered  map[string]int
		Duplicates []string
	}
	if err := json.Unmarshal([]byte(body), &all); status != 200 || err != nil || all.Delivered["a"] != 1 || all.Delivered["b"] != 1 || len(all.Duplicates) != 0 {
		t.Errorf("GET /_sim/delivered = %d %s, want a:1 b:1 and no duplicates", status, body)
	}
	status, body = post(t, b, "GET", "/_sim/stats", token, nil, "")
	var st simulator.Stats
	if err := json.Unmarshal([]byte(body), &st); status != 200 || err != nil || st.Accepted != 2 || st.DuplicatesSuppressed != 1 ||
		st.Faults[simulator.FaultStatus] != 1 || st.Faults[simulator.FaultTimeoutAfterAccept] != 1 {
		t.Errorf("GET /_sim/stats = %d %s, want 2 accepted, 1 suppressed, one status and one timeout fault", status, body)
	}
	status, body = post(t, b, "GET", "/_sim/messages", token, nil, "")
	var msgs []simulator.Message
	if err := json.Unmarshal([]byte(body), &msgs); status != 200 || err != nil || len(msgs) != 2 {
		t.Errorf("GET /_sim/messages = %d %s, want 2 messages", status, body)
	}

	if status, body := post(t, b, "POST", "/_sim/random", token, nil, `{"status_rate":1,"statuses":[429]}`); status != http.StatusNoContent {
		t.Fatalf("POST /_sim/random = %d %s", status, body)
	}
	if _, err := patient.Send(ctx, msg("c")); provider.KindOf(err) != provider.Transient {
		t.Errorf("send under status_rate 1 err = %v, want transient", err)
	}
	if status, _ := post(t, b, "DELETE", "/_sim/faults", token, nil, ""); status != http.StatusNoContent {
		t.Errorf("DELETE /_sim/faults = %d, want 204", status)
	}
	if _, err := patient.Send(ctx, msg("c")); err != nil {
		t.Errorf("send after clearing faults: %v", err)
	}
	if status, body := post(t, b, "POST", "/_sim/latency", token, nil, `{"fixed":"60ms"}`); status != http.StatusNoContent {
		t.Fatalf("POST /_sim/latency = %d %s", status, body)
	}
	start := time.Now()
	if _, err := patient.Send(ctx, msg("d")); err != nil || time.Since(start) < 60*time.Millisecond {
		t.Errorf("send with 60ms latency: err %v after %s", err, time.Since(start))
	}

	for _, bad := range []struct{ path, body string }{
		{"/_sim/faults", `{"kind":"status","status":200}`},
		{"/_sim/faults", `{"kind":"timeout_after_accept","hang":"soon"}`},
		{"/_sim/faults", `not json`},
		{"/_sim/random", `{"status_rate":2}`},
		{"/_sim/latency", `{"fixed":"-1s"}`},
	} {
		if status, body := post(t, b, "POST", bad.path, token, nil, bad.body); status != http.StatusBadRequest {
			t.Errorf("POST %s %s = %d %s, want 400", bad.path, bad.body, status, body)
		}
	}
}
