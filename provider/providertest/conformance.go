package providertest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sendonce/sendonce/provider"
)

// Harness is what Run needs to exercise an adapter against its provider,
// or a faithful stand-in for it (a local server that behaves as the
// provider's API does). Every function is called from the test that needs
// it; New, Message and Received are required, the others are optional and
// each enables the checks named in its comment.
type Harness struct {
	// New returns the adapter under test, talking to the provider.
	New func(t *testing.T) provider.Adapter
	// Message returns a message with key to a recipient the provider
	// accepts.
	Message func(t *testing.T, key string) provider.Message
	// Received returns how many messages with key the provider accepted:
	// the provider's own count (its API, its test account, the stand-in's
	// records), never the adapter's answers.
	Received func(t *testing.T, key string) int

	// Refused, if set, returns a message with key that the provider
	// refuses for good before accepting anything (an invalid number, a
	// suppressed address): Send must fail Permanent, and nothing is
	// received.
	Refused func(t *testing.T, key string) provider.Message
	// Stalled, if set, returns an adapter whose provider takes a request
	// and never answers it: Send must return by its context's deadline
	// with an Ambiguous error, since the provider may have accepted.
	Stalled func(t *testing.T) provider.Adapter
	// Unreachable, if set, returns an adapter whose provider cannot be
	// reached at all (nothing listens): Send must fail Transient, since
	// nothing can have been sent, and a route may try its next provider.
	Unreachable func(t *testing.T) provider.Adapter

	// AcceptedThenFailed, if set, returns an adapter whose provider
	// accepts each message (Received counts it) and then answers with a
	// server error (an HTTP 500 or 503, a dropped connection after the
	// request was written): Send must fail Ambiguous. An adapter that
	// calls it Transient lets a route send the message again through its
	// next provider, and the recipient gets it twice; Permanent would
	// record a delivered message FAILED. When LookupByReference is
	// declared, a lookup of that message must answer accepted (or
	// unproven), never not found.
	AcceptedThenFailed func(t *testing.T) provider.Adapter
	// AcceptedThenTimedOut, if set, returns an adapter whose provider
	// accepts each message (Received counts it) and then answers later
	// than the call's deadline: Send must return by the deadline with an
	// Ambiguous error.
	AcceptedThenTimedOut func(t *testing.T) provider.Adapter
	// Undeliverable, if set, returns a message with key that the provider
	// accepts and then fails for good (the handset is unreachable, the
	// mailbox bounces): Send succeeds, and when LookupByReference is
	// declared, a lookup must answer rejected with a reason, so that the
	// reconciler records it FAILED instead of resending.
	Undeliverable func(t *testing.T, key string) provider.Message
}

