package reconcile

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/dispatch"
	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/provider"
	"github.com/sendonce/sendonce/provider/providertest"
)

// lanes is an SMS provider that is down (every send refused, and the
// container's Health knows it) and a healthy email provider whose sends
// take delay, behind one reconciler.
type lanes struct {
	b          *bundle
	sms, email *providertest.Fake
	r          *Reconciler
}

func setupLanes(t *testing.T, delay time.Duration, mod func(*Config)) *lanes {
	t.Helper()
	b := setup(t)
	sms := &providertest.Fake{ProviderName: "twilio", SendFunc: func(context.Context, provider.Message) (provider.Receipt, error) {
		return provider.Receipt{}, providertest.Error(provider.Transient, "503")
	}}
	email := &providertest.Fake{ProviderName: "ses", SendFunc: func(ctx context.Context, m provider.Message) (provider.Receipt, error) {
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return provider.Receipt{}, ctx.Err()
		}
		return provider.Receipt{MessageID: "id-" + m.Key}, nil
	}}
	health := &dispatch.Health{Cooldown: 5 * time.Minute, Now: b.clock.Now}
	for range dispatch.DefaultHealthThreshold {
		health.Observe(sms.Name(), providertest.Error(provider.Transient, "503"))
	}
	r := b.reconciler(t, nil, func(c *Config) {
		c.Dispatcher.Providers = map[string]provider.Adapter{"sms": sms, "email": email}
		c.Dispatcher.Health = health
		if mod != nil {
			mod(c)
		}
	})
	return &lanes{b: b, sms: sms, email: email, r: r}
}

