package reconcile

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/decide"
	"github.com/sendonce/sendonce/internal/dispatch"
	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/ledger/ledgertest"
	"github.com/sendonce/sendonce/internal/ledger/memledger"
	"github.com/sendonce/sendonce/internal/metrics"
	"github.com/sendonce/sendonce/internal/testsupport"
	"github.com/sendonce/sendonce/provider"
	"github.com/sendonce/sendonce/provider/providertest"
)

type bundle struct {
	ledger  *memledger.Ledger
	clock   *testsupport.Clock
	metrics *metrics.Tally
}

func setup(t *testing.T) *bundle {
	t.Helper()
	clock := testsupport.NewClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	return &bundle{ledger: memledger.New(memledger.Config{Now: clock.Now}), clock: clock, metrics: metrics.NewTally()}
}

func (b *bundle) reconciler(t *testing.T, p provider.Adapter, mod func(*Config)) *Reconciler {
	t.Helper()
	cfg := Config{
		Dispatcher: testsupport.Dispatcher(t, dispatch.Dispatcher{
			Ledger:          b.ledger,
			Providers:       map[string]provider.Adapter{"sms": p},
			Metrics:         b.metrics,
			ProviderTimeout: 5 * time.Second,
			ClaimTimeout:    60 * time.Second,
			Settle:          2 * time.Minute,
			Now:             b.clock.Now,
		}),
		MaxAttempts: 3,
	}
	if mod != nil {
		mod(&cfg)
	}
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// uncertain leaves a row UNCERTAIN, as a sender whose provider call timed
// out after the request was written does.
func (b *bundle) uncertain(t *testing.T, key, class string) {
	t.Helper()
	ctx := context.Background()
	c, err := b.ledger.Claim(ctx, ledger.Entry{Key: key, Tenant: "acme", Channel: "sms", Class: class, Provider: "fake",
		Address: "+15551234567", Body: "hello " + key}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.ledger.Mark(ctx, c, ledger.Outcome{State: ledger.StateUncertain, Reason: "timeout"}); err != nil {
		t.Fatal(err)
	}
}

func (b *bundle) state(t *testing.T, key string) ledger.Record {
	t.Helper()
	return ledgertest.Row(t, b.ledger, key)
}

func lookupReturning(res provider.LookupResult) providertest.Looking {
	return providertest.Looking{
		Fake:       &providertest.Fake{Caps: provider.Capabilities{LookupByReference: true}},
		LookupFunc: func(context.Context, provider.Message) (provider.LookupResult, error) { return res, nil },
	}
}

func TestLookup(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		result     provider.LookupResult
		wait       time.Duration
		wantState  ledger.State
		wantSends  int
		wantMetric string
	}{
		{"AcceptedBecomesSent", provider.LookupResult{Status: provider.LookupAccepted, MessageID: "msg_9"}, 0, ledger.StateSent, 0, metrics.ReconciledSent},
		{"RejectedBecomesFailed", provider.LookupResult{Status: provider.LookupRejected, Reason: "undeliverable"}, 0, ledger.StateFailed, 0, metrics.ReconciledFailed},
		{"NothingAfterSettleResends", provider.LookupResult{Status: provider.LookupNotFound}, 3 * time.Minute, ledger.StateSent, 1, metrics.Resent},
		{"NothingBeforeSettleWaits", provider.LookupResult{Status: provider.LookupNotFound}, 30 * time.Second, ledger.StateUncertain, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			p := lookupReturning(tt.result)
			b.uncertain(t, "v1_a", "marketing")
			b.clock.Advance(tt.wait)
			rep, err := b.reconciler(t, p, nil).Run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if rep.Examined != 1 {
				t.Errorf("examined %d rows, want 1", rep.Examined)
			}
			r := b.state(t, "v1_a")
			if r.State != tt.wantState {
				t.Errorf("state = %s, want %s", r.State, tt.wantState)
			}
			if tt.result.Status == provider.LookupAccepted && r.ProviderMessageID != "msg_9" {
				t.Errorf("provider id = %q, want msg_9", r.ProviderMessageID)
			}
			if got := p.Calls(); got != tt.wantSends {
				t.Errorf("sends = %d, want %d", got, tt.wantSends)
			}
			if tt.wantMetric != "" && b.metrics.Get(tt.wantMetric) != 1 {
				t.Errorf("%s = %d, want 1", tt.wantMetric, b.metrics.Get(tt.wantMetric))
			}
		})
	}
}

