package simulator_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/provider/httpprovider"
	"github.com/sendonce/sendonce/internal/provider/simulator"
	"github.com/sendonce/sendonce/internal/testsupport"
	"github.com/sendonce/sendonce/provider"
)

const (
	token  = "sim-token-123"
	secret = "whsec-sim"
)

var quiet = slog.New(slog.DiscardHandler)

type bundle struct {
	sim *simulator.Simulator
	url string
	p   *httpprovider.Provider
}

// setup starts a simulator behind an httptest server and an adapter that
// talks to it with a 10 s call timeout: a loaded machine's late answer
// is not what these tests are about. A test whose point is the deadline
// takes hasty's adapter.
func setup(t *testing.T, opts simulator.Options, callbackURL string) bundle {
	t.Helper()
	if opts.Token == "" {
		opts.Token = token
	}
	sim, url := testsupport.Simulator(t, opts)
	b := bundle{sim: sim, url: url}
	b.p = b.adapter(t, 10*time.Second, callbackURL)
	return b
}

// hasty returns another adapter on b's simulator, with a 300 ms timeout:
// for a fault that holds the answer back until the deadline.
func (b bundle) hasty(t *testing.T) *httpprovider.Provider {
	t.Helper()
	return b.adapter(t, 300*time.Millisecond, "")
}

func (b bundle) adapter(t *testing.T, timeout time.Duration, callbackURL string) *httpprovider.Provider {
	t.Helper()
	p, err := httpprovider.New(httpprovider.Config{BaseURL: b.url, Token: token, Timeout: timeout, CallbackURL: callbackURL, Logger: quiet})
	if err != nil {
		t.Fatalf("httpprovider.New: %v", err)
	}
	return p
}

func msg(key string) provider.Message {
	return provider.Message{Key: key, Channel: "sms", To: "+15551234567", Body: "hello " + key}
}

