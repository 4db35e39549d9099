package sender

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sendonce/sendonce/internal/dispatch"
	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/ledger/ledgertest"
	"github.com/sendonce/sendonce/internal/ledger/memledger"
	"github.com/sendonce/sendonce/internal/metrics"
	"github.com/sendonce/sendonce/internal/render/rendertest"
	"github.com/sendonce/sendonce/internal/testsupport"
	"github.com/sendonce/sendonce/notify"
	"github.com/sendonce/sendonce/provider"
	"github.com/sendonce/sendonce/provider/providertest"
)

type fakeDLQ struct {
	mu   sync.Mutex
	got  []*notify.InvalidError
	fail error
}

func (d *fakeDLQ) Put(_ context.Context, _ events.SQSMessage, invalid *notify.InvalidError) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fail != nil {
		return d.fail
	}
	d.got = append(d.got, invalid)
	return nil
}

type bundle struct {
	sender  *Sender
	ledger  *memledger.Ledger
	clock   *testsupport.Clock
	prov    *providertest.Fake
	dlq     *fakeDLQ
	metrics *metrics.Tally
}

func setup(t *testing.T, p provider.Adapter) *bundle {
	t.Helper()
	clock := testsupport.NewClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	b := &bundle{
		ledger:  memledger.New(memledger.Config{Now: clock.Now}),
		clock:   clock,
		dlq:     &fakeDLQ{},
		metrics: metrics.NewTally(),
	}
	switch fp := p.(type) {
	case nil:
		b.prov = &providertest.Fake{}
		p = b.prov
	case *providertest.Fake:
		b.prov = fp
	case providertest.Looking:
		b.prov = fp.Fake
	}
	s, err := New(Config{
		Dispatcher: testsupport.Dispatcher(t, dispatch.Dispatcher{
			Ledger:          b.ledger,
			Providers:       map[string]provider.Adapter{"sms": p},
			Renderer:        rendertest.Examples(t, "acme"),
			Metrics:         b.metrics,
			ProviderTimeout: 5 * time.Second,
			ClaimTimeout:    60 * time.Second,
			Settle:          30 * time.Second,
			Now:             clock.Now,
		}),
		DeadLetters: b.dlq,
	})
	if err != nil {
		t.Fatal(err)
	}
	b.sender = s
	return b
}

func request(event string) notify.Request {
	return notify.Request{
		TenantID: "acme", EventID: event, Channel: notify.ChannelSMS, Template: "order_shipped",
		Recipient: notify.Recipient{ID: "user-42", Phone: "+15551234567"},
		Class:     notify.ClassTransactional, Data: map[string]any{"order_id": "A-1001"},
	}
}

func (b *bundle) state(t *testing.T, key string) ledger.Record {
	t.Helper()
	return ledgertest.Row(t, b.ledger, key)
}

