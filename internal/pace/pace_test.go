package pace_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/pace"
	"github.com/sendonce/sendonce/internal/testenv"
	"github.com/sendonce/sendonce/internal/testsupport"
	"github.com/sendonce/sendonce/provider"
	"github.com/sendonce/sendonce/provider/providertest"
)

func newLimiter(t *testing.T, store pace.Store, clock *testsupport.Clock, limit int) *pace.Limiter {
	t.Helper()
	l, err := pace.New(store, map[string]int{"fake": limit}, pace.Options{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// stores are the Stores the tests of several containers run on: the
// memory store and DynamoStore on DynamoDB Local.
var stores = []struct {
	name  string
	store func(t *testing.T) pace.Store
}{
	{"Memory", func(*testing.T) pace.Store { return &pace.MemStore{} }},
	{"DynamoDBLocal", func(t *testing.T) pace.Store {
		db := testenv.DynamoDB(t)
		return &pace.DynamoStore{DB: db, Table: testenv.NewTable(t, db)}
	}},
}

// sendsIn counts the sends containers of limiters manage in the clock's
// current second, each trying tries times.
func sendsIn(ctx context.Context, ls []*pace.Limiter, tries int) int {
	var n atomic.Int64
	var wg sync.WaitGroup
	for _, l := range ls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range tries {
				if w, err := l.Acquire(ctx, "fake"); err == nil && w == 0 {
					n.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return int(n.Load())
}

func TestLimitHoldsAcrossContainers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// Real time: a counter's TTL is its second + 1 minute, and DynamoDB
	// Local deletes items whose TTL has passed (a counter of a fixed past
	// date vanished under load and the next take started from zero).
	for _, tc := range stores {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// A clock per subtest: with one shared clock the other,
			// parallel subtest advanced it in the middle of this one's
			// second, which then counted the sends of two seconds (160
			// of 150 under make test).
			clock := testsupport.NewClock(time.Now().Truncate(time.Second))
			store := tc.store(t)
			var ls []*pace.Limiter
			for range 8 {
				ls = append(ls, newLimiter(t, store, clock, 150))
			}
			for sec := range 3 {
				if n := sendsIn(ctx, ls, 100); n != 150 {
					t.Errorf("second %d: %d sends across 8 containers, want the limit, 150", sec, n)
				}
				clock.Advance(time.Second)
			}
		})
	}
}

func TestUnpacedProviderIsNotWrapped(t *testing.T) {
	t.Parallel()
	l, err := pace.New(&pace.MemStore{}, map[string]int{"twilio": 10}, pace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f := &providertest.Fake{}
	if pace.Wrap(f, l, 0) != provider.Adapter(f) {
		t.Error("a provider without a rate was wrapped")
	}
	lk := providertest.Looking{Fake: &providertest.Fake{ProviderName: "twilio"}}
	if _, ok := pace.Wrap(lk, l, 0).(provider.Looker); !ok {
		t.Error("wrapping lost the provider's Lookup")
	}
}

func TestThrottlingSlowsAndRecoveryRamps(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := testsupport.NewClock(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	l := newLimiter(t, &pace.MemStore{}, clock, 100)
	down := true
	f := &providertest.Fake{SendFunc: func(context.Context, provider.Message) (provider.Receipt, error) {
		if down {
			return provider.Receipt{}, providertest.Error(provider.Transient, "503")
		}
		return provider.Receipt{MessageID: "m"}, nil
	}}
	a := pace.Wrap(f, l, 0)
	send := func(n int) (sent, paced int) {
		for range n {
			_, err := a.Send(ctx, provider.Message{Key: "k"})
			var pe *provider.Error
			if errors.As(err, &pe) && pe.Code == pace.PacedCode {
				paced++
			} else {
				sent++
			}
		}
		return
	}
	// The outage: failures outnumber successes, the route drops to 5 %.
	send(10)
	clock.Advance(time.Second)
	if sent, _ := send(100); sent != 5 {
		t.Errorf("during the outage %d calls reached the provider in a second, want 5 (the floor)", sent)
	}
	// Recovery: a ramp, not the whole backlog.
	down = false
	var perSecond []int
	for range 25 {
		clock.Advance(time.Second)
		sent, _ := send(200)
		perSecond = append(perSecond, sent)
	}
	// Slow start: the factor doubles each second with a success, from
	// the floor to the limit in five seconds (before, 1/20 a second:
	// 10, 15, 20, ... for 20 s).
	if want := []int{10, 20, 40, 80, 100, 100}; !slices.Equal(perSecond[:len(want)], want) {
		t.Errorf("sends per second after recovery %v: want the slow start %v", perSecond, want)
	}
	// A 429 halves the rate.
	throttled := true
	f.SendFunc = func(context.Context, provider.Message) (provider.Receipt, error) {
		if throttled {
			return provider.Receipt{}, providertest.Error(provider.Transient, "429")
		}
		return provider.Receipt{MessageID: "m"}, nil
	}
	clock.Advance(time.Second)
	send(1)
	if got := l.Factor("fake"); got != 0.5 {
		t.Errorf("factor after a 429 = %v, want 0.5", got)
	}
	// After a throttling answer the rate rises by Ramp (1/20) a second,
	// not doubled back into the overload.
	throttled = false
	perSecond = perSecond[:0]
	for range 3 {
		clock.Advance(time.Second)
		sent, _ := send(200)
		perSecond = append(perSecond, sent)
	}
	if want := []int{55, 60, 65}; !slices.Equal(perSecond, want) {
		t.Errorf("sends per second after a 429 %v, want %v (+5 a second)", perSecond, want)
	}
}

type retryAfter struct{ d time.Duration }

func (r retryAfter) Error() string             { return "429 retry after" }
func (r retryAfter) RetryAfter() time.Duration { return r.d }

func TestRetryAfterPauses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := testsupport.NewClock(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	l := newLimiter(t, &pace.MemStore{}, clock, 100)
	l.Observe("fake", &provider.Error{Kind: provider.Transient, Code: "429", Err: retryAfter{5 * time.Second}})
	if w, err := l.Acquire(ctx, "fake"); err != nil || w != 5*time.Second {
		t.Fatalf("acquire during Retry-After = %v, %v; want a 5 s wait", w, err)
	}
	clock.Advance(5 * time.Second)
	if w, err := l.Acquire(ctx, "fake"); err != nil || w != 0 {
		t.Fatalf("acquire after Retry-After = %v, %v; want a token", w, err)
	}
}

func TestParseRates(t *testing.T) {
	t.Parallel()
	got, err := pace.ParseRates(" twilio=100, http=1500 ")
	if err != nil || got["twilio"] != 100 || got["http"] != 1500 || len(got) != 2 {
		t.Errorf("ParseRates = %v, %v", got, err)
	}
	for _, bad := range []string{"twilio", "twilio=0", "=5", "twilio=-1", "twilio=x"} {
		if _, err := pace.ParseRates(bad); err == nil {
			t.Errorf("ParseRates(%q) = nil error", bad)
		}
	}
	if _, err := pace.New(nil, map[string]int{"a": 0}, pace.Options{}); err == nil {
		t.Error("New accepted a zero rate")
	}
}

// TestReserveIsSpentBySend: the token Reserve takes before the takeover
// is the one the message's Send spends (no second token), a key holds one
// token a second however often it reserves, and a token of a second that
// has passed is not spent (its Send takes one of its own second), so the
// limit holds either way.
func TestReserveIsSpentBySend(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := testsupport.NewClock(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	l := newLimiter(t, &pace.MemStore{}, clock, 10)
	f := &providertest.Fake{}
	a, ok := pace.Wrap(f, l, 0).(interface {
		Reserve(context.Context, string) error
		provider.Adapter
	})
	if !ok {
		t.Fatal("a paced adapter has no Reserve")
	}
	key := func(i int) string { return "k" + strconv.Itoa(i) }
	// Ten tokens a second: k0 reserves twice (one token), k1..k9 once.
	if err := a.Reserve(ctx, key(0)); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if err := a.Reserve(ctx, key(i)); err != nil {
			t.Fatalf("Reserve(%s): %v, want a token (the limit is 10 and %d were taken)", key(i), err, i)
		}
	}
	if err := a.Reserve(ctx, key(10)); !pace.IsPaced(err) {
		t.Fatalf("the 11th Reserve of the second: %v, want paced", err)
	}
	for i := range 10 {
		if _, err := a.Send(ctx, provider.Message{Key: key(i)}); err != nil {
			t.Fatalf("Send(%s) after its Reserve: %v, want it to spend the reserved token", key(i), err)
		}
	}
	if _, err := a.Send(ctx, provider.Message{Key: key(10)}); !pace.IsPaced(err) {
		t.Fatalf("Send of a key without a token in a spent second: %v, want paced", err)
	}
	if got := f.Calls(); got != 10 {
		t.Fatalf("%d sends reached the provider, want 10", got)
	}
	// A reservation of a second that has passed is lost: the send takes a
	// token of its own second.
	clock.Advance(time.Second)
	if err := a.Reserve(ctx, "late"); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	if _, err := a.Send(ctx, provider.Message{Key: "late"}); err != nil {
		t.Fatal(err)
	}
	for i := range 9 {
		if err := a.Reserve(ctx, key(100+i)); err != nil {
			t.Fatalf("Reserve %d of the second after a late send: %v", i+2, err)
		}
	}
	if err := a.Reserve(ctx, key(200)); !pace.IsPaced(err) {
		t.Fatalf("an 11th token in the second of a late send (its stale reservation spent instead of a token): %v, want paced", err)
	}
}

// TestIsPaced: only the paced adapter's own refusal is paced.
func TestIsPaced(t *testing.T) {
	t.Parallel()
	if !pace.IsPaced(&provider.Error{Kind: provider.Transient, Code: pace.PacedCode}) {
		t.Error("a PacedCode error is not paced")
	}
	for _, err := range []error{nil, errors.New("x"), providertest.Error(provider.Transient, "429")} {
		if pace.IsPaced(err) {
			t.Errorf("IsPaced(%v) = true", err)
		}
	}
}