// released writes a released row of channel through provider name, due
// now.
func (l *lanes) released(t *testing.T, key, channel, name string) {
	t.Helper()
	ctx := context.Background()
	to := "+15551234567"
	if channel == "email" {
		to = "ana@example.com"
	}
	c, err := l.b.ledger.Claim(ctx, ledger.Entry{Key: key, Tenant: "acme", Channel: channel, Class: "otp", Provider: name, Address: to, Body: "code " + key}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.b.ledger.Release(ctx, c, "transient: 503", time.Time{}); err != nil {
		t.Fatal(err)
	}
}

// TestDeferralIsRaceFree: a unit (as handed out before units had lanes)
// whose first row finds its provider down while a slow row of another
// provider is still being sent, at a concurrency of 2. Work defers the
// down provider's other rows while the slow row's goroutine records its
// action: under the race detector, the deferral's count must not race
// with it (it did: `rep.Actions[ActionDeferred]` was written without the
// lock the row goroutines hold, and could end as "concurrent map
// writes"). The email row is sent, the SMS rows are left untouched.
func TestDeferralIsRaceFree(t *testing.T) {
	t.Parallel()
	l := setupLanes(t, 50*time.Millisecond, func(c *Config) { c.Concurrency = 2 })
	keys := []string{"v1_sms_0", "v1_email_0", "v1_sms_1", "v1_sms_2", "v1_sms_3"}
	for _, k := range keys {
		if k[3] == 's' {
			l.released(t, k, "sms", "twilio")
		} else {
			l.released(t, k, "email", "ses")
		}
	}
	l.b.clock.Advance(time.Second)
	rep, done := l.r.Work(context.Background(), Unit{Keys: keys, FoundAt: l.b.clock.Now()})
	if !done || rep.Actions[ActionProviderDown] < 1 || rep.Actions[ActionResent] != 1 ||
		rep.Actions[ActionProviderDown]+rep.Actions[ActionDeferred] != 4 {
		t.Fatalf("Work: done %t, %+v; want the email row resent, the SMS rows provider_down or deferred", done, rep)
	}
	if l.sms.Calls() != 0 || l.email.Calls() != 1 {
		t.Errorf("calls: sms %d, email %d; want 0 and 1", l.sms.Calls(), l.email.Calls())
	}
	if row := l.b.state(t, "v1_email_0"); row.State != ledger.StateSent {
		t.Errorf("email row %s, want SENT", row.State)
	}
}

// TestUnitNeverStopsOnAnotherProvidersRow: in a unit of mixed lanes, at a
// concurrency of 1, the rows after a down SMS provider's row are deferred
// only when they are SMS rows: the email rows behind it are sent.
// (Before, Work stopped the whole unit at the first down row.)
func TestUnitNeverStopsOnAnotherProvidersRow(t *testing.T) {
	t.Parallel()
	l := setupLanes(t, 0, func(c *Config) { c.Concurrency = 1 })
	keys := []string{"v1_sms_0", "v1_sms_1", "v1_email_0", "v1_sms_2", "v1_email_1"}
	for _, k := range keys {
		if k[3] == 's' {
			l.released(t, k, "sms", "twilio")
		} else {
			l.released(t, k, "email", "ses")
		}
	}
	l.b.clock.Advance(time.Second)
	rep, done := l.r.Work(context.Background(), Unit{Keys: keys, FoundAt: l.b.clock.Now()})
	if !done || rep.Actions[ActionProviderDown] != 1 || rep.Actions[ActionDeferred] != 2 || rep.Actions[ActionResent] != 2 {
		t.Fatalf("Work: done %t, %+v; want 1 provider_down, 2 deferred (SMS), 2 resent (email)", done, rep)
	}
	for _, k := range []string{"v1_email_0", "v1_email_1"} {
		if row := l.b.state(t, k); row.State != ledger.StateSent {
			t.Errorf("email row %s: %s, want SENT", k, row.State)
		}
	}
}

// TestHealthyLaneBehindAnOutageIsHandedOut: an SMS outage leaves three
// times MaxRows released SMS rows due before one email row. The first
// Find hands the email row out (the SMS rows do not fill MaxRows: each
// lane gets its fair share), in a unit of its own lane, and the first
// Work on it sends it; the SMS rows are left untouched. (Before, Find
// handed out the MaxRows oldest SMS rows and nothing else: the email row
// waited for the end of the outage.)
func TestHealthyLaneBehindAnOutageIsHandedOut(t *testing.T) {
	t.Parallel()
	const maxRows = 10
	l := setupLanes(t, 0, func(c *Config) { c.MaxRows = maxRows; c.UnitSize = 5; c.PageSize = 7 })
	var smsKeys []string
	for i := range 3 * maxRows {
		k := fmt.Sprintf("v1_sms_%02d", i)
		l.released(t, k, "sms", "twilio")
		smsKeys = append(smsKeys, k)
		l.b.clock.Advance(time.Millisecond)
	}
	l.b.clock.Advance(time.Second)
	l.released(t, "v1_email_late", "email", "ses")
	l.b.clock.Advance(time.Second)

	q := &units{}
	fr, err := l.r.Find(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	handed := map[string]string{}
	for _, u := range q.q {
		for _, k := range u.Keys {
			handed[k] = u.Lane
		}
	}
	if lane, ok := handed["v1_email_late"]; !ok || lane != "email/ses" {
		t.Fatalf("first Find: %+v, units %+v; want the email row handed out in lane email/ses", fr, q.q)
	}
	if fr.Found != maxRows || len(handed) != maxRows {
		t.Errorf("first Find handed out %d rows (%d keys), want MaxRows %d", fr.Found, len(handed), maxRows)
	}
	for _, u := range q.q {
		if u.Lane == "sms/twilio" && slices.Contains(u.Keys, "v1_email_late") {
			t.Errorf("unit of lane %s holds the email row", u.Lane)
		}
	}
	for _, u := range q.q {
		l.r.Work(context.Background(), u)
	}
	if row := l.b.state(t, "v1_email_late"); row.State != ledger.StateSent || l.email.Calls() != 1 {
		t.Errorf("email row %s after %d email sends, want SENT after 1", row.State, l.email.Calls())
	}
	if l.sms.Calls() != 0 {
		t.Errorf("%d SMS sends while the provider is known down, want 0", l.sms.Calls())
	}
	for _, k := range smsKeys {
		if row := l.b.state(t, k); row.State != ledger.StatePending || !row.Released || row.Attempts != 1 {
			t.Errorf("SMS row %s: %s, released %t, attempts %d; want left released, untouched", k, row.State, row.Released, row.Attempts)
		}
	}
}

// TestFairShares: MaxRows divided max-min fairly between lanes.
func TestFairShares(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		demands []int
		total   int
		want    []int
	}{
		{[]int{30, 1}, 10, []int{9, 1}},
		{[]int{30, 30}, 10, []int{5, 5}},
		{[]int{3, 30, 30}, 10, []int{3, 4, 3}},
		{[]int{5}, 10, []int{5}},
		{[]int{0, 7}, 10, []int{0, 7}},
		{nil, 10, []int{}},
	} {
		if got := fairShares(c.demands, c.total); !slices.Equal(got, c.want) {
			t.Errorf("fairShares(%v, %d) = %v, want %v", c.demands, c.total, got, c.want)
		}
	}
}

// TestFindHandsOutBeforeItsDeadline: a Find whose invocation is about to
// end stops reading FindReserve before its deadline and still hands out
// what it read.
func TestFindHandsOutBeforeItsDeadline(t *testing.T) {
	t.Parallel()
	l := setupLanes(t, 0, nil)
	l.released(t, "v1_email_0", "email", "ses")
	l.b.clock.Advance(time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), FindReserve+5*time.Second)
	defer cancel()
	q := &units{}
	if fr, err := l.r.Find(ctx, q); err != nil || fr.Found != 1 || len(q.q) != 1 {
		t.Fatalf("Find: %+v, %v, units %+v; want the row handed out", fr, err, q.q)
	}
	ctx, cancel = context.WithTimeout(context.Background(), FindReserve/2)
	defer cancel()
	q = &units{}
	if fr, err := l.r.Find(ctx, q); err != nil || fr.Found != 0 || !fr.Truncated {
		t.Fatalf("Find with less than FindReserve left: %+v, %v; want nothing read, truncated", fr, err)
	}
}

// TestHealthyLaneBehindALargerBacklogIsHandedOut: the SMS outage's rows
// are more than Find reads (ScanFactor × MaxRows: here 8 times MaxRows),
// and stay due while the provider is down; an email row became due a
// minute ago, behind all of them. Find's first read stops in the SMS
// backlog; its second reads the rows due in the last RecentDue, and
// hands the email row out. Before, it was left until the SMS backlog
// shrank below the scan (in make sim-outage's one-channel run, email
// rows waited for SQS's redelivery: 3 minutes at the 99th percentile).
func TestHealthyLaneBehindALargerBacklogIsHandedOut(t *testing.T) {
	t.Parallel()
	const maxRows = 5
	l := setupLanes(t, 0, func(c *Config) { c.MaxRows = maxRows; c.PageSize = 7 })
	for i := range 8 * maxRows {
		l.released(t, fmt.Sprintf("v1_sms_%02d", i), "sms", "twilio")
		l.b.clock.Advance(time.Millisecond)
	}
	l.b.clock.Advance(10 * time.Minute)
	l.released(t, "v1_email_late", "email", "ses")
	l.b.clock.Advance(time.Minute)
	q := &units{}
	fr, err := l.r.Find(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range q.q {
		if slices.Contains(u.Keys, "v1_email_late") {
			if u.Lane != "email/ses" {
				t.Errorf("the email row is in a unit of lane %s", u.Lane)
			}
			return
		}
	}
	t.Errorf("Find: %+v, units %+v; want the email row handed out", fr, q.q)
}
