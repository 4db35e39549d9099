// Package providertest checks provider adapters and fakes them.
//
// Run is the conformance suite every adapter passes, the built-in ones
// and a program's own: it drives the adapter against its provider (or a
// faithful stand-in) and counts what the provider received, so an
// adapter that sends twice, lies in a lookup or misclassifies an error
// fails. A provider of your own:
//
//	func TestConformance(t *testing.T) {
//		providertest.Run(t, providertest.Harness{
//			New:      func(t *testing.T) provider.Adapter { return myprovider.New(...) },
//			Message:  func(t *testing.T, key string) provider.Message { ... },
//			Received: func(t *testing.T, key string) int { ... ask the provider ... },
//		})
//	}
//
// Fake, Looking and Restricted are for unit tests of the code that drives
// providers (a sender of your own): Fake is a func-field provider;
// Restricted presents a real adapter as one with fewer capabilities.
// Tests about a provider's real behaviour use its adapter against a real
// or simulated server instead.
package providertest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/sendonce/sendonce/provider"
)

// Fake is a provider.Adapter whose behaviour each test sets. With SendFunc
// nil every send is accepted with id "msg_N". It records every message it
// was asked to send. It is safe for concurrent use.
type Fake struct {
	ProviderName string
	Caps         provider.Capabilities
	SendFunc     func(ctx context.Context, m provider.Message) (provider.Receipt, error)

	mu   sync.Mutex
	sent []provider.Message
}

// Name implements provider.Adapter ("fake" unless ProviderName is set).
func (f *Fake) Name() string {
	if f.ProviderName != "" {
		return f.ProviderName
	}
	return "fake"
}

// Capabilities implements provider.Adapter.
func (f *Fake) Capabilities() provider.Capabilities { return f.Caps }

// Send implements provider.Adapter.
func (f *Fake) Send(ctx context.Context, m provider.Message) (provider.Receipt, error) {
	f.mu.Lock()
	f.sent = append(f.sent, m)
	n := len(f.sent)
	f.mu.Unlock()
	if f.SendFunc != nil {
		return f.SendFunc(ctx, m)
	}
	return provider.Receipt{MessageID: fmt.Sprintf("msg_%d", n)}, nil
}

// Calls returns how many sends were attempted.
func (f *Fake) Calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.sent)
}

// Sent returns a copy of every message Send was called with.
func (f *Fake) Sent() []provider.Message {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]provider.Message(nil), f.sent...)
}

// Looking is a Fake that can also look messages up (LookupByReference).
type Looking struct {
	*Fake
	LookupFunc func(ctx context.Context, m provider.Message) (provider.LookupResult, error)
}

// Lookup implements provider.Looker.
func (l Looking) Lookup(ctx context.Context, m provider.Message) (provider.LookupResult, error) {
	return l.LookupFunc(ctx, m)
}

// Adapter is a provider adapter that can also look messages up, as the
// HTTP adapter can.
type Adapter interface {
	provider.Adapter
	provider.Looker
}

// Restricted presents an adapter as one with other capabilities than it
// has (Caps), to drive the paths of a provider that cannot drop repeats
// or cannot be asked. Everything else goes to the adapter.
type Restricted struct {
	Adapter
	Caps provider.Capabilities
}

// Capabilities returns r.Caps.
func (r Restricted) Capabilities() provider.Capabilities { return r.Caps }

// LookupOnly presents a as a provider that can look messages up but does
// not drop repeats of a key.
func LookupOnly(a Adapter) Restricted {
	return Restricted{Adapter: a, Caps: provider.Capabilities{LookupByReference: true}}
}

// NoCapabilities presents a as a provider that neither drops repeats nor
// answers lookups.
func NoCapabilities(a Adapter) Restricted {
	return Restricted{Adapter: a}
}

// Error returns a provider error of kind k for tests.
func Error(k provider.Kind, code string) error {
	return &provider.Error{Kind: k, Provider: "fake", Op: "send", Code: code, Reason: k.String() + " failure"}
}

// CheckClassified fails t unless got is an adapter's classification of
// kind want, from adapter name, of a send, with a reason, and keeps raw
// (a recipient's address) out of its text and its wrapped error's; wrapped
// again, it still reports want to provider.KindOf.
func CheckClassified(t testing.TB, got *provider.Error, want provider.Kind, name, raw string) {
	t.Helper()
	if got.Kind != want {
		t.Errorf("Kind = %s, want %s (%v)", got.Kind, want, got)
	}
	if got.Provider != name || got.Op != "send" || got.Reason == "" {
		t.Errorf("Provider, Op, Reason = %q, %q, %q: want %s, send, a reason", got.Provider, got.Op, got.Reason, name)
	}
	text := got.Error()
	if got.Err != nil {
		text += " " + got.Err.Error()
	}
	if strings.Contains(text, raw) {
		t.Errorf("error text %q holds the raw address", text)
	}
	if k := provider.KindOf(fmt.Errorf("wrapped: %w", got)); k != want {
		t.Errorf("KindOf(wrapped) = %s, want %s", k, want)
	}
}
