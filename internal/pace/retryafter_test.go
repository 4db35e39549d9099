package pace_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/pace"
	"github.com/sendonce/sendonce/internal/provider/httpprovider"
	"github.com/sendonce/sendonce/internal/provider/simulator"
	"github.com/sendonce/sendonce/internal/provider/twilio"
	"github.com/sendonce/sendonce/internal/testsupport"
	"github.com/sendonce/sendonce/provider"
)

// TestRetryAfterPausesEveryContainer: the provider simulator answers a
// send with 429 and Retry-After: 1. The HTTP adapter's error carries it
// (pace.RetryAfterer), and the container that saw it pauses the provider
// through the shared pace counter: another container, which saw no 429,
// gets no token until the pause has passed, then gets one. On the memory
// store and on DynamoDB Local.
func TestRetryAfterPausesEveryContainer(t *testing.T) {
	t.Parallel()
	for _, tc := range stores {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			sim := simulator.New(simulator.Options{Token: "sim-token-123"})
			t.Cleanup(sim.Close)
			srv := httptest.NewServer(sim.Handler())
			t.Cleanup(srv.Close)
			sim.AddFault(simulator.Fault{Kind: simulator.FaultStatus, Status: http.StatusTooManyRequests, Count: 1})
			hp, err := httpprovider.New(httpprovider.Config{BaseURL: srv.URL, Token: "sim-token-123"})
			if err != nil {
				t.Fatal(err)
			}
			// Real time, on a whole second (the counters' TTL is real).
			clock := testsupport.NewClock(time.Now().Truncate(time.Second))
			store := tc.store(t)
			limits := map[string]int{"http": 100}
			a, err := pace.New(store, limits, pace.Options{Now: clock.Now})
			if err != nil {
				t.Fatal(err)
			}
			b, err := pace.New(store, limits, pace.Options{Now: clock.Now})
			if err != nil {
				t.Fatal(err)
			}
			_, err = pace.Wrap(hp, a, 0).Send(ctx, provider.Message{Key: "v1_ra", Channel: "sms", To: "+15551234567", Body: "hi"})
			var ra pace.RetryAfterer
			if !errors.As(err, &ra) || ra.RetryAfter() != time.Second {
				t.Fatalf("send answered 429: %v; want an error carrying Retry-After 1s", err)
			}
			if w, err := b.Acquire(ctx, "http"); err != nil || w == 0 {
				t.Fatalf("the other container's acquire during the Retry-After = %v, %v; want no token", w, err)
			}
			clock.Advance(time.Second)
			if w, err := b.Acquire(ctx, "http"); err != nil || w != 0 {
				t.Fatalf("the other container's acquire after the Retry-After = %v, %v; want a token", w, err)
			}
		})
	}
}

// TestTwilioRetryAfter: a Twilio 429 (error 20429) with a Retry-After
// header: the Twilio adapter's error carries it, and the pacer pauses
// Twilio for that long.
func TestTwilioRetryAfter(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "3")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write([]byte(`{"code":20429,"message":"Too Many Requests","status":429}`))
	}))
	t.Cleanup(srv.Close)
	tw, err := twilio.New(twilio.Config{BaseURL: srv.URL, AccountSID: "AC00000000000000000000000000000000", AuthToken: "tok", From: "+15550000000"})
	if err != nil {
		t.Fatal(err)
	}
	clock := testsupport.NewClock(time.Date(2026, 12, 6, 7, 0, 0, 0, time.UTC))
	l, err := pace.New(&pace.MemStore{}, map[string]int{twilio.Name: 10}, pace.Options{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	_, err = pace.Wrap(tw, l, 0).Send(context.Background(), provider.Message{Key: "v1_tw", Channel: "sms", To: "+15551234567", Body: "hi"})
	var ra pace.RetryAfterer
	if !errors.As(err, &ra) || ra.RetryAfter() != 3*time.Second || provider.KindOf(err) != provider.Transient {
		t.Fatalf("Twilio 429: %v; want a Transient error carrying Retry-After 3s", err)
	}
	if w, err := l.Acquire(context.Background(), twilio.Name); err != nil || w != 3*time.Second {
		t.Fatalf("acquire after the 429 = %v, %v; want a 3 s wait", w, err)
	}
}