func TestClassPolicyWithoutLookup(t *testing.T) {
	t.Parallel()
	tests := []struct {
		class      string
		idempotent bool
		wantState  ledger.State
		wantSends  int
	}{
		{"otp", false, ledger.StateSent, 1},
		{"transactional", false, ledger.StateAbandoned, 0},
		{"transactional", true, ledger.StateSent, 1},
		{"marketing", false, ledger.StateAbandoned, 0},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/idempotent=%v", tt.class, tt.idempotent), func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			p := &providertest.Fake{Caps: provider.Capabilities{IdempotentSends: tt.idempotent}}
			b.uncertain(t, "v1_a", tt.class)
			if _, err := b.reconciler(t, p, nil).Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			if r := b.state(t, "v1_a"); r.State != tt.wantState {
				t.Errorf("state = %s, want %s", r.State, tt.wantState)
			}
			if p.Calls() != tt.wantSends {
				t.Errorf("sends = %d, want %d", p.Calls(), tt.wantSends)
			}
			for _, m := range p.Sent() {
				if m.Key != "v1_a" || m.Body != "hello v1_a" || m.To != "+15551234567" {
					t.Errorf("resent %+v, want the stored key, body and address", m)
				}
			}
		})
	}
}

func TestPolicyOverride(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := &providertest.Fake{}
	b.uncertain(t, "v1_a", "marketing")
	r := b.reconciler(t, p, func(c *Config) { c.Policies = map[string]Policy{"marketing": Resend} })
	if _, err := r.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := b.state(t, "v1_a").State; got != ledger.StateSent || p.Calls() != 1 {
		t.Errorf("state %s after %d sends, want SENT after 1", got, p.Calls())
	}
	if _, err := New(Config{Dispatcher: testsupport.Dispatcher(t, dispatch.Dispatcher{Ledger: b.ledger, ProviderTimeout: time.Second, ClaimTimeout: time.Minute}), Policies: map[string]Policy{"otp": "maybe"}}); err == nil {
		t.Error("New accepted an unknown policy")
	}
}

