package sender

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sendonce/sendonce/internal/decide"
	"github.com/sendonce/sendonce/internal/dispatch"
	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/metrics"
	"github.com/sendonce/sendonce/internal/render/rendertest"
	"github.com/sendonce/sendonce/internal/testsupport"
	"github.com/sendonce/sendonce/provider"
	"github.com/sendonce/sendonce/provider/providertest"
)

// withValidity rebuilds b's sender with the classes' default validities.
func (b *bundle) withValidity(t *testing.T, validity map[string]time.Duration, route ...provider.Adapter) {
	t.Helper()
	if len(route) == 0 {
		route = []provider.Adapter{b.prov}
	}
	s, err := New(Config{
		Dispatcher: testsupport.Dispatcher(t, dispatch.Dispatcher{
			Ledger:          b.ledger,
			Providers:       map[string]provider.Adapter{"sms": route[0]},
			Fallbacks:       map[string][]provider.Adapter{"sms": route[1:]},
			Renderer:        rendertest.Examples(t, "acme"),
			Metrics:         b.metrics,
			ProviderTimeout: 5 * time.Second,
			ClaimTimeout:    60 * time.Second,
			Settle:          30 * time.Second,
			Now:             b.clock.Now,
		}),
		DeadLetters: b.dlq,
		Validity:    validity,
	})
	if err != nil {
		t.Fatal(err)
	}
	b.sender = s
}

// wantExpired fails t unless res and the row of its key say the message
// ended FAILED (expired), counted as Expired and not as Failed.
func (b *bundle) wantExpired(t *testing.T, res dispatch.Result) ledger.Record {
	t.Helper()
	if res.Disposition != dispatch.Failed {
		t.Fatalf("disposition %s (%s), want failed (expired)", res.Disposition, res.Reason)
	}
	r := b.state(t, res.Key)
	if r.State != ledger.StateFailed || !decide.IsExpired(r.Reason) {
		t.Fatalf("row %s (%q), want FAILED with an expired reason", r.State, r.Reason)
	}
	if b.metrics.Get(metrics.Expired) != 1 || b.metrics.Get(metrics.Failed) != 0 {
		t.Errorf("Expired = %d, Failed = %d; want 1 and 0", b.metrics.Get(metrics.Expired), b.metrics.Get(metrics.Failed))
	}
	return r
}

// TestSenderRefusesExpired: a message past its validity (its expires_at,
// or its class's default counted from when it was first enqueued) is
// never sent: the claim is recorded FAILED (expired) and the record
// acknowledged.
func TestSenderRefusesExpired(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("ExpiresAtPassed", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		r := request("e-expired")
		r.ExpiresAt = b.clock.Now().Add(-time.Second).Format(time.RFC3339)
		row := b.wantExpired(t, b.sender.Process(ctx, r))
		if b.prov.Calls() != 0 {
			t.Errorf("the provider was called %d times", b.prov.Calls())
		}
		if !row.ValidUntil.Equal(r.Expiry()) {
			t.Errorf("row ValidUntil = %v, want the request's %v", row.ValidUntil, r.Expiry())
		}
		// A redelivery finds the final row: a duplicate, still not sent.
		if res := b.sender.Process(ctx, r); res.Disposition != dispatch.Duplicate || b.prov.Calls() != 0 {
			t.Errorf("redelivery: %s after %d sends", res.Disposition, b.prov.Calls())
		}
	})

	t.Run("ExpiresAtAhead", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		r := request("e-valid")
		r.ExpiresAt = b.clock.Now().Add(time.Minute).Format(time.RFC3339)
		if res := b.sender.Process(ctx, r); res.Disposition != dispatch.Sent {
			t.Fatalf("disposition %s (%s), want sent", res.Disposition, res.Reason)
		}
		if row := b.state(t, r.Key()); !row.ValidUntil.Equal(r.Expiry()) {
			t.Errorf("row ValidUntil = %v, want %v (kept on the final row)", row.ValidUntil, r.Expiry())
		}
	})

	t.Run("ClassDefaultFromEnqueueTime", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		b.withValidity(t, map[string]time.Duration{"otp": 10 * time.Minute})
		otp := request("e-otp-old")
		otp.Class = "otp"
		now := b.clock.Now()
		rec := func(r string, sent time.Time) events.SQSMessage {
			return events.SQSMessage{MessageId: r, Body: `{"tenant_id":"acme","event_id":"` + r + `","channel":"sms","template":"order_shipped","class":"otp",` +
				`"recipient":{"id":"user-42","phone":"+15551234567"},"data":{"order_id":"A-1001"}}`,
				Attributes: map[string]string{"SentTimestamp": strconv.FormatInt(sent.UnixMilli(), 10)}}
		}
		resp, err := b.sender.HandleSQS(ctx, events.SQSEvent{Records: []events.SQSMessage{rec("e-old", now.Add(-11*time.Minute)), rec("e-new", now.Add(-9*time.Minute))}})
		if err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("HandleSQS = %+v, %v", resp, err)
		}
		if b.prov.Calls() != 1 || b.metrics.Get(metrics.Expired) != 1 {
			t.Fatalf("%d sends, Expired = %d; want the 9-minute-old code sent and the 11-minute-old one expired", b.prov.Calls(), b.metrics.Get(metrics.Expired))
		}
		// A redriven copy carries its first enqueue time: a new
		// SentTimestamp does not restart the class's validity.
		redriven := rec("e-redriven", now)
		first := strconv.FormatInt(now.Add(-time.Hour).UnixMilli(), 10)
		redriven.MessageAttributes = map[string]events.SQSMessageAttribute{EnqueuedAttribute: {StringValue: &first, DataType: "Number"}}
		if _, err := b.sender.HandleSQS(ctx, events.SQSEvent{Records: []events.SQSMessage{redriven}}); err != nil {
			t.Fatal(err)
		}
		if b.prov.Calls() != 1 || b.metrics.Get(metrics.Expired) != 2 {
			t.Errorf("redriven: %d sends, Expired = %d; want it expired", b.prov.Calls(), b.metrics.Get(metrics.Expired))
		}
		// A request's earlier expires_at wins over the class default.
		otp.ExpiresAt = now.Add(-time.Second).Format(time.RFC3339)
		if res := b.sender.Process(ctx, otp); res.Disposition != dispatch.Failed {
			t.Errorf("expires_at before the class default: %s, want failed (expired)", res.Disposition)
		}
	})

	// The first attempt was refused (released: nothing sent); the
	// redelivery comes after the validity passed.
	t.Run("RedeliveryOfReleasedAfterExpiry", func(t *testing.T) {
		t.Parallel()
		refuse := true
		p := &providertest.Fake{SendFunc: func(context.Context, provider.Message) (provider.Receipt, error) {
			if refuse {
				return provider.Receipt{}, &provider.Error{Kind: provider.Transient, Reason: "503"}
			}
			return provider.Receipt{MessageID: "msg"}, nil
		}}
		b := setup(t, p)
		r := request("e-released")
		r.ExpiresAt = b.clock.Now().Add(time.Minute).Format(time.RFC3339)
		if res := b.sender.Process(ctx, r); res.Disposition != dispatch.Retry {
			t.Fatalf("first attempt: %s, want retry", res.Disposition)
		}
		refuse = false
		b.clock.Advance(2 * time.Minute)
		b.wantExpired(t, b.sender.Process(ctx, r))
		if p.Calls() != 1 {
			t.Errorf("%d provider calls, want only the refused first one", p.Calls())
		}
	})
}

