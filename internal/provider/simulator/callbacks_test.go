package simulator_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/provider/httpprovider"
	"github.com/sendonce/sendonce/internal/provider/simulator"
)

// receiver is a webhook that verifies every callback's signature.
type receiver struct {
	t      *testing.T
	mu     sync.Mutex
	got    []httpprovider.Callback
	bad    int
	status int // answer; 0 means 200
	calls  int
}

func newReceiver(t *testing.T) (*receiver, string) {
	rc := &receiver{t: t}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		defer rc.mu.Unlock()
		rc.calls++
		if r.URL.Path != "/callbacks/http" {
			t.Errorf("callback path = %s, want /callbacks/http", r.URL.Path)
		}
		if err := httpprovider.Verify([]byte(secret), r.Header.Get(httpprovider.SignatureHeader), body, time.Now(), 0); err != nil {
			rc.bad++
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if rc.status != 0 {
			w.WriteHeader(rc.status)
			return
		}
		var cb httpprovider.Callback
		if err := json.Unmarshal(body, &cb); err != nil {
			t.Errorf("callback body %s: %v", body, err)
		}
		rc.got = append(rc.got, cb)
	}))
	t.Cleanup(srv.Close)
	return rc, srv.URL + "/callbacks/http"
}

func (rc *receiver) callbacks() []httpprovider.Callback {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]httpprovider.Callback(nil), rc.got...)
}

func statuses(cbs []httpprovider.Callback) string {
	var s []string
	for _, c := range cbs {
		s = append(s, string(c.Status))
	}
	return strings.Join(s, ",")
}

func TestCallbacks(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		cb    simulator.CallbackOptions
		fault simulator.FaultKind
		want  string
	}{
		{name: "InOrder", want: "sent,delivered"},
		{name: "Duplicated", cb: simulator.CallbackOptions{Duplicates: 1}, want: "sent,sent,delivered,delivered"},
		{name: "Reordered", cb: simulator.CallbackOptions{Reorder: true}, want: "delivered,sent"},
		{name: "Delayed", cb: simulator.CallbackOptions{Delay: 30 * time.Millisecond}, want: "sent,delivered"},
		{name: "Failed", fault: simulator.FaultUndeliverable, want: "sent,failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rc, cbURL := newReceiver(t)
			b := setup(t, simulator.Options{CallbackSecret: []byte(secret), Callbacks: tt.cb}, cbURL)
			if tt.fault != "" {
				b.sim.AddFault(simulator.Fault{Kind: tt.fault, Count: 1})
			}
			start := time.Now()
			receipt, err := b.p.Send(context.Background(), msg("k"))
			if err != nil {
				t.Fatal(err)
			}
			n := strings.Count(tt.want, ",") + 1
			eventually(t, "callbacks", func() bool { return len(rc.callbacks()) == n })
			if tt.cb.Delay > 0 && time.Since(start) < time.Duration(n)*tt.cb.Delay {
				t.Errorf("callbacks done after %s, want at least %d×%s", time.Since(start), n, tt.cb.Delay)
			}
			got := rc.callbacks()
			if statuses(got) != tt.want {
				t.Errorf("callback statuses = %s, want %s", statuses(got), tt.want)
			}
			for _, c := range got {
				if c.MessageID != receipt.MessageID || c.Reference != "k" {
					t.Errorf("callback %+v, want message %s reference k", c, receipt.MessageID)
				}
				if want := "evt_" + receipt.MessageID + "_" + string(c.Status); c.EventID != want {
					t.Errorf("event_id = %q, want %q", c.EventID, want)
				}
				if _, err := time.Parse(time.RFC3339Nano, c.Timestamp); err != nil {
					t.Errorf("timestamp %q: %v", c.Timestamp, err)
				}
			}
			if rc.bad != 0 {
				t.Errorf("%d callbacks failed verification", rc.bad)
			}
			wantFinal := "delivered"
			if strings.Contains(tt.want, "failed") {
				wantFinal = "failed"
			}
			eventually(t, "final status", func() bool {
				ms := b.sim.Messages()
				return len(ms) == 1 && string(ms[0].Status) == wantFinal
			})
			eventually(t, "CallbacksSent to count every callback", func() bool { return b.sim.Stats().CallbacksSent == n })
		})
	}
}

func TestCallbacksRetryAndGiveUp(t *testing.T) {
	t.Parallel()
	rc, cbURL := newReceiver(t)
	rc.status = http.StatusInternalServerError
	b := setup(t, simulator.Options{CallbackSecret: []byte(secret)}, cbURL)
	if _, err := b.p.Send(context.Background(), msg("k")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "callbacks to be given up", func() bool { return b.sim.Stats().CallbacksFailed == 2 })
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.calls != 6 {
		t.Errorf("callback posts = %d, want 6 (2 events × 3 attempts)", rc.calls)
	}
}

func TestNoCallbacksWithoutSecret(t *testing.T) {
	t.Parallel()
	rc, cbURL := newReceiver(t)
	b := setup(t, simulator.Options{}, cbURL)
	if _, err := b.p.Send(context.Background(), msg("k")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if got := len(rc.callbacks()); got != 0 {
		t.Errorf("callbacks = %d, want 0 without a secret", got)
	}
	if ms := b.sim.Messages(); len(ms) != 1 || ms[0].Status != httpprovider.StatusDelivered {
		t.Errorf("Messages = %+v, want one delivered", ms)
	}
}

func TestCloseStopsCallbacks(t *testing.T) {
	t.Parallel()
	rc, cbURL := newReceiver(t)
	b := setup(t, simulator.Options{CallbackSecret: []byte(secret), Callbacks: simulator.CallbackOptions{Delay: time.Hour}}, cbURL)
	if _, err := b.p.Send(context.Background(), msg("k")); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { b.sim.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not stop the callback workers")
	}
	if got := len(rc.callbacks()); got != 0 {
		t.Errorf("callbacks = %d, want 0", got)
	}
}