func TestAttemptLimitAbandons(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := &providertest.Fake{SendFunc: func(context.Context, provider.Message) (provider.Receipt, error) {
		return provider.Receipt{}, providertest.Error(provider.Ambiguous, "timeout")
	}}
	b.uncertain(t, "v1_a", "otp")
	r := b.reconciler(t, p, nil)
	for range 5 {
		b.clock.Advance(time.Minute)
		if _, err := r.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	row := b.state(t, "v1_a")
	if row.State != ledger.StateAbandoned {
		t.Fatalf("state = %s, want ABANDONED", row.State)
	}
	// attempts 1 (sender) + 2 resends reach the limit of 3.
	if p.Calls() != 2 || row.Attempts != 4 {
		t.Errorf("sends = %d, attempts = %d; want 2 resends and the abandoning claim as attempt 4", p.Calls(), row.Attempts)
	}
	if b.metrics.Get(metrics.Abandoned) != 1 {
		t.Errorf("Abandoned = %d, want 1", b.metrics.Get(metrics.Abandoned))
	}
}

func TestStaleAndReleasedPending(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	p := &providertest.Fake{}
	entry := func(key string) ledger.Entry {
		return ledger.Entry{Key: key, Tenant: "acme", Channel: "sms", Class: "otp", Provider: "fake", Address: "+15551234567", Body: "b"}
	}
	// live: a healthy worker holds it.
	if _, err := b.ledger.Claim(ctx, entry("v1_live"), 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	// released: nothing was sent.
	c, err := b.ledger.Claim(ctx, entry("v1_released"), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.ledger.Release(ctx, c, "transient: 503", time.Time{}); err != nil {
		t.Fatal(err)
	}
	// stale: taken over by a redelivery whose worker died mid-send too;
	// otp policy resends.
	c, err = b.ledger.Claim(ctx, entry("v1_stale"), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// first: a first claim whose worker died: not indexed, left to the
	// message's SQS redelivery (ledger package doc, Stranding).
	if _, err := b.ledger.Claim(ctx, entry("v1_first"), time.Minute); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(2 * time.Minute)
	cur, err := b.ledger.Get(ctx, "v1_stale")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.ledger.TakeOver(ctx, cur, "", time.Minute); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(2 * time.Minute)
	rep, err := b.reconciler(t, p, nil).Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Examined != 2 || rep.Actions[ActionResent] != 2 {
		t.Errorf("report = %+v, want 2 examined, 2 resent", rep)
	}
	if got := b.state(t, "v1_live").State; got != ledger.StatePending {
		t.Errorf("live claim state = %s, want untouched PENDING", got)
	}
	if got := b.state(t, "v1_first"); got.State != ledger.StatePending || got.Attempts != 1 {
		t.Errorf("stale first claim = %s attempt %d, want untouched PENDING attempt 1 (the redelivery's)", got.State, got.Attempts)
	}
	for _, k := range []string{"v1_released", "v1_stale"} {
		if got := b.state(t, k).State; got != ledger.StateSent {
			t.Errorf("%s state = %s, want SENT", k, got)
		}
	}
}

func TestOldestFirstAcrossShards(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var keys []string
	for i := range 40 {
		k := fmt.Sprintf("v1_%02d", i)
		keys = append(keys, k)
		b.uncertain(t, k, "otp")
		b.clock.Advance(time.Second)
	}
	p := &providertest.Fake{}
	r := b.reconciler(t, p, func(c *Config) { c.Concurrency = 1; c.PageSize = 3 })
	rep, err := r.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if rep.Examined != 40 {
		t.Fatalf("examined %d, want 40", rep.Examined)
	}
	for i, m := range p.Sent() {
		if m.Key != keys[i] {
			t.Fatalf("send %d was %s, want %s (oldest first)", i, m.Key, keys[i])
		}
	}
	if rep.OldestDue != 40*time.Second {
		t.Errorf("OldestDue = %s, want 40s", rep.OldestDue)
	}
}

// TestTruncates: a Run stops at MaxRows, and before a row it could not
// finish by the deadline, and says it stopped early.
func TestTruncates(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name         string
		rows         int
		maxRows      int           // 0: the default
		deadline     time.Duration // 0: none
		wantExamined int
	}{
		{"MaxRows", 10, 4, 0, 4},
		// 5s left is less than two provider timeouts.
		{"Deadline", 1, 0, 5 * time.Second, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			for i := range tc.rows {
				b.uncertain(t, fmt.Sprintf("v1_%02d", i), "otp")
			}
			ctx := context.Background()
			if tc.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.deadline)
				defer cancel()
			}
			rep, err := b.reconciler(t, &providertest.Fake{}, func(c *Config) { c.MaxRows = tc.maxRows }).Run(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Examined != tc.wantExamined || !rep.Truncated {
				t.Errorf("report = %+v, want %d examined and truncated", rep, tc.wantExamined)
			}
		})
	}
}

func TestParsePolicies(t *testing.T) {
	t.Parallel()
	got, err := ParsePolicies(" marketing=resend, transactional=abandon ,")
	if err != nil || len(got) != 2 || got["marketing"] != Resend || got["transactional"] != Abandon {
		t.Fatalf("ParsePolicies = %v, %v", got, err)
	}
	for _, bad := range []string{"marketing", "=resend", "otp=sometimes"} {
		if _, err := ParsePolicies(bad); err == nil {
			t.Errorf("ParsePolicies(%q) accepted", bad)
		}
	}
}

// TestExpiredRowsAtTheHeadOfAShard (defect 4): the attention query skips
// expired rows after its limit, so 25+ expired rows at the head of a shard
// come back as an empty page with a cursor. The reconciler must keep
// paging: the live row behind them is reconciled.
func TestExpiredRowsAtTheHeadOfAShard(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	const shard = 5
	var expired []string
	for i := 0; len(expired) < 30; i++ {
		k := fmt.Sprintf("v1_expired_%d", i)
		if ledger.Shard(k) != shard {
			continue
		}
		if _, err := b.ledger.Claim(ctx, ledger.Entry{Key: k, Channel: "sms", Class: "otp", Address: "+15551234567", Body: "old"}, time.Minute); err != nil {
			t.Fatal(err)
		}
		expired = append(expired, k)
	}
	old := b.state(t, expired[0])
	b.clock.Set(old.ExpiresAt.Add(-time.Hour))
	live := ""
	for i := 0; live == ""; i++ {
		if k := fmt.Sprintf("v1_live_%d", i); ledger.Shard(k) == shard {
			live = k
		}
	}
	b.uncertain(t, live, "otp")
	b.clock.Set(old.ExpiresAt.Add(2 * time.Second))
	p := &providertest.Fake{}
	rep, err := b.reconciler(t, p, func(c *Config) { c.PageSize = 25; c.MaxAge = 10000 * time.Hour }).Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Examined != 1 || rep.Actions[ActionResent] != 1 {
		t.Fatalf("report %+v, want the live row behind %d expired ones examined and resent", rep, len(expired))
	}
	if got := b.state(t, live).State; got != ledger.StateSent {
		t.Errorf("live row state = %s, want SENT", got)
	}
}

// TestReleasedRowsBackOff (defect 2): the reconciler's retries of a
// released row back off (decide.RetryAfter of the attempt), while the row
// stays takeable at once for a sender's redelivery. The refusals here are
// the row's own: the container does not know the provider down (its
// Health threshold is out of reach), as when the provider answers other
// messages; a provider refusing everything is
// TestProviderDownDefersTheUnit.
func TestReleasedRowsBackOff(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	p := &providertest.Fake{SendFunc: func(context.Context, provider.Message) (provider.Receipt, error) {
		return provider.Receipt{}, providertest.Error(provider.Transient, "429")
	}}
	c, err := b.ledger.Claim(ctx, ledger.Entry{Key: "v1_a", Channel: "sms", Class: "marketing", Address: "+15551234567", Body: "b"}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.ledger.Release(ctx, c, "transient: 429", time.Time{}); err != nil {
		t.Fatal(err)
	}
	r := b.reconciler(t, p, func(c *Config) { c.Dispatcher.Health = &dispatch.Health{Threshold: 1000, Now: b.clock.Now} })
	// step: how long after the previous run, and whether the row is due.
	for i, step := range []struct {
		after time.Duration
		due   bool
	}{
		{0, true},                 // released with no backoff: due now; attempt 2 released, due in 2m
		{time.Minute, false},      // backing off
		{time.Minute, true},       // attempt 3 released, due in 4m
		{3 * time.Minute, false},  // backing off
		{time.Minute, true},       // attempt 4 released, due in 8m
		{7 * time.Minute, false},  // backing off
		{time.Minute, true},       // attempt 5 released, due in 16m
		{15 * time.Minute, false}, // backing off
		{time.Minute, true},       // attempt 6: still never abandoned
	} {
		b.clock.Advance(step.after)
		rep, err := r.Run(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got := rep.Examined == 1; got != step.due {
			t.Fatalf("run %d (+%s): examined %d, want due=%v", i+1, step.after, rep.Examined, step.due)
		}
	}
	row := b.state(t, "v1_a")
	if row.State != ledger.StatePending || !row.Released || row.Attempts != 6 || row.Releases != 6 || p.Calls() != 5 {
		t.Errorf("row %s released=%v attempts %d releases %d after %d sends; want PENDING, released, 6, 6 after 5",
			row.State, row.Released, row.Attempts, row.Releases, p.Calls())
	}
	if !row.Stale(b.clock.Now()) {
		t.Error("a backing-off released row is not takeable at once by a sender's redelivery")
	}
}

// TestUnconfiguredChannelIsPostponedNotAbandoned (issue 13): a released
// row whose channel has no provider is a configuration error: the
// reconciler postpones it with backoff (ConfigErrors), never abandons it,
// and resends it once the channel is configured.
func TestUnconfiguredChannelIsPostponedNotAbandoned(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	c, err := b.ledger.Claim(ctx, ledger.Entry{Key: "v1_mail", Channel: "email", Class: "transactional", Address: "ana@example.com", Body: "b"}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.ledger.Release(ctx, c, "config: no provider is configured for channel email", time.Time{}); err != nil {
		t.Fatal(err)
	}
	unconfigured := b.reconciler(t, &providertest.Fake{}, nil) // serves sms only
	rep, err := unconfigured.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Actions[ActionPostponed] != 1 || b.metrics.Get(metrics.ConfigErrors) != 1 {
		t.Fatalf("report %+v, ConfigErrors %d; want postponed and counted", rep, b.metrics.Get(metrics.ConfigErrors))
	}
	if row := b.state(t, "v1_mail"); row.State != ledger.StatePending || !row.Released {
		t.Fatalf("row %s released=%v, want PENDING released", row.State, row.Released)
	}
	if rep, _ := unconfigured.Run(ctx); rep.Examined != 0 {
		t.Errorf("a postponed row was examined again at once: %+v", rep)
	}
	email := &providertest.Fake{}
	configured := b.reconciler(t, email, func(c *Config) { c.Dispatcher.Providers = map[string]provider.Adapter{"email": email} })
	b.clock.Advance(decide.RetryCap)
	if rep, err := configured.Run(ctx); err != nil || rep.Actions[ActionResent] != 1 || email.Calls() != 1 {
		t.Fatalf("after the fix: %+v, %v, %d sends; want resent once", rep, err, email.Calls())
	}
}

// TestLostTakeoverOfAnUncertainRowIsUncertainAgain (chaos, sns and smtp
// lanes): the reconciler's takeover of an UNCERTAIN row applies but its
// answer is lost. Releasing the claim would say that nothing was sent,
// which the earlier attempt cannot promise; leaving it left the row
// PENDING, out of reach until the new lease passed. The reconciler marks
// the row UNCERTAIN again under the claim it may hold (fenced), so the
// next run resolves it at once, with the earlier attempt still counted as
// one that may have sent.
func TestLostTakeoverOfAnUncertainRowIsUncertainAgain(t *testing.T) {
	t.Parallel()
	b := setup(t)
	lossy := ledgertest.NewLossy(b.ledger)
	p := &providertest.Fake{}
	b.uncertain(t, "v1_lost_takeover", "otp")
	r := b.reconciler(t, p, func(c *Config) { c.Dispatcher.Ledger = lossy })
	lossy.LoseNext(ledgertest.OpTakeOver, 1)
	b.clock.Advance(time.Second)
	if _, err := r.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if p.Calls() != 0 {
		t.Fatalf("provider called %d times after a lost takeover answer, want 0", p.Calls())
	}
	row := b.state(t, "v1_lost_takeover")
	if row.State != ledger.StateUncertain || row.Released {
		t.Fatalf("after the lost takeover answer the row is %s released=%v, want UNCERTAIN, not released (the earlier attempt may have sent)", row.State, row.Released)
	}
	b.clock.Advance(time.Second)
	if _, err := r.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if row := b.state(t, "v1_lost_takeover"); row.State != ledger.StateSent || p.Calls() != 1 {
		t.Fatalf("the next run: row %s, %d sends; want SENT by the otp policy's resend, one send", row.State, p.Calls())
	}
}

// downWhile is a provider that refuses every send (transient, 503: it
// is down) while *down, and accepts them after.
func downWhile(down *bool) *providertest.Fake {
	return &providertest.Fake{SendFunc: func(context.Context, provider.Message) (provider.Receipt, error) {
		if *down {
			return provider.Receipt{}, providertest.Error(provider.Transient, "503")
		}
		return provider.Receipt{MessageID: "m"}, nil
	}}
}

// units is a Queue of units the test takes out by hand.
type units struct{ q []Unit }

func (u *units) Waiting(context.Context) (int, error) { return len(u.q), nil }
func (u *units) Put(_ context.Context, us []Unit) (int, error) {
	u.q = append(u.q, us...)
	return len(us), nil
}

// TestProviderDownDefersTheUnit: once a row of a unit finds the provider
// known down (dispatch.Health), Work starts no further row of it: the
// rest are counted deferred, every row is left as it was (no takeover,
// no provider call), still due in the attention index, and the next Find
// hands them all out again. After the cool-down the unit's rows are sent,
// each once.
func TestProviderDownDefersTheUnit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	down := true
	p := downWhile(&down)
	health := &dispatch.Health{Cooldown: 5 * time.Minute, Now: b.clock.Now}
	// One row at a time: with more, the rows already started when the
	// first finds the provider down are examined too.
	r := b.reconciler(t, p, func(c *Config) { c.Dispatcher.Health = health; c.Concurrency = 1 })
	var keys []string
	before := map[string]ledger.Record{}
	for i := range 5 {
		key := fmt.Sprintf("v1_down_%d", i)
		c, err := b.ledger.Claim(ctx, ledger.Entry{Key: key, Channel: "sms", Class: "marketing", Address: "+15551234567", Body: "b"}, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.ledger.Release(ctx, c, "transient: 503", time.Time{}); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, key)
		before[key] = b.state(t, key)
	}
	// The container's sends were refused in a row: the provider is known
	// down.
	for range dispatch.DefaultHealthThreshold {
		health.Observe(p.Name(), providertest.Error(provider.Transient, "503"))
	}
	b.clock.Advance(time.Second)
	rep, done := r.Work(ctx, Unit{Keys: keys, FoundAt: b.clock.Now()})
	if !done || rep.Examined != 1 || rep.Actions[ActionProviderDown] != 1 || rep.Actions[ActionDeferred] != len(keys)-1 {
		t.Fatalf("Work on a unit while the provider is down: done %t, %+v; want 1 examined (provider_down), %d deferred", done, rep, len(keys)-1)
	}
	if p.Calls() != 0 {
		t.Errorf("%d provider calls while it is known down, want 0", p.Calls())
	}
	for _, key := range keys {
		row := b.state(t, key)
		if row.ClaimID != before[key].ClaimID || row.Attempts != before[key].Attempts || !row.Indexed() || ledger.Due(row).After(b.clock.Now()) {
			t.Errorf("row %s: claim %s attempts %d due %s; want it left as it was (claim %s, attempts %d), due in the attention index",
				key, row.ClaimID, row.Attempts, ledger.Due(row), before[key].ClaimID, before[key].Attempts)
		}
	}
	q := &units{}
	if fr, err := r.Find(ctx, q); err != nil || fr.Found != len(keys) {
		t.Fatalf("the next Find: %+v, %v; want the %d rows handed out again", fr, err, len(keys))
	}
	// Recovery: after the cool-down the unit's rows are sent, each once.
	down = false
	b.clock.Advance(5 * time.Minute)
	for _, u := range q.q {
		if rep, done := r.Work(ctx, u); !done || rep.Actions[ActionResent] != len(u.Keys) {
			t.Fatalf("Work after recovery: done %t, %+v; want every row resent", done, rep)
		}
	}
	sends := map[string]int{}
	for _, m := range p.Sent() {
		sends[m.Key]++
	}
	for _, key := range keys {
		if row := b.state(t, key); row.State != ledger.StateSent || sends[key] != 1 {
			t.Errorf("row %s: %s after %d sends, want SENT after 1", key, row.State, sends[key])
		}
	}
}