// post sends a raw request to the simulator and returns status and body.
func post(t *testing.T, b bundle, method, path, tok string, hdr map[string]string, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, b.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestIdempotency(t *testing.T) {
	t.Parallel()
	b := setup(t, simulator.Options{}, "")
	ctx := context.Background()
	r1, err := b.p.Send(ctx, msg("k1"))
	if err != nil {
		t.Fatalf("Send 1: %v", err)
	}
	r2, err := b.p.Send(ctx, msg("k1"))
	if err != nil {
		t.Fatalf("Send 2: %v", err)
	}
	if r1.MessageID != r2.MessageID || r1.MessageID != "msg_1" {
		t.Errorf("ids = %q, %q, want msg_1 twice", r1.MessageID, r2.MessageID)
	}
	body := `{"channel":"sms","to":"+15551234567","body":"hello k1","reference":"k1"}`
	status, resp := post(t, b, "POST", "/messages", token, map[string]string{"Idempotency-Key": "k1"}, body)
	if status != http.StatusOK || !strings.Contains(resp, `"msg_1"`) {
		t.Errorf("raw repeat = %d %s, want 200 with msg_1", status, resp)
	}
	if got, want := b.sim.Delivered("k1"), 1; got != want {
		t.Errorf("Delivered = %d, want %d", got, want)
	}
	st := b.sim.Stats()
	if st.Accepted != 1 || st.DuplicatesSuppressed != 2 || st.Sends != 3 {
		t.Errorf("Stats = %+v, want 1 accepted, 2 suppressed, 3 sends", st)
	}

	// Same key, another body: 422, a permanent rejection, nothing delivered.
	other := msg("k1")
	other.Body = "changed"
	_, err = b.p.Send(ctx, other)
	if got, want := provider.KindOf(err), provider.Permanent; got != want {
		t.Errorf("conflicting repeat kind = %v (%v), want %v", got, err, want)
	}
	if got, want := b.sim.Delivered("k1"), 1; got != want {
		t.Errorf("Delivered after conflict = %d, want %d", got, want)
	}
}

// TestHTML: the simulator records an email's HTML part and treats a repeat of the key with another HTML part as
// another message (422); a send without one records none.
func TestHTML(t *testing.T) {
	t.Parallel()
	b := setup(t, simulator.Options{}, "")
	ctx := context.Background()
	m := provider.Message{Key: "k-html", Channel: "email", To: "ana@example.com", Subject: "Shipped",
		Body: "Your order shipped", HTML: "<p>Your order <b>shipped</b></p>"}
	if _, err := b.p.Send(ctx, m); err != nil {
		t.Fatalf("Send: %v", err)
	}
	if _, err := b.p.Send(ctx, msg("k-text")); err != nil {
		t.Fatalf("Send without html: %v", err)
	}
	msgs := b.sim.Messages()
	if len(msgs) != 2 || msgs[0].HTML != m.HTML || msgs[0].Body != m.Body || msgs[1].HTML != "" {
		t.Fatalf("messages = %+v, want the email with its HTML part, then an sms without one", msgs)
	}
	other := m
	other.HTML = "<p>changed</p>"
	if _, err := b.p.Send(ctx, other); provider.KindOf(err) != provider.Permanent {
		t.Errorf("repeat with another HTML part: %v, want a permanent 422", err)
	}
	if got := b.sim.Delivered("k-html"); got != 1 {
		t.Errorf("Delivered = %d, want 1", got)
	}
}

func TestIdempotencyDisabled(t *testing.T) {
	t.Parallel()
	b := setup(t, simulator.Options{IdempotencyDisabled: true}, "")
	ctx := context.Background()
	r1, err1 := b.p.Send(ctx, msg("k"))
	r2, err2 := b.p.Send(ctx, msg("k"))
	if err1 != nil || err2 != nil {
		t.Fatalf("Send: %v, %v", err1, err2)
	}
	if r1.MessageID == r2.MessageID {
		t.Errorf("ids both %q, want distinct", r1.MessageID)
	}
	if got, want := b.sim.Delivered("k"), 2; got != want {
		t.Errorf("Delivered = %d, want %d (a repeat is a duplicate)", got, want)
	}
	if got, want := b.sim.Duplicates(), []string{"k"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Duplicates = %v, want %v", got, want)
	}
	if _, err := b.p.Send(ctx, msg("j")); err != nil {
		t.Fatalf("Send: %v", err)
	}
	if got, want := b.sim.DeliveredAll(), map[string]int{"k": 2, "j": 1}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("DeliveredAll = %v, want %v", got, want)
	}
}