func TestProcess(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("FirstDeliverySends", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		res := b.sender.Process(ctx, request("e1"))
		if res.Disposition != dispatch.Sent {
			t.Fatalf("status = %v (%s), want sent", res.Disposition, res.Reason)
		}
		r := b.state(t, res.Key)
		if r.State != ledger.StateSent || r.ProviderMessageID != "msg_1" || r.Address != "" || r.Body != "" {
			t.Errorf("row = %+v, want SENT with provider id and no address or body", r)
		}
	})

	t.Run("RedeliveryOfSentIsDuplicate", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		b.sender.Process(ctx, request("e1"))
		for range 3 {
			if res := b.sender.Process(ctx, request("e1")); res.Disposition != dispatch.Duplicate {
				t.Fatalf("redelivery status = %v, want duplicate", res.Disposition)
			}
		}
		if got := b.prov.Calls(); got != 1 {
			t.Errorf("provider calls = %d, want 1", got)
		}
		if got := b.metrics.Get(metrics.DuplicatesPrevented); got != 3 {
			t.Errorf("DuplicatesPrevented = %d, want 3", got)
		}
	})

	t.Run("UnknownTemplateIsAConfigError", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		req := request("e1")
		req.Template = "no_such_template"
		res := b.sender.Process(ctx, req)
		if res.Disposition != dispatch.Retry || !strings.Contains(res.Reason, "config: render no_such_template for sms: unknown template") {
			t.Fatalf("result = %+v, want retry: a configuration error, never FAILED", res)
		}
		if _, err := b.ledger.Get(ctx, res.Key); !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("a row for a request whose template is missing: %v", err)
		}
		if got := b.metrics.Get(metrics.ConfigErrors); got != 1 {
			t.Errorf("ConfigErrors = %d, want 1 (alarmed)", got)
		}
		if b.prov.Calls() != 0 {
			t.Error("provider was called")
		}
	})

	// Issue 13: a channel with no provider is a configuration error, never
	// a final failure. The claim is released and the record retried (it
	// reaches the DLQ once its receives run out); once the deployment
	// serves the channel, a redelivery (or a redrive) sends it once.
	t.Run("UnconfiguredChannelIsRetriedNotFailed", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		req := request("e1")
		req.Channel, req.Recipient.Email = notify.ChannelEmail, "ana@example.com"
		for range 2 {
			res := b.sender.Process(ctx, req)
			if res.Disposition != dispatch.Retry || !strings.Contains(res.Reason, "no provider is configured for channel email") {
				t.Fatalf("result = %+v, want retry: no provider is configured for channel email", res)
			}
			b.clock.Advance(time.Second)
		}
		r := b.state(t, req.Key())
		if r.State != ledger.StatePending || !r.Released || r.TemplateVersion == 0 || r.Data == "" || r.Address == "" {
			t.Fatalf("row = %s released=%v v%d data=%q, want PENDING, released, keeping the render inputs", r.State, r.Released, r.TemplateVersion, r.Data)
		}
		if got := b.metrics.Get(metrics.ConfigErrors); got != 2 {
			t.Errorf("ConfigErrors = %d, want 2", got)
		}
		if b.prov.Calls() != 0 {
			t.Fatal("provider of another channel was called")
		}

		// The deployment is fixed: the channel has a provider now.
		email := &providertest.Fake{}
		fixed, err := New(Config{
			Dispatcher: testsupport.Dispatcher(t, dispatch.Dispatcher{
				Ledger:          b.ledger,
				Providers:       map[string]provider.Adapter{"email": email},
				Renderer:        rendertest.Examples(t, "acme"),
				Metrics:         b.metrics,
				ProviderTimeout: 5 * time.Second,
				ClaimTimeout:    60 * time.Second,
				Settle:          30 * time.Second,
				Now:             b.clock.Now,
			}),
			DeadLetters: b.dlq,
		})
		if err != nil {
			t.Fatal(err)
		}
		for i, want := range []dispatch.Disposition{dispatch.Sent, dispatch.Duplicate} {
			if res := fixed.Process(ctx, req); res.Disposition != want {
				t.Fatalf("delivery %d after the fix: %v (%s), want %v", i+1, res.Disposition, res.Reason, want)
			}
		}
		if email.Calls() != 1 || email.Sent()[0].To != "ana@example.com" || email.Sent()[0].Key != req.Key() {
			t.Errorf("email provider got %+v, want one send to ana@example.com with the key", email.Sent())
		}
		if r := b.state(t, req.Key()); r.State != ledger.StateSent {
			t.Errorf("row = %s, want SENT", r.State)
		}
	})

	t.Run("PermanentRejectionFails", func(t *testing.T) {
		t.Parallel()
		p := &providertest.Fake{SendFunc: func(context.Context, provider.Message) (provider.Receipt, error) {
			return provider.Receipt{}, &provider.Error{Kind: provider.Permanent, Provider: "fake", Op: "send", Code: "400", Reason: "invalid number"}
		}}
		b := setup(t, p)
		res := b.sender.Process(ctx, request("e1"))
		if res.Disposition != dispatch.Failed || res.Reason != "400: invalid number" {
			t.Fatalf("result = %+v", res)
		}
		if r := b.state(t, res.Key); r.State != ledger.StateFailed || r.Reason != "400: invalid number" {
			t.Errorf("row = %s %q", r.State, r.Reason)
		}
	})

	t.Run("TransientReleasesAndRetrySends", func(t *testing.T) {
		t.Parallel()
		var fail atomic.Bool
		fail.Store(true)
		p := &providertest.Fake{}
		p.SendFunc = func(context.Context, provider.Message) (provider.Receipt, error) {
			if fail.Load() {
				return provider.Receipt{}, &provider.Error{Kind: provider.Transient, Provider: "fake", Op: "send", Code: "503"}
			}
			return provider.Receipt{MessageID: "msg_ok"}, nil
		}
		b := setup(t, p)
		res := b.sender.Process(ctx, request("e1"))
		if res.Disposition != dispatch.Retry {
			t.Fatalf("status = %v, want retry", res.Disposition)
		}
		if r := b.state(t, res.Key); r.State != ledger.StatePending || !r.Released {
			t.Fatalf("row = %s released=%v, want PENDING released", r.State, r.Released)
		}
		fail.Store(false)
		if res := b.sender.Process(ctx, request("e1")); res.Disposition != dispatch.Sent {
			t.Fatalf("retry status = %v (%s), want sent", res.Disposition, res.Reason)
		}
		if r := b.state(t, res.Key); r.State != ledger.StateSent || r.Attempts != 2 {
			t.Errorf("row = %s attempts=%d, want SENT after 2 attempts", r.State, r.Attempts)
		}
		if got := b.metrics.Get(metrics.Reclaims); got != 1 {
			t.Errorf("Reclaims = %d, want 1", got)
		}
	})

	t.Run("ConfigErrorIsRetriedNeverFailed", func(t *testing.T) {
		t.Parallel()
		p := &providertest.Fake{SendFunc: func(context.Context, provider.Message) (provider.Receipt, error) {
			return provider.Receipt{}, &provider.Error{Kind: provider.Config, Provider: "fake", Op: "send", Code: "401"}
		}}
		b := setup(t, p)
		res := b.sender.Process(ctx, request("e1"))
		if res.Disposition != dispatch.Retry {
			t.Fatalf("status = %v, want retry", res.Disposition)
		}
		if r := b.state(t, res.Key); r.State != ledger.StatePending {
			t.Errorf("state = %s, want PENDING (never FAILED for a configuration error)", r.State)
		}
	})

	t.Run("AmbiguousWithoutIdempotencyIsUncertain", func(t *testing.T) {
		t.Parallel()
		p := &providertest.Fake{SendFunc: func(context.Context, provider.Message) (provider.Receipt, error) {
			return provider.Receipt{}, &provider.Error{Kind: provider.Ambiguous, Provider: "fake", Op: "send", Reason: "timeout after the request was written"}
		}}
		b := setup(t, p)
		res := b.sender.Process(ctx, request("e1"))
		if res.Disposition != dispatch.Uncertain {
			t.Fatalf("status = %v, want uncertain", res.Disposition)
		}
		r := b.state(t, res.Key)
		if r.State != ledger.StateUncertain || r.Address == "" || r.TemplateVersion == 0 || r.Data == "" {
			t.Errorf("row = %+v, want UNCERTAIN keeping address and render inputs for a resend", r)
		}
		if got := b.metrics.Get(metrics.UncertainAttempts); got != 1 {
			t.Errorf("UncertainAttempts = %d, want 1", got)
		}
		if res := b.sender.Process(ctx, request("e1")); res.Disposition != dispatch.OwnedByReconciler {
			t.Errorf("redelivery status = %v, want owned by reconciler", res.Disposition)
		}
		if got := p.Calls(); got != 1 {
			t.Errorf("provider calls = %d, want 1", got)
		}
	})

	// An ambiguous attempt is never released, not even through a provider
	// that drops repeats: a release would let another provider send it.
	t.Run("AmbiguousWithIdempotencyIsUncertain", func(t *testing.T) {
		t.Parallel()
		p := &providertest.Fake{Caps: provider.Capabilities{IdempotentSends: true}, SendFunc: func(context.Context, provider.Message) (provider.Receipt, error) {
			return provider.Receipt{}, &provider.Error{Kind: provider.Ambiguous, Provider: "fake", Op: "send"}
		}}
		b := setup(t, p)
		res := b.sender.Process(ctx, request("e1"))
		if res.Disposition != dispatch.Uncertain {
			t.Fatalf("status = %v, want uncertain", res.Disposition)
		}
		if r := b.state(t, res.Key); r.State != ledger.StateUncertain || r.Released {
			t.Errorf("row %s, released %v; want UNCERTAIN, not released", r.State, r.Released)
		}
		if got := b.metrics.Get(metrics.UncertainAttempts); got != 1 {
			t.Errorf("UncertainAttempts = %d, want 1", got)
		}
	})

	t.Run("LiveClaimIsInFlight", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		req := request("e1")
		if _, err := b.ledger.Claim(ctx, ledger.Entry{Key: req.Key(), Tenant: "acme", Channel: "sms"}, time.Minute); err != nil {
			t.Fatal(err)
		}
		if res := b.sender.Process(ctx, req); res.Disposition != dispatch.Retry {
			t.Fatalf("status = %v, want retry", res.Disposition)
		}
		if got := b.metrics.Get(metrics.InFlightConflicts); got != 1 {
			t.Errorf("InFlightConflicts = %d, want 1", got)
		}
		if b.prov.Calls() != 0 {
			t.Error("provider called while another worker holds the claim")
		}
	})

	t.Run("DeadlineTooCloseDoesNotClaim", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		dctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		res := b.sender.Process(dctx, request("e1"))
		if res.Disposition != dispatch.Retry {
			t.Fatalf("status = %v, want retry", res.Disposition)
		}
		if _, err := b.ledger.Get(ctx, res.Key); !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("Get = %v, want no row (no claim taken)", err)
		}
	})
}