// TestFailoverStopsAtExpiry: the route's first provider refuses (nothing
// was sent) and, by the time it answered, the message's validity had
// passed: the next provider is not tried; the row ends FAILED (expired).
// While the message is valid the same refusal fails over.
func TestFailoverStopsAtExpiry(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		slowness time.Duration // how long the refusal took
		expired  bool
	}{
		{"StillValid", 10 * time.Second, false},
		{"ExpiredDuringTheRefusal", 2 * time.Minute, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil)
			primary := &providertest.Fake{ProviderName: "twilio", SendFunc: func(context.Context, provider.Message) (provider.Receipt, error) {
				b.clock.Advance(tc.slowness)
				return provider.Receipt{}, &provider.Error{Kind: provider.Transient, Reason: "429 too many requests"}
			}}
			fallback := &providertest.Fake{ProviderName: "sns"}
			b.withValidity(t, nil, primary, fallback)
			r := request("e-failover")
			r.ExpiresAt = b.clock.Now().Add(time.Minute).Format(time.RFC3339)
			res := b.sender.Process(context.Background(), r)
			if !tc.expired {
				if res.Disposition != dispatch.Sent || fallback.Calls() != 1 {
					t.Fatalf("%s, fallback called %d times; want sent through the fallback", res.Disposition, fallback.Calls())
				}
				return
			}
			b.wantExpired(t, res)
			if fallback.Calls() != 0 || b.metrics.Get(metrics.Failovers) != 0 {
				t.Errorf("the fallback was called %d times (Failovers %d) after the validity passed", fallback.Calls(), b.metrics.Get(metrics.Failovers))
			}
		})
	}
}

// TestStaleClaimOfExpiredMessage: a worker died mid-send (stale PENDING)
// and the redelivery comes after the message's validity: it is not
// resent. A provider that can be asked is asked first (it has the
// message: SENT); one that cannot leaves the row UNCERTAIN for the
// reconciler, which records it expired.
func TestStaleClaimOfExpiredMessage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		lookup    bool
		wantState ledger.State
	}{
		{"LookedUpFound", true, ledger.StateSent},
		{"CannotLookUp", false, ledger.StateUncertain},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fake := &providertest.Fake{Caps: provider.Capabilities{IdempotentSends: true}}
			var p provider.Adapter = fake
			if tc.lookup {
				fake.Caps.LookupByReference = true
				p = providertest.Looking{Fake: fake, LookupFunc: func(context.Context, provider.Message) (provider.LookupResult, error) {
					return provider.LookupResult{Status: provider.LookupAccepted, MessageID: "msg_dead"}, nil
				}}
			}
			b := setup(t, p)
			r := request("e-stale")
			r.ExpiresAt = b.clock.Now().Add(30 * time.Second).Format(time.RFC3339)
			e := ledger.Entry{Key: r.Key(), Tenant: "acme", Channel: "sms", Class: "transactional", Provider: "fake", Template: "order_shipped",
				RecipientID: "user-42", Address: "+15551234567", Body: "hi", ValidUntil: r.Expiry()}
			if _, err := b.ledger.Claim(ctx, e, time.Minute); err != nil {
				t.Fatal(err)
			}
			b.clock.Advance(2 * time.Minute)
			b.sender.Process(ctx, r)
			row := b.state(t, r.Key())
			if row.State != tc.wantState || fake.Calls() != 0 {
				t.Errorf("row %s (%q) after %d sends; want %s and no send", row.State, row.Reason, fake.Calls(), tc.wantState)
			}
		})
	}
}