// namePattern is what a provider's configuration name may look like: it
// is written in SENDONCE_<CHANNEL>_PROVIDER and stored in every row.
var namePattern = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`)

// Run checks that the adapter h builds keeps the provider contract the
// sender and the reconciler rely on (package provider), against the
// provider's own count of what it received:
//
//   - Name: a short lower-case configuration name, the same every call.
//   - Send: an accepted message has the provider's id, and the provider
//     received it once.
//   - IdempotentSends, when declared: a repeat with the same key is
//     dropped (received once, the same id).
//   - LookupByReference, when declared: the adapter is a provider.Looker;
//     a sent message is LookupAccepted with its id (searched by content:
//     LookupUnproven with its id among the candidates, and LookupAccepted
//     once Message.ProviderMessageID names it); a key never sent is
//     LookupNotFound (or LookupUnproven for a provider searched by
//     content); a cancelled lookup is an error, never LookupNotFound.
//   - Errors: every failure is a *provider.Error with a reason; a
//     cancelled send is not Permanent; Refused, Stalled and Unreachable
//     fail Permanent, Ambiguous and Transient.
//   - AcceptedThenFailed and AcceptedThenTimedOut, when set: a message
//     the provider accepted before its answer failed or came too late is
//     Ambiguous, never Transient (a route's next provider would send it
//     again) nor Permanent; a lookup then finds it.
//   - Undeliverable, when set with LookupByReference: a message the
//     provider accepted and then failed for good is LookupRejected.
//   - Concurrency: concurrent sends of distinct keys are each received
//     once (run with -race).
//
// Each check is a subtest; a provider that cannot pass one says so in
// the adapter's documentation rather than skipping it.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.New == nil || h.Message == nil || h.Received == nil {
		t.Fatal("providertest.Run: Harness.New, Message and Received are required")
	}
	var seq int
	var mu sync.Mutex
	key := func(t *testing.T) string {
		mu.Lock()
		defer mu.Unlock()
		seq++
		// Shaped as sendonce's keys are ("v1_" and 64 hex digits), and
		// new on every run, so that a provider's records of earlier runs
		// never match.
		sum := sha256.Sum256(fmt.Appendf(nil, "%s %d %d", t.Name(), time.Now().UnixNano(), seq))
		return "v1_" + hex.EncodeToString(sum[:])
	}
	send := func(t *testing.T, a provider.Adapter, m provider.Message) (provider.Receipt, error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		return a.Send(ctx, m)
	}

	t.Run("Name", func(t *testing.T) {
		a := h.New(t)
		if n := a.Name(); !namePattern.MatchString(n) || a.Name() != n {
			t.Errorf("Name() = %q: want a stable configuration name matching %s", n, namePattern)
		}
	})

	t.Run("Send", func(t *testing.T) {
		a, k := h.New(t), key(t)
		r, err := send(t, a, h.Message(t, k))
		if err != nil {
			t.Fatalf("Send: %v", err)
		}
		if r.MessageID == "" {
			t.Error("Send accepted with an empty Receipt.MessageID: want the provider's id")
		}
		if n := h.Received(t, k); n != 1 {
			t.Errorf("the provider received %d messages with the key, want 1", n)
		}
	})

	t.Run("IdempotentSends", func(t *testing.T) {
		a, k := h.New(t), key(t)
		if !a.Capabilities().IdempotentSends {
			t.Skip("not declared: an ambiguous attempt is never retried blindly")
		}
		m := h.Message(t, k)
		first, err := send(t, a, m)
		if err != nil {
			t.Fatalf("first Send: %v", err)
		}
		again, err := send(t, a, m)
		if err != nil {
			t.Fatalf("repeated Send: %v (a provider that drops repeats answers with the original)", err)
		}
		if n := h.Received(t, k); n != 1 {
			t.Errorf("the provider received %d messages with the key after a repeat, want 1: it does not drop repeats", n)
		}
		if again.MessageID != first.MessageID {
			t.Errorf("repeat's MessageID = %q, want the original's %q", again.MessageID, first.MessageID)
		}
	})

	t.Run("LookupByReference", func(t *testing.T) {
		a := h.New(t)
		if !a.Capabilities().LookupByReference {
			t.Skip("not declared: the reconciler never asks this provider")
		}
		l, ok := a.(provider.Looker)
		if !ok {
			t.Fatalf("%T declares LookupByReference but does not implement provider.Looker", a)
		}
		k := key(t)
		m := h.Message(t, k)
		m.AttemptedAt = time.Now().Add(-time.Second)
		r, err := send(t, a, m)
		if err != nil {
			t.Fatalf("Send: %v", err)
		}
		m.AttemptedUntil = time.Now().Add(time.Second)
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		got, err := l.Lookup(ctx, m)
		if err != nil {
			t.Fatalf("Lookup of a sent message: %v", err)
		}
		if got.Status == provider.LookupUnproven && slices.Contains(got.Candidates, r.MessageID) {
			// A provider searched by content (provider.Attribute) finds
			// the message among its candidates, and proves it this key's
			// with the id a delivery callback recorded.
			m.ProviderMessageID = r.MessageID
			if got, err = l.Lookup(ctx, m); err != nil {
				t.Fatalf("Lookup of a sent message with its callback's id: %v", err)
			}
			if got.Status != provider.LookupAccepted || got.MessageID != r.MessageID {
				t.Errorf("Lookup of a sent message with its callback's id %q = %+v, want accepted with that id", r.MessageID, got)
			}
			m.ProviderMessageID = ""
		} else if got.Status != provider.LookupAccepted || got.MessageID != r.MessageID {
			t.Errorf("Lookup of a sent message = %+v, want accepted with id %q (or, searched by content, unproven with it among the candidates)", got, r.MessageID)
		}

		never := h.Message(t, key(t))
		never.AttemptedAt, never.AttemptedUntil = time.Now().Add(-time.Second), time.Now()
		got, err = l.Lookup(ctx, never)
		if err != nil {
			t.Fatalf("Lookup of a key never sent: %v", err)
		}
		if got.Status != provider.LookupNotFound && got.Status != provider.LookupUnproven {
			t.Errorf("Lookup of a key never sent = %+v, want not_found (or unproven)", got)
		}

		cancelled, stop := context.WithCancel(t.Context())
		stop()
		got, err = l.Lookup(cancelled, m)
		if err == nil {
			t.Errorf("Lookup with a cancelled context = %+v and no error: an answer it could not get must be an error, never a status", got)
		} else {
			checkError(t, err)
		}
	})

	t.Run("CancelledSend", func(t *testing.T) {
		a, k := h.New(t), key(t)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		_, err := a.Send(ctx, h.Message(t, k))
		if err == nil {
			if n := h.Received(t, k); n != 1 {
				t.Errorf("Send with a cancelled context succeeded, yet the provider received %d messages", n)
			}
			return
		}
		checkError(t, err)
		if provider.KindOf(err) == provider.Permanent {
			t.Errorf("Send with a cancelled context failed Permanent (%v): the message itself is fine", err)
		}
	})

	t.Run("Refused", func(t *testing.T) {
		if h.Refused == nil {
			t.Skip("Harness.Refused not set")
		}
		a, k := h.New(t), key(t)
		_, err := send(t, a, h.Refused(t, k))
		if err == nil {
			t.Fatal("Send of a refused message succeeded")
		}
		checkError(t, err)
		if kind := provider.KindOf(err); kind != provider.Permanent {
			t.Errorf("refused message: Kind = %s, want permanent (%v)", kind, err)
		}
		if n := h.Received(t, k); n != 0 {
			t.Errorf("the provider received %d refused messages, want 0", n)
		}
	})

	t.Run("Stalled", func(t *testing.T) {
		if h.Stalled == nil {
			t.Skip("Harness.Stalled not set")
		}
		a := h.Stalled(t)
		const deadline = 500 * time.Millisecond
		ctx, cancel := context.WithTimeout(t.Context(), deadline)
		defer cancel()
		start := time.Now()
		_, err := a.Send(ctx, h.Message(t, key(t)))
		if took := time.Since(start); took > deadline+2*time.Second {
			t.Errorf("Send to a stalled provider returned after %s, past its %s deadline", took.Round(time.Millisecond), deadline)
		}
		if err == nil {
			t.Fatal("Send to a provider that never answers succeeded")
		}
		checkError(t, err)
		if kind := provider.KindOf(err); kind != provider.Ambiguous {
			t.Errorf("stalled provider: Kind = %s, want ambiguous: the provider may have accepted (%v)", kind, err)
		}
	})

	t.Run("Unreachable", func(t *testing.T) {
		if h.Unreachable == nil {
			t.Skip("Harness.Unreachable not set")
		}
		_, err := send(t, h.Unreachable(t), h.Message(t, key(t)))
		if err == nil {
			t.Fatal("Send to an unreachable provider succeeded")
		}
		checkError(t, err)
		if kind := provider.KindOf(err); kind != provider.Transient {
			t.Errorf("unreachable provider: Kind = %s, want transient: nothing can have been sent (%v)", kind, err)
		}
	})

	// acceptedThen checks a send that the provider accepted before its
	// answer was lost to what.
	acceptedThen := func(t *testing.T, what string, newAdapter func(t *testing.T) provider.Adapter, deadline time.Duration) {
		t.Helper()
		if newAdapter == nil {
			t.Skip("Harness." + what + " not set")
		}
		a, k := newAdapter(t), key(t)
		m := h.Message(t, k)
		m.AttemptedAt = time.Now().Add(-time.Second)
		ctx, cancel := context.WithTimeout(t.Context(), deadline)
		defer cancel()
		start := time.Now()
		_, err := a.Send(ctx, m)
		if took := time.Since(start); took > deadline+2*time.Second {
			t.Errorf("Send returned after %s, past its %s deadline", took.Round(time.Millisecond), deadline)
		}
		if n := h.Received(t, k); n != 1 {
			t.Fatalf("the provider received %d messages with the key: Harness.%s must accept each message before it fails", n, what)
		}
		if err == nil {
			t.Fatalf("Send succeeded though its provider's answer was lost (%s)", what)
		}
		checkError(t, err)
		if kind := provider.KindOf(err); kind != provider.Ambiguous {
			t.Errorf("accepted, then the answer lost (%s): Kind = %s, want ambiguous: the provider has the message, and a %s error would have it sent again or recorded failed (%v)", what, kind, kind, err)
		}
		l, ok := a.(provider.Looker)
		if !a.Capabilities().LookupByReference || !ok {
			return
		}
		m.AttemptedUntil = time.Now().Add(time.Second)
		lctx, lcancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer lcancel()
		got, err := l.Lookup(lctx, m)
		if err != nil {
			t.Fatalf("Lookup of a message the provider accepted: %v", err)
		}
		if got.Status != provider.LookupAccepted && got.Status != provider.LookupUnproven {
			t.Errorf("Lookup of a message the provider accepted = %+v, want accepted (or unproven)", got)
		}
	}
	t.Run("AcceptedThenFailed", func(t *testing.T) {
		acceptedThen(t, "AcceptedThenFailed", h.AcceptedThenFailed, 10*time.Second)
	})
	t.Run("AcceptedThenTimedOut", func(t *testing.T) {
		acceptedThen(t, "AcceptedThenTimedOut", h.AcceptedThenTimedOut, 500*time.Millisecond)
	})

	t.Run("Undeliverable", func(t *testing.T) {
		if h.Undeliverable == nil {
			t.Skip("Harness.Undeliverable not set")
		}
		a, k := h.New(t), key(t)
		m := h.Undeliverable(t, k)
		m.AttemptedAt = time.Now().Add(-time.Second)
		if _, err := send(t, a, m); err != nil {
			t.Fatalf("Send of a message the provider accepts and then fails: %v", err)
		}
		l, ok := a.(provider.Looker)
		if !a.Capabilities().LookupByReference || !ok {
			t.Skip("LookupByReference not declared: nothing more to check")
		}
		m.AttemptedUntil = time.Now().Add(time.Second)
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		got, err := l.Lookup(ctx, m)
		if err != nil {
			t.Fatalf("Lookup of an undeliverable message: %v", err)
		}
		if got.Status != provider.LookupRejected || got.Reason == "" {
			t.Errorf("Lookup of a message the provider failed for good = %+v, want rejected with a reason: the reconciler would otherwise resend or wait", got)
		}
	})

	t.Run("Concurrency", func(t *testing.T) {
		a := h.New(t)
		keys := make([]string, 16)
		for i := range keys {
			keys[i] = key(t)
		}
		var wg sync.WaitGroup
		errs := make([]error, len(keys))
		for i, k := range keys {
			wg.Go(func() { _, errs[i] = send(t, a, h.Message(t, k)) })
		}
		wg.Wait()
		for i, k := range keys {
			if errs[i] != nil {
				t.Errorf("concurrent Send %d: %v", i, errs[i])
			} else if n := h.Received(t, k); n != 1 {
				t.Errorf("concurrent Send %d: the provider received %d messages with its key, want 1", i, n)
			}
		}
	})
}

// checkError fails t unless err is (or wraps) a *provider.Error with a
// reason: the sender and the reconciler act on its Kind.
func checkError(t *testing.T, err error) {
	t.Helper()
	var pe *provider.Error
	if !errors.As(err, &pe) {
		t.Errorf("error %v (%T) is not a *provider.Error: KindOf would call it ambiguous by default", err, err)
		return
	}
	if pe.Reason == "" {
		t.Errorf("provider error %v has no Reason", err)
	}
}