// crashAfterClaim leaves a PENDING row as a worker that died after its
// claim (and perhaps after its provider call) would.
func crashAfterClaim(t *testing.T, b *bundle, req notify.Request) {
	t.Helper()
	msg, err := rendertest.Examples(t, req.TenantID).RenderRequest(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.ledger.Claim(context.Background(), ledger.Entry{
		Key: req.Key(), Tenant: req.TenantID, Channel: string(req.Channel), Class: string(req.Class),
		Provider: "fake", Template: req.Template, RecipientID: req.Recipient.ID, Address: req.Address(),
		Subject: msg.Subject, Body: msg.Body,
	}, 60*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(61 * time.Second)
}

func TestStaleClaimTakeover(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("IdempotentProviderResendsWithSameKey", func(t *testing.T) {
		t.Parallel()
		var keys []string
		p := &providertest.Fake{Caps: provider.Capabilities{IdempotentSends: true}}
		p.SendFunc = func(_ context.Context, m provider.Message) (provider.Receipt, error) {
			keys = append(keys, m.Key)
			return provider.Receipt{MessageID: "m"}, nil
		}
		b := setup(t, p)
		req := request("e1")
		crashAfterClaim(t, b, req)
		if res := b.sender.Process(ctx, req); res.Disposition != dispatch.Sent {
			t.Fatalf("status = %v (%s), want sent", res.Disposition, res.Reason)
		}
		if len(keys) != 1 || keys[0] != req.Key() {
			t.Errorf("sent keys = %v, want [%s]", keys, req.Key())
		}
		if b.metrics.Get(metrics.Reclaims) != 1 {
			t.Error("takeover not counted as a reclaim")
		}
	})

	t.Run("LookupFindsAcceptedAndDoesNotResend", func(t *testing.T) {
		t.Parallel()
		fp := &providertest.Fake{Caps: provider.Capabilities{LookupByReference: true}}
		lookFn := func(context.Context, provider.Message) (provider.LookupResult, error) {
			return provider.LookupResult{Status: provider.LookupAccepted, MessageID: "msg_earlier"}, nil
		}
		b := setup(t, providertest.Looking{Fake: fp, LookupFunc: lookFn})
		req := request("e1")
		crashAfterClaim(t, b, req)
		res := b.sender.Process(ctx, req)
		if res.Disposition != dispatch.Sent {
			t.Fatalf("status = %v (%s), want sent", res.Disposition, res.Reason)
		}
		if fp.Calls() != 0 {
			t.Error("provider asked to send a message it already accepted")
		}
		if r := b.state(t, res.Key); r.ProviderMessageID != "msg_earlier" {
			t.Errorf("provider id = %q, want msg_earlier", r.ProviderMessageID)
		}
	})

	t.Run("LookupFindsNothingSends", func(t *testing.T) {
		t.Parallel()
		fp := &providertest.Fake{Caps: provider.Capabilities{LookupByReference: true}}
		lookFn := func(context.Context, provider.Message) (provider.LookupResult, error) {
			return provider.LookupResult{Status: provider.LookupNotFound}, nil
		}
		b := setup(t, providertest.Looking{Fake: fp, LookupFunc: lookFn})
		req := request("e1")
		crashAfterClaim(t, b, req)
		if res := b.sender.Process(ctx, req); res.Disposition != dispatch.Sent {
			t.Fatalf("status = %v (%s), want sent", res.Disposition, res.Reason)
		}
		if fp.Calls() != 1 {
			t.Errorf("provider calls = %d, want 1", fp.Calls())
		}
	})

	t.Run("NoCapabilityBecomesUncertain", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		req := request("e1")
		crashAfterClaim(t, b, req)
		res := b.sender.Process(ctx, req)
		if res.Disposition != dispatch.Uncertain {
			t.Fatalf("status = %v (%s), want uncertain", res.Disposition, res.Reason)
		}
		if b.prov.Calls() != 0 {
			t.Error("blind resend after a crash with a provider that cannot dedupe")
		}
	})
}

// TestStaleClaimTakenOverByRedelivery: a first claim whose worker died is
// not in the attention index; the message's SQS redelivery takes the stale
// row over, and from then on the reconciler sees it (ledger package doc,
// "Why no message is stranded", first case).
func TestStaleClaimTakenOverByRedelivery(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	req := request("e1")
	listed := func() bool {
		t.Helper()
		p, err := b.ledger.Attention(t.Context(), ledger.AttentionQuery{Shard: ledger.Shard(req.Key()), DueBefore: b.clock.Now().Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		return len(p.Records) == 1
	}
	crashAfterClaim(t, b, req)
	if listed() {
		t.Fatal("a dead worker's first claim is indexed")
	}
	if res := b.sender.Process(t.Context(), req); res.Disposition != dispatch.Uncertain {
		t.Fatalf("redelivery = %v (%s), want uncertain", res.Disposition, res.Reason)
	}
	if !listed() {
		t.Error("the redelivery's takeover left the row out of the attention index")
	}
}

// TestNewValidatesClaimTimeout: the claim must cover a takeover's worst
// path, a lookup and then a send (two provider timeouts plus the margin).
func TestNewValidatesClaimTimeout(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		provider, claim time.Duration
		ok              bool
	}{
		{5 * time.Second, 8 * time.Second, false},
		{5 * time.Second, 14 * time.Second, false}, // one provider call + margin would pass: not enough
		{5 * time.Second, 15 * time.Second, true},
		{20 * time.Second, 44 * time.Second, false},
		{20 * time.Second, 45 * time.Second, true},
	} {
		// The sender's dispatcher validates the lease it claims with.
		_, err := dispatch.New(dispatch.Dispatcher{
			Ledger:          memledger.New(memledger.Config{}),
			Renderer:        rendertest.Examples(t, "acme"),
			ProviderTimeout: tc.provider,
			ClaimTimeout:    tc.claim,
		})
		if tc.ok != (err == nil) {
			t.Errorf("provider %s, claim %s: New error = %v, want ok=%v", tc.provider, tc.claim, err, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), fmt.Sprintf("claim timeout (%s) must be at least twice the provider timeout (%s)", tc.claim, tc.provider)) {
			t.Errorf("New error = %v", err)
		}
	}
}
