package smsgw_test

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/sendonce/sendonce/examples/own-lambda/smsgw"
	"github.com/sendonce/sendonce/examples/own-lambda/smsgw/smsgwtest"
	"github.com/sendonce/sendonce/provider"
	"github.com/sendonce/sendonce/provider/providertest"
)

const apiKey = "test-key"

func newAdapter(t *testing.T, base string) provider.Adapter {
	t.Helper()
	a, err := smsgw.New(base, apiKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func message(key, to string) provider.Message {
	return provider.Message{Key: key, Tenant: "acme", Channel: "sms", Class: "transactional", To: to, Body: "Your code is 123456", AttemptedAt: time.Now()}
}

// TestConformance runs sendonce's provider conformance suite against the
// stand-in gateway, counting what the gateway received.
func TestConformance(t *testing.T) {
	gw := smsgwtest.Start(t, apiKey)
	providertest.Run(t, providertest.Harness{
		New:      func(t *testing.T) provider.Adapter { return newAdapter(t, gw.URL) },
		Message:  func(t *testing.T, key string) provider.Message { return message(key, "+15551234567") },
		Received: func(t *testing.T, key string) int { return gw.Received(key) },
		Refused:  func(t *testing.T, key string) provider.Message { return message(key, smsgwtest.RefusedNumber) },
		// The same gateway's records behind its faulty fronts.
		AcceptedThenFailed:   func(t *testing.T) provider.Adapter { return newAdapter(t, gw.URL+smsgwtest.AcceptThen500) },
		AcceptedThenTimedOut: func(t *testing.T) provider.Adapter { return newAdapter(t, gw.URL+smsgwtest.AcceptThenStall) },
		Undeliverable:        func(t *testing.T, key string) provider.Message { return message(key, smsgwtest.UndeliverableNumber) },
		Stalled: func(t *testing.T) provider.Adapter {
			// A gateway that reads the request and never answers.
			stall := make(chan struct{})
			srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-stall })}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			go func() { _ = srv.Serve(ln) }()
			t.Cleanup(func() { close(stall); _ = srv.Close() })
			return newAdapter(t, "http://"+ln.Addr().String())
		},
		Unreachable: func(t *testing.T) provider.Adapter {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := ln.Addr().String()
			_ = ln.Close() // nothing listens there now
			return newAdapter(t, "http://"+addr)
		},
	})
}

// TestKinds checks the answers the conformance suite does not reach.
func TestKinds(t *testing.T) {
	gw := smsgwtest.Start(t, apiKey)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()

	wrongKey, err := smsgw.New(gw.URL, "wrong", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wrongKey.Send(ctx, message("v1_a", "+15551234567")); provider.KindOf(err) != provider.Config {
		t.Errorf("bad API key: %v, want a config error", err)
	}

	gw.Down("+15557654321")
	if _, err := newAdapter(t, gw.URL).Send(ctx, message("v1_b", "+15557654321")); provider.KindOf(err) != provider.Transient {
		t.Errorf("503: %v, want transient", err)
	}
	if n := gw.Received("v1_b"); n != 0 {
		t.Errorf("the gateway received %d messages while down", n)
	}

	for _, base := range []string{"", "ftp://x", "http://"} {
		if _, err := smsgw.New(base, apiKey, nil); err == nil {
			t.Errorf("New(%q) succeeded", base)
		}
	}
	if _, err := smsgw.New(gw.URL, "", nil); err == nil {
		t.Error("New without an API key succeeded")
	}
}