func TestAuthAndBadRequests(t *testing.T) {
	t.Parallel()
	b := setup(t, simulator.Options{}, "")
	tests := []struct {
		name, tok, body string
		want            int
	}{
		{"WrongToken", "nope", `{"channel":"sms","to":"+1","body":"x","reference":"r"}`, 401},
		{"NoToken", "", `{"channel":"sms","to":"+1","body":"x","reference":"r"}`, 401},
		{"NotJSON", token, `nope`, 400},
		{"NoChannel", token, `{"to":"+1","body":"x","reference":"r"}`, 400},
		{"BadChannel", token, `{"channel":"fax","to":"+1","body":"x","reference":"r"}`, 400},
		{"NoTo", token, `{"channel":"sms","body":"x","reference":"r"}`, 400},
		{"NoBody", token, `{"channel":"sms","to":"+1","reference":"r"}`, 400},
		{"NoReference", token, `{"channel":"sms","to":"+1","body":"x"}`, 400},
		{"TooLarge", token, `{"channel":"sms","to":"+1","reference":"r","body":"` + strings.Repeat("x", 65<<10) + `"}`, 413},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := post(t, b, "POST", "/messages", tt.tok, nil, tt.body)
			if status != tt.want {
				t.Errorf("status = %d (%s), want %d", status, body, tt.want)
			}
			var e httpprovider.ErrorResponse
			if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error == "" {
				t.Errorf("body = %s, want {\"error\":...}", body)
			}
		})
	}
	if got := b.sim.Delivered("r"); got != 0 {
		t.Errorf("Delivered = %d, want 0", got)
	}
	wrong, err := httpprovider.New(httpprovider.Config{BaseURL: b.url, Token: "wrong-token", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	_, err = wrong.Send(context.Background(), msg("r"))
	if got, want := provider.KindOf(err), provider.Config; got != want {
		t.Errorf("wrong token kind = %v, want %v", got, want)
	}
}

func TestLookup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("Found", func(t *testing.T) {
		t.Parallel()
		b := setup(t, simulator.Options{}, "")
		got, err := b.p.Lookup(ctx, msg("k"))
		if err != nil || got.Status != provider.LookupNotFound {
			t.Fatalf("Lookup before send = %+v, %v, want not_found", got, err)
		}
		rc, err := b.p.Send(ctx, msg("k"))
		if err != nil {
			t.Fatal(err)
		}
		got, err = b.p.Lookup(ctx, msg("k"))
		if err != nil || got.Status != provider.LookupAccepted || got.MessageID != rc.MessageID {
			t.Errorf("Lookup after send = %+v, %v, want accepted %s", got, err, rc.MessageID)
		}
		if st := b.sim.Stats(); st.Sends != 1 || st.Requests != 3 {
			t.Errorf("Stats = %+v, want 1 send of 3 requests", st)
		}
	})
	t.Run("Undeliverable", func(t *testing.T) {
		t.Parallel()
		b := setup(t, simulator.Options{}, "")
		b.sim.AddFault(simulator.Fault{Kind: simulator.FaultUndeliverable, Count: 1})
		if _, err := b.p.Send(ctx, msg("k")); err != nil {
			t.Fatal(err)
		}
		got, err := b.p.Lookup(ctx, msg("k"))
		if err != nil || got.Status != provider.LookupRejected || got.Reason == "" {
			t.Errorf("Lookup = %+v, %v, want rejected with a reason", got, err)
		}
	})
	t.Run("Fault", func(t *testing.T) {
		t.Parallel()
		b := setup(t, simulator.Options{}, "")
		b.sim.AddFault(simulator.Fault{Kind: simulator.FaultStatus, Op: simulator.OpLookup, Status: 503, Count: 1})
		if _, err := b.p.Lookup(ctx, msg("k")); provider.KindOf(err) != provider.Transient {
			t.Errorf("Lookup err = %v, want transient", err)
		}
		if _, err := b.p.Lookup(ctx, msg("k")); err != nil {
			t.Errorf("second Lookup err = %v, want nil", err)
		}
	})
}

