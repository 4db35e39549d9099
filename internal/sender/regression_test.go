package sender_test

// Regression tests of issue 10's send-path defects, each against the real
// sender with the in-memory ledger (which passes the same conformance
// suite as DynamoDB) and, where the defect is a provider's, the real
// adapter against its faithful fake.

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/decide"
	"github.com/sendonce/sendonce/internal/dispatch"
	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/ledger/ledgertest"
	"github.com/sendonce/sendonce/internal/ledger/memledger"
	"github.com/sendonce/sendonce/internal/metrics"
	"github.com/sendonce/sendonce/internal/provider/twilio"
	"github.com/sendonce/sendonce/internal/provider/twilio/twiliotest"
	"github.com/sendonce/sendonce/internal/reconcile"
	"github.com/sendonce/sendonce/internal/render/rendertest"
	"github.com/sendonce/sendonce/internal/sender"
	"github.com/sendonce/sendonce/internal/testsupport"
	"github.com/sendonce/sendonce/notify"
	"github.com/sendonce/sendonce/provider"
	"github.com/sendonce/sendonce/provider/providertest"
)

var quiet = slog.New(slog.DiscardHandler)

type regBundle struct {
	clock  *testsupport.Clock
	mem    *memledger.Ledger
	lossy  *ledgertest.Lossy
	tally  *metrics.Tally
	sender *sender.Sender
}

func regSetup(t *testing.T, p provider.Adapter) *regBundle {
	t.Helper()
	b := &regBundle{clock: testsupport.NewClock(time.Now().UTC().Truncate(time.Millisecond)), tally: metrics.NewTally()}
	b.mem = memledger.New(memledger.Config{Now: b.clock.Now})
	b.lossy = ledgertest.NewLossy(b.mem)
	s, err := sender.New(sender.Config{
		Dispatcher: testsupport.Dispatcher(t, dispatch.Dispatcher{
			Ledger:          b.lossy,
			Providers:       map[string]provider.Adapter{"sms": p},
			Renderer:        rendertest.Examples(t, "acme"),
			Metrics:         b.tally,
			Logger:          quiet,
			ProviderTimeout: 2 * time.Second,
			ClaimTimeout:    time.Minute,
			Settle:          2 * time.Minute,
			Now:             b.clock.Now,
		}),
		DeadLetters: discardDLQ{},
	})
	if err != nil {
		t.Fatal(err)
	}
	b.sender = s
	return b
}

func (b *regBundle) row(t *testing.T, key string) ledger.Record {
	t.Helper()
	return ledgertest.Row(t, b.mem, key)
}

func (b *regBundle) process(t *testing.T, r notify.Request, want dispatch.Disposition) {
	t.Helper()
	if res := b.sender.Process(context.Background(), r); res.Disposition != want {
		t.Fatalf("Process = %s (%s), want %s", res.Disposition, res.Reason, want)
	}
}

// TestTwilioTakeoverLooksUpTheDeadWorkersAttempt (defect 1): a worker
// claims and sends through Twilio, then dies before recording it. Three
// minutes later a redelivery takes the stale claim over. Twilio's lookup
// lists messages created from the attempt's time (less a minute), so the
// lookup must ask about the dead worker's attempt, not the takeover's new
// claim time; asking about the takeover found nothing and sent again.
func TestTwilioTakeoverLooksUpTheDeadWorkersAttempt(t *testing.T) {
	t.Parallel()
	b, fake, r, e := twilioDeadWorker(t, "twilio-takeover")
	b.process(t, r, dispatch.Sent) // found by lookup
	if got := fake.Count(e.Address, e.Body); got != 1 {
		t.Fatalf("twilio holds %d messages, want 1: the takeover sent again", got)
	}
	if row := b.row(t, e.Key); row.State != ledger.StateSent || row.ProviderMessageID != fake.Messages()[0].SID {
		t.Errorf("row %s %q, want SENT with Twilio's SID %q", row.State, row.ProviderMessageID, fake.Messages()[0].SID)
	}
}