// TestFaults drives each fault kind through the real adapter and checks
// what it classifies and what the simulator really delivered.
func TestFaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		fault         simulator.Fault
		wantKind      provider.Kind // of the first send
		wantOK        bool          // the first send succeeds
		wantDelivered int           // after the first send
		minElapsed    time.Duration
	}{
		{name: "Status503", fault: simulator.Fault{Kind: simulator.FaultStatus, Status: 503, Count: 1}, wantKind: provider.Transient},
		{name: "Status429", fault: simulator.Fault{Kind: simulator.FaultStatus, Status: 429, Count: 1}, wantKind: provider.Transient},
		{name: "Status400", fault: simulator.Fault{Kind: simulator.FaultStatus, Status: 400, Count: 1}, wantKind: provider.Permanent},
		{name: "Latency", fault: simulator.Fault{Kind: simulator.FaultLatency, Delay: 100 * time.Millisecond, Count: 1}, wantOK: true, wantDelivered: 1, minElapsed: 100 * time.Millisecond},
		{name: "TimeoutBeforeAccept", fault: simulator.Fault{Kind: simulator.FaultTimeoutBeforeAccept, Count: 1}, wantKind: provider.Ambiguous},
		{name: "TimeoutAfterAccept", fault: simulator.Fault{Kind: simulator.FaultTimeoutAfterAccept, Count: 1}, wantKind: provider.Ambiguous, wantDelivered: 1},
		{name: "TimeoutAfterAcceptShortHang", fault: simulator.Fault{Kind: simulator.FaultTimeoutAfterAccept, Hang: 50 * time.Millisecond, Count: 1}, wantOK: true, wantDelivered: 1, minElapsed: 50 * time.Millisecond},
		{name: "ResetBeforeAccept", fault: simulator.Fault{Kind: simulator.FaultResetBeforeAccept, Count: 1}, wantKind: provider.Ambiguous},
		{name: "ResetAfterAccept", fault: simulator.Fault{Kind: simulator.FaultResetAfterAccept, Count: 1}, wantKind: provider.Ambiguous, wantDelivered: 1},
		{name: "Undeliverable", fault: simulator.Fault{Kind: simulator.FaultUndeliverable, Count: 1}, wantOK: true, wantDelivered: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, simulator.Options{}, "")
			b.sim.AddFault(tt.fault)
			ctx := context.Background()
			// A fault that holds the answer back meets a 300 ms deadline;
			// a send that must succeed goes through the patient adapter.
			p := b.hasty(t)
			if tt.wantOK {
				p = b.p
			}
			start := time.Now()
			_, err := p.Send(ctx, msg("k"))
			elapsed := time.Since(start)
			if tt.wantOK {
				if err != nil {
					t.Fatalf("Send: %v", err)
				}
			} else if got := provider.KindOf(err); err == nil || got != tt.wantKind {
				t.Fatalf("Send err = %v (kind %v), want kind %v", err, got, tt.wantKind)
			}
			if elapsed < tt.minElapsed {
				t.Errorf("Send took %s, want at least %s", elapsed, tt.minElapsed)
			}
			if got := b.sim.Delivered("k"); got != tt.wantDelivered {
				t.Errorf("Delivered after first send = %d, want %d", got, tt.wantDelivered)
			}
			if got := b.sim.Stats().Faults[tt.fault.Kind]; got != 1 {
				t.Errorf("Stats.Faults[%s] = %d, want 1", tt.fault.Kind, got)
			}
			// The fault is used up: a retry with the same key succeeds and
			// the message is delivered exactly once.
			if _, err := b.p.Send(ctx, msg("k")); err != nil {
				t.Fatalf("retry: %v", err)
			}
			if got := b.sim.Delivered("k"); got != 1 {
				t.Errorf("Delivered after retry = %d, want 1", got)
			}
		})
	}
}

func TestFaultMatching(t *testing.T) {
	t.Parallel()
	b := setup(t, simulator.Options{}, "")
	ctx := context.Background()
	p := b.p
	b.sim.AddFault(simulator.Fault{Kind: simulator.FaultStatus, Status: 503, Count: 2, Reference: "bad-ref"})
	b.sim.AddFault(simulator.Fault{Kind: simulator.FaultStatus, Status: 422, Reference: "to-bad"})
	for i := range 2 {
		if _, err := p.Send(ctx, msg("bad-ref")); provider.KindOf(err) != provider.Transient {
			t.Errorf("bad-ref send %d err = %v, want transient", i, err)
		}
	}
	if _, err := p.Send(ctx, msg("bad-ref")); err != nil {
		t.Errorf("bad-ref third send = %v, want ok (count used up)", err)
	}
	if _, err := p.Send(ctx, msg("other")); err != nil {
		t.Errorf("other send = %v, want ok", err)
	}
	m := msg("to-bad")
	for range 3 { // Count 0: every matching send
		if _, err := p.Send(ctx, m); provider.KindOf(err) != provider.Permanent {
			t.Errorf("to-bad send err = %v, want permanent", err)
		}
	}
	b.sim.ClearFaults()
	if _, err := p.Send(ctx, m); err != nil {
		t.Errorf("send after ClearFaults = %v, want ok", err)
	}
}

func TestRandomFaultsSeeded(t *testing.T) {
	t.Parallel()
	run := func(seed uint64) []string {
		b := setup(t, simulator.Options{Seed: seed}, "")
		if err := b.sim.SetRandom(simulator.RandomFaults{StatusRate: 0.3, ResetAfterRate: 0.2, ResetBeforeRate: 0.1}); err != nil {
			t.Fatal(err)
		}
		p := b.p
		var out []string
		for i := range 40 {
			_, err := p.Send(context.Background(), msg(fmt.Sprint("k", i)))
			out = append(out, provider.KindOf(err).String()+fmt.Sprint(err == nil))
		}
		st := b.sim.Stats()
		total := 0
		for _, n := range st.Faults {
			total += n
		}
		if total == 0 || total == 40 {
			t.Errorf("faults injected = %d of 40, want some but not all", total)
		}
		return out
	}
	a, b := run(7), run(7)
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Errorf("same seed, different outcomes:\n%v\n%v", a, b)
	}
	if err := simulator.New(simulator.Options{}).SetRandom(simulator.RandomFaults{StatusRate: 0.7, ResetAfterRate: 0.5}); !errors.Is(err, simulator.ErrInvalidFault) {
		t.Errorf("SetRandom with rates over 1 = %v, want ErrInvalidFault", err)
	}
}

// TestLatency: a simulator with a latency answers no sooner than it, and
// SetLatency(0, 0) takes it away. Judged against the latency itself (a
// second), not a fixed bound, so that a loaded machine's slow answers do
// not read as the latency.
func TestLatency(t *testing.T) {
	t.Parallel()
	b := setup(t, simulator.Options{Latency: time.Second, Jitter: 20 * time.Millisecond}, "")
	p := b.p
	start := time.Now()
	if _, err := p.Send(context.Background(), msg("k")); err != nil {
		t.Fatal(err)
	}
	if got := time.Since(start); got < time.Second {
		t.Errorf("Send took %s, want at least the 1s latency", got)
	}
	b.sim.SetLatency(0, 0)
	start = time.Now()
	if _, err := p.Send(context.Background(), msg("k2")); err != nil {
		t.Fatal(err)
	}
	if got := time.Since(start); got >= time.Second {
		t.Errorf("Send after SetLatency(0,0) took %s, want less than the old 1s latency", got)
	}
}

func TestConcurrentSameKey(t *testing.T) {
	t.Parallel()
	b := setup(t, simulator.Options{Latency: time.Millisecond, Jitter: 2 * time.Millisecond}, "")
	p := b.p
	const n = 64
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			rc, err := p.Send(context.Background(), msg("same"))
			if err != nil {
				t.Errorf("Send %d: %v", i, err)
			}
			ids[i] = rc.MessageID
		})
	}
	wg.Wait()
	for i, id := range ids {
		if id != ids[0] {
			t.Errorf("id %d = %q, want %q", i, id, ids[0])
		}
	}
	if got := b.sim.Delivered("same"); got != 1 {
		t.Errorf("Delivered = %d, want 1", got)
	}
	if st := b.sim.Stats(); st.Accepted != 1 || st.DuplicatesSuppressed != n-1 {
		t.Errorf("Stats = %+v, want 1 accepted and %d suppressed", st, n-1)
	}
}

func TestCloseReleasesHungRequests(t *testing.T) {
	t.Parallel()
	sim, url := testsupport.Simulator(t, simulator.Options{Token: token})
	sim.AddFault(simulator.Fault{Kind: simulator.FaultTimeoutAfterAccept})
	p, err := httpprovider.New(httpprovider.Config{BaseURL: url, Token: token, Timeout: time.Minute, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := p.Send(context.Background(), msg("k"))
		done <- err
	}()
	eventually(t, "the message to be accepted", func() bool { return sim.Delivered("k") == 1 })
	sim.Close()
	sim.Close() // idempotent
	select {
	case err := <-done:
		if err == nil {
			t.Errorf("Send after Close = nil, want an error")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not release the hung request")
	}
}