// TestTwilioLostTakeoverKeepsTheLookupWindow (defect 1, with defect 3): a
// worker sends through Twilio and dies. The redelivery finds the message
// by lookup, but its takeover's answer is lost: the takeover applied (the
// row's attempt time is now the takeover's) and could not be released,
// because the dead worker's attempt did send. The next redelivery must
// still ask about the dead worker's attempt (the row's LookupFrom), not
// about the takeover that sent nothing.
func TestTwilioLostTakeoverKeepsTheLookupWindow(t *testing.T) {
	t.Parallel()
	b, fake, r, e := twilioDeadWorker(t, "twilio-lost-takeover")
	b.lossy.LoseNext(ledgertest.OpTakeOver, 1)
	b.process(t, r, dispatch.Retry) // the takeover's answer lost
	b.clock.Advance(3 * time.Minute)
	b.process(t, r, dispatch.Sent) // found by lookup
	if got := fake.Count(e.Address, e.Body); got != 1 {
		t.Fatalf("twilio holds %d messages, want 1: the lookup asked about the takeover, not the dead worker's attempt", got)
	}
}

// twilioDeadWorker builds a sender over the real Twilio adapter and its
// fake, then plays a worker that claims the request of event, sends it
// through Twilio and dies before recording anything; the clock moves on
// three minutes, past the claim's lease. Twilio's status callback for the
// message reached the webhook. It returns the bundle, the fake,
// the request and the entry the worker claimed.
func twilioDeadWorker(t *testing.T, event string) (*regBundle, *twiliotest.Server, notify.Request, ledger.Entry) {
	t.Helper()
	fake := twiliotest.New(t)
	p, err := twilio.New(twilio.Config{BaseURL: fake.URL, AccountSID: fake.AccountSID, AuthToken: fake.AuthToken,
		From: "+15550001111", Timeout: time.Second, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	b := regSetup(t, p)
	fake.SetNow(b.clock.Now)
	r := req(event)
	msg, err := rendertest.Examples(t, r.TenantID).RenderRequest(t.Context(), r)
	if err != nil {
		t.Fatal(err)
	}
	e := ledger.Entry{Key: r.Key(), Tenant: r.TenantID, Channel: "sms", Class: string(r.Class), Provider: "twilio",
		Template: r.Template, RecipientID: r.Recipient.ID, Address: r.Address(), Subject: msg.Subject, Body: msg.Body}
	c, err := b.mem.Claim(context.Background(), e, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := p.Send(context.Background(), provider.Message{Key: e.Key, Channel: "sms", To: e.Address, Body: e.Body, AttemptedAt: c.AttemptedAt})
	if err != nil {
		t.Fatal(err)
	}
	// Twilio's status callback carries the key: the webhook records the
	// SID in the row, the evidence that the listed message is this key's.
	if _, err := b.mem.ApplyDelivery(context.Background(), e.Key, ledger.Delivery{Status: "sent", Rank: 2, At: b.clock.Now(), ProviderMessageID: rc.MessageID}); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(3 * time.Minute)
	return b, fake, r, e
}

// TestOutageNeverAbandonsANeverSentMessage (defect 2): six minutes of 429s
// from the provider. Each sender redelivery and reconciler run takes the
// released row over and calls the provider (until the provider is known
// down: then it is left as it is); none of those attempts sent
// anything, so none counts toward giving up: the row must not be
// ABANDONED, and once the outage ends the message is delivered once. The
// reconciler's own retries back off.
func TestOutageNeverAbandonsANeverSentMessage(t *testing.T) {
	t.Parallel()
	outage := true
	var accepted int
	p := &providertest.Fake{}
	p.SendFunc = func(context.Context, provider.Message) (provider.Receipt, error) {
		if outage {
			return provider.Receipt{}, &provider.Error{Kind: provider.Transient, Provider: "fake", Op: "send", Code: "429", Reason: "too many requests"}
		}
		accepted++
		return provider.Receipt{MessageID: "msg_ok"}, nil
	}
	b := regSetup(t, p)
	rec, err := reconcile.New(reconcile.Config{
		Dispatcher: testsupport.Dispatcher(t, dispatch.Dispatcher{
			Ledger:          b.lossy,
			Providers:       map[string]provider.Adapter{"sms": p},
			Logger:          quiet,
			Metrics:         b.tally,
			Renderer:        rendertest.Examples(t, "acme"),
			ProviderTimeout: 2 * time.Second,
			ClaimTimeout:    time.Minute,
			Settle:          2 * time.Minute,
			Now:             b.clock.Now,
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	r := req("outage")
	r.Class = notify.ClassMarketing // the class most eager to abandon
	b.process(t, r, dispatch.Retry)
	reconcilerCalls := 0
	// Every 30 s a reconciler run; every 90 s an SQS redelivery.
	for step := 1; step <= 12; step++ {
		b.clock.Advance(30 * time.Second)
		before := p.Calls()
		if _, err := rec.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		reconcilerCalls += p.Calls() - before
		if step%3 == 0 {
			b.process(t, r, dispatch.Retry)
		}
		if st := b.row(t, r.Key()).State; st != ledger.StatePending {
			t.Fatalf("after %s of 429s (%d provider calls, none accepted) the row is %s, want PENDING (released)",
				time.Duration(step)*30*time.Second, p.Calls(), st)
		}
	}
	if p.Calls() < 5 {
		t.Fatalf("%d provider calls during the outage, want at least 5", p.Calls())
	}
	if reconcilerCalls > 4 {
		t.Errorf("the reconciler called the provider %d times in 6 minutes: its retries of a released row do not back off", reconcilerCalls)
	}
	row := b.row(t, r.Key())
	if !row.Released || row.Releases != row.Attempts {
		t.Errorf("row released=%v releases=%d attempts=%d, want every attempt released", row.Released, row.Releases, row.Attempts)
	}
	outage = false
	// The sender's container knows the provider down until its cool-down
	// passes (dispatch.Health): a redelivery meanwhile leaves the row as
	// it is, nothing written (decide: health down).
	b.clock.Advance(dispatch.DefaultHealthCooldown)
	b.process(t, r, dispatch.Sent)
	b.process(t, r, dispatch.Duplicate)
	for range 3 {
		b.clock.Advance(time.Hour)
		if _, err := rec.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if accepted != 1 || b.row(t, r.Key()).State != ledger.StateSent {
		t.Errorf("after the outage: accepted %d, row %s; want delivered once, SENT", accepted, b.row(t, r.Key()).State)
	}
}

// TestLostLedgerAnswers (defect 3): after a claim-taking write whose answer
// was lost, the worker releases the claim it tried to take, and a failed
// Release is retried under a context that survives the invocation. The
// provider can neither drop repeats nor be asked, so an unreleased claim
// would become UNCERTAIN once its lease passed, and a transactional
// message would be abandoned without ever being sent.
func TestLostLedgerAnswers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	transientOnce := func() *providertest.Fake {
		p := &providertest.Fake{}
		p.SendFunc = func(context.Context, provider.Message) (provider.Receipt, error) {
			if p.Calls() == 1 {
				return provider.Receipt{}, providertest.Error(provider.Transient, "503")
			}
			return provider.Receipt{MessageID: "msg_ok"}, nil
		}
		return p
	}
	// After the fault, the row must be released, and a redelivery once the
	// lease would have passed sends exactly once.
	check := func(t *testing.T, b *regBundle, p *providertest.Fake, r notify.Request, wantCalls int) {
		t.Helper()
		row := b.row(t, r.Key())
		if row.State != ledger.StatePending || !row.Released {
			t.Fatalf("after the lost answer the row is %s released=%v, want PENDING released (nothing was sent)", row.State, row.Released)
		}
		b.clock.Advance(61 * time.Second)
		b.process(t, r, dispatch.Sent)
		if got := p.Calls(); got != wantCalls {
			t.Errorf("provider calls = %d, want %d", got, wantCalls)
		}
	}

	t.Run("ClaimAnswerLost", func(t *testing.T) {
		t.Parallel()
		p := &providertest.Fake{}
		b := regSetup(t, p)
		r := req("lost-claim")
		b.lossy.LoseNext(ledgertest.OpClaim, 1)
		b.process(t, r, dispatch.Retry)
		if p.Calls() != 0 {
			t.Fatal("provider called after a lost claim answer")
		}
		check(t, b, p, r, 1)
	})

	t.Run("TakeOverAnswerLost", func(t *testing.T) {
		t.Parallel()
		p := transientOnce()
		b := regSetup(t, p)
		r := req("lost-takeover")
		b.process(t, r, dispatch.Retry) // 503: released
		b.lossy.LoseNext(ledgertest.OpTakeOver, 1)
		b.process(t, r, dispatch.Retry)
		check(t, b, p, r, 2)
	})

	t.Run("ReleaseFailsThenSucceeds", func(t *testing.T) {
		t.Parallel()
		p := transientOnce()
		b := regSetup(t, p)
		r := req("failed-release")
		b.lossy.FailNext(ledgertest.OpRelease, 2)
		b.process(t, r, dispatch.Retry)
		if got := b.lossy.Calls(ledgertest.OpRelease); got != 3 {
			t.Errorf("Release called %d times, want 3 (two failures, then success)", got)
		}
		check(t, b, p, r, 2)
	})

	t.Run("ReleaseAfterTheInvocationIsCancelled", func(t *testing.T) {
		t.Parallel()
		p := &providertest.Fake{}
		invocation, cancel := context.WithCancel(ctx)
		defer cancel()
		p.SendFunc = func(context.Context, provider.Message) (provider.Receipt, error) {
			if p.Calls() == 1 {
				cancel() // the invocation ends while the provider answers 503
				return provider.Receipt{}, providertest.Error(provider.Transient, "503")
			}
			return provider.Receipt{MessageID: "msg_ok"}, nil
		}
		b := regSetup(t, p)
		r := req("cancelled-release")
		if res := b.sender.Process(invocation, r); res.Disposition != dispatch.Retry {
			t.Fatalf("Process = %s (%s), want retry", res.Disposition, res.Reason)
		}
		check(t, b, p, r, 2)
	})
}

// TestLookupBudget (defect 9): a takeover that may look up and then send
// needs two provider timeouts before the deadline; with less left the
// sender neither asks nor sends (it hands a stale first claim to the
// reconciler), while a first attempt (one call) still goes ahead.
func TestLookupBudget(t *testing.T) {
	t.Parallel()
	looked := 0
	fp := &providertest.Fake{Caps: provider.Capabilities{LookupByReference: true}}
	p := providertest.Looking{Fake: fp, LookupFunc: func(context.Context, provider.Message) (provider.LookupResult, error) {
		looked++
		return provider.LookupResult{Status: provider.LookupNotFound}, nil
	}}
	b := regSetup(t, p) // provider timeout 2s: first attempt 7s, takeover 9s
	stale := req("stale")
	msg, _ := rendertest.Examples(t, stale.TenantID).RenderRequest(t.Context(), stale)
	if _, err := b.mem.Claim(context.Background(), ledger.Entry{Key: stale.Key(), Channel: "sms", Class: "transactional",
		Address: stale.Address(), Body: msg.Body}, time.Minute); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(3 * time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	// No time for a lookup: nothing is asked or sent, but the stale first
	// claim is marked UNCERTAIN for the reconciler (simulation seed 128: a
	// sender whose timeout never fits a lookup and a send left it to the
	// dead-letter queue).
	if res := b.sender.Process(ctx, stale); res.Disposition != dispatch.Uncertain {
		t.Fatalf("stale claim with 8s left: %s (%s), want uncertain", res.Disposition, res.Reason)
	}
	if row := b.row(t, stale.Key()); looked != 0 || fp.Calls() != 0 || row.State != ledger.StateUncertain || !row.Indexed() {
		t.Fatalf("with 8s left: %d lookups, %d sends, row %s indexed %v; want none, and the row UNCERTAIN in the index", looked, fp.Calls(), row.State, row.Indexed())
	}
	if res := b.sender.Process(ctx, req("fresh")); res.Disposition != dispatch.Sent {
		t.Fatalf("first attempt with 8s left: %s (%s), want sent", res.Disposition, res.Reason)
	}
}

// TestFailedMarkFailedIsRetried (simulation seed 3109): the provider
// refused a message for good, or its template cannot render it, and the
// write that records FAILED failed. Only logged, it left the claim PENDING;
// once the lease passed a redelivery took the attempt for one that may
// have sent (UNCERTAIN), and the reconciler abandoned, under the class
// policy, a message that was never sent. Nothing was delivered, so the
// FAILED mark is retried like a Release.
func TestFailedMarkFailedIsRetried(t *testing.T) {
	t.Parallel()
	refuse := func() *providertest.Fake {
		p := &providertest.Fake{}
		p.SendFunc = func(context.Context, provider.Message) (provider.Receipt, error) {
			return provider.Receipt{}, providertest.Error(provider.Permanent, "400")
		}
		return p
	}
	for _, tc := range []struct {
		name         string
		unrenderable bool
		fails        int
	}{
		{"PermanentRefusal", false, 1},
		{"MissingParameter", true, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := refuse()
			b := regSetup(t, p)
			r := req("failed-mark-" + tc.name)
			if tc.unrenderable {
				r.Data = nil // order_shipped needs order_id
			}
			b.lossy.FailNext(ledgertest.OpMark, tc.fails)
			b.process(t, r, dispatch.Failed)
			if got := b.lossy.Calls(ledgertest.OpMark); got != tc.fails+1 {
				t.Errorf("Mark called %d times, want %d (%d failures, then success)", got, tc.fails+1, tc.fails)
			}
			if row := b.row(t, r.Key()); row.State != ledger.StateFailed {
				t.Fatalf("row is %s, want FAILED", row.State)
			}
			if n := b.tally.Get(metrics.Failed); n != 1 {
				t.Errorf("Failed = %d, want 1", n)
			}
		})
	}
}

// TestReleasedUnrenderableRequestIsNotSent (simulation seed 56697): a
// request whose template cannot be rendered had its claim's answer lost,
// so the claim was released; the redelivery took the released row over
// and sent the stored entry, which has no text. It must record FAILED.
func TestReleasedUnrenderableRequestIsNotSent(t *testing.T) {
	t.Parallel()
	p := &providertest.Fake{}
	b := regSetup(t, p)
	r := req("released-unrenderable")
	r.Data = nil // order_shipped needs order_id: it cannot be rendered
	b.lossy.LoseNext(ledgertest.OpClaim, 1)
	b.process(t, r, dispatch.Retry)
	if row := b.row(t, r.Key()); !row.Released {
		t.Fatalf("after the lost claim answer the row is not released")
	}
	b.process(t, r, dispatch.Failed)
	if p.Calls() != 0 {
		t.Errorf("provider called %d times for a request that cannot be rendered", p.Calls())
	}
	if row := b.row(t, r.Key()); row.State != ledger.StateFailed {
		t.Errorf("row is %s, want FAILED", row.State)
	}
}

// hangingClaims is a ledger whose Claim applies, then hangs until the
// caller's context ends and loses the answer: the SDK retrying a lost
// answer until the invocation's deadline. It records when Release came.
type hangingClaims struct {
	ledger.Ledger
	mu       sync.Mutex
	released time.Time
}

func (h *hangingClaims) Claim(ctx context.Context, e ledger.Entry, lease time.Duration) (ledger.Claim, error) {
	c, err := h.Ledger.Claim(context.WithoutCancel(ctx), e, lease)
	if err != nil {
		return c, err
	}
	<-ctx.Done()
	return c, fmt.Errorf("hanging claim: %w", ctx.Err())
}

func (h *hangingClaims) Release(ctx context.Context, c ledger.Claim, reason string, retryAt time.Time) error {
	h.mu.Lock()
	h.released = time.Now()
	h.mu.Unlock()
	return h.Ledger.Release(ctx, c, reason, retryAt)
}

// TestLostClaimAnswerLeavesTimeToRelease (chaos, ses and smtp lanes): a
// Claim whose answer is lost and whose SDK retries run until the
// invocation's deadline leaves no time to release the claim: the function
// is stopped at the deadline, the claim looks like a dead worker's once
// its lease passes, and a message never sent is given up by class policy.
// A claim-taking write must end LostAnswerReserve before the deadline, so
// that the release still comes in time.
func TestLostClaimAnswerLeavesTimeToRelease(t *testing.T) {
	t.Parallel()
	p := &providertest.Fake{}
	h := &hangingClaims{Ledger: memledger.New(memledger.Config{})}
	s, err := sender.New(sender.Config{
		Dispatcher: testsupport.Dispatcher(t, dispatch.Dispatcher{
			Ledger:          h,
			Providers:       map[string]provider.Adapter{"sms": p},
			Renderer:        rendertest.Examples(t, "acme"),
			Logger:          quiet,
			ProviderTimeout: time.Second,
			ClaimTimeout:    time.Minute,
		}),
		DeadLetters: discardDLQ{},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), decide.SendBudget(time.Second)+time.Second)
	defer cancel()
	deadline, _ := ctx.Deadline()
	r := req("hanging-claim")
	if res := s.Process(ctx, r); res.Disposition != dispatch.Retry {
		t.Fatalf("Process = %s (%s), want retry", res.Disposition, res.Reason)
	}
	h.mu.Lock()
	released := h.released
	h.mu.Unlock()
	if released.IsZero() || !released.Before(deadline) {
		t.Fatalf("the claim was released at %s, the invocation's deadline is %s: a real function is stopped before it releases",
			released.Format(time.StampMilli), deadline.Format(time.StampMilli))
	}
	if row, err := h.Get(context.Background(), r.Key()); err != nil || !row.Released || p.Calls() != 0 {
		t.Fatalf("row %+v (%v), %d provider calls; want released, none", row, err, p.Calls())
	}
}
