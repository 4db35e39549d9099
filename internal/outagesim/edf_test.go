package outagesim

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/dispatch"
	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/ledger/memledger"
	"github.com/sendonce/sendonce/internal/pace"
	"github.com/sendonce/sendonce/internal/reconcile"
	"github.com/sendonce/sendonce/internal/render"
	"github.com/sendonce/sendonce/internal/sender"
	"github.com/sendonce/sendonce/internal/templates/memtemplates"
	"github.com/sendonce/sendonce/notify"
	"github.com/sendonce/sendonce/provider"
	"github.com/sendonce/sendonce/provider/providertest"
)

// edf is a sender and a reconciler sharing one provider paced at 4
// sends a second, over one ledger, on a clock that moves when told.
type edf struct {
	mu   sync.Mutex
	now  time.Time
	led  *memledger.Ledger
	prov *providertest.Fake
	snd  *sender.Sender
	rc   *reconcile.Reconciler
}

func (e *edf) clock() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.now
}

func (e *edf) advance(d time.Duration) {
	e.mu.Lock()
	e.now = e.now.Add(d)
	e.mu.Unlock()
}

func setupEDF(t *testing.T, rate, maxRows int) *edf {
	t.Helper()
	e := &edf{now: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	e.led = memledger.New(memledger.Config{Now: e.clock})
	e.prov = &providertest.Fake{ProviderName: "http"}
	limiter, err := pace.New(&pace.MemStore{}, map[string]int{"http": rate}, pace.Options{Now: e.clock})
	if err != nil {
		t.Fatal(err)
	}
	providers := map[string]provider.Adapter{"sms": pace.Wrap(e.prov, limiter, 0)}
	renderer := render.New(memtemplates.New(memtemplates.Config{}), render.Config{})
	d := func() *dispatch.Dispatcher {
		d, err := dispatch.New(dispatch.Dispatcher{Ledger: e.led, Providers: providers, Renderer: renderer, Logger: slog.New(slog.DiscardHandler),
			ProviderTimeout: 5 * time.Second, ClaimTimeout: time.Minute, Now: e.clock})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if e.snd, err = sender.New(sender.Config{Dispatcher: d(), DeadLetters: noDLQ{}, Concurrency: 1}); err != nil {
		t.Fatal(err)
	}
	if e.rc, err = reconcile.New(reconcile.Config{Dispatcher: d(), MaxRows: maxRows, PageSize: 1000, Concurrency: 1}); err != nil {
		t.Fatal(err)
	}
	return e
}

// backlog writes n released rows whose validity ends at validUntil,
// due now.
func (e *edf) backlog(t *testing.T, n int, validUntil time.Time) {
	t.Helper()
	e.rows(t, "backlog", n, validUntil)
}

func (e *edf) rows(t *testing.T, prefix string, n int, validUntil time.Time) {
	t.Helper()
	ctx := context.Background()
	for i := range n {
		c, err := e.led.Claim(ctx, ledger.Entry{Key: fmt.Sprintf("v1_%s_%03d", prefix, i), Tenant: "acme", Channel: "sms", Class: "otp", Provider: "http",
			Address: "+15551234567", Body: "code", ValidUntil: validUntil}, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.led.Release(ctx, c, "transient: 503", time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
}

func (e *edf) request(n int, validity time.Duration) notify.Request {
	return notify.Request{TenantID: "acme", EventID: fmt.Sprintf("new%d", n), Channel: "sms", Class: notify.ClassTransactional, Template: "code",
		Recipient: notify.Recipient{ID: fmt.Sprintf("user-%d", n), Phone: "+15551234567"}, Content: &notify.Content{Text: "hello"},
		ExpiresAt: e.clock().Add(validity).Format(time.RFC3339)}
}

// TestEarliestDeadlineFirstAcrossSenderAndWorkers: the provider takes 4
// sends a second; 240 rows of the backlog are due, valid for 5 more
// minutes. Find hands them out (a minute of the provider's rate) and a
// worker starts them: it sends 4 in the first second. In the next
// second the sender receives 4 new messages valid for an hour and one
// valid for 2 minutes. The nearest deadlines go first: the message of
// 2 minutes, then 3 rows of the backlog; the four of an hour wait
// (released, nothing sent: the reconciler hands them out by their
// deadline later). Before, the sender took the second's four tokens
// first come, and the worker's rows, whose deadlines are nearer, waited.
func TestEarliestDeadlineFirstAcrossSenderAndWorkers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setupEDF(t, 4, 1000)
	e.backlog(t, 240, e.clock().Add(5*time.Minute))
	e.advance(time.Second)
	q := &units{}
	if rep, err := e.rc.Find(ctx, q); err != nil || rep.Found != 240 {
		t.Fatalf("Find: %+v, %v; want 240 rows handed out", rep, err)
	}
	u := q.q[0]
	first, _ := e.rc.Work(ctx, u)
	if got := e.prov.Calls(); got != 4 {
		t.Fatalf("the worker's first second: %d sends, want 4 (%+v)", got, first)
	}

	e.advance(time.Second)
	far := map[string]bool{}
	for i := range 4 {
		req := e.request(i, time.Hour)
		far[req.Key()] = true
		res := e.snd.Process(ctx, req)
		if res.Disposition != dispatch.Retry {
			t.Errorf("new message valid for an hour: %s (%s), want retry (it yields to the backlog's nearer deadlines)", res.Disposition, res.Reason)
		}
	}
	near := e.request(9, 2*time.Minute)
	if res := e.snd.Process(ctx, near); res.Disposition != dispatch.Sent {
		t.Errorf("new message valid for 2 minutes: %s (%s), want sent (its deadline is nearer than the backlog's)", res.Disposition, res.Reason)
	}
	rest := u
	rest.Keys = u.Keys[first.Examined-1:]
	e.rc.Work(ctx, rest)
	sent := e.prov.Sent()[4:]
	backlog := 0
	for _, m := range sent {
		switch {
		case far[m.Key]:
			t.Errorf("a message valid for an hour was sent while the backlog's rows, valid for 5 minutes, waited")
		case m.Key != near.Key():
			backlog++
		}
	}
	if len(sent) != 4 || backlog != 3 {
		t.Errorf("the second second: %d sends, %d of the backlog; want 4: the message of 2 minutes and 3 of the backlog", len(sent), backlog)
	}
}

// TestHandOutFollowsTheProvidersRate: with the provider paced at 1,500
// sends a second and a hand-out of at most 50 rows configured, Find
// hands out all 300 rows due (two minutes at 1,500/s: 180,000), in
// units of 120 keys that a worker takes 30 at a time (1,500/s × 200 ms
// ÷ 10 workers), holding 5 sends a second (300 rows in a minute) for
// them. Before, MaxRows was the ceiling: 50 rows a run, whatever the
// provider could take, and the operator had to raise it by hand.
func TestHandOutFollowsTheProvidersRate(t *testing.T) {
	t.Parallel()
	e := setupEDF(t, 1500, 50)
	e.backlog(t, 300, e.clock().Add(time.Hour))
	e.advance(time.Second)
	q := &units{}
	rep, err := e.rc.Find(context.Background(), q)
	if err != nil || rep.Found != 300 {
		t.Fatalf("Find: %+v, %v; want all 300 rows handed out", rep, err)
	}
	for _, u := range q.q {
		if len(u.Keys) > 120 || u.Concurrency != 30 || u.Hold == nil || u.Hold.Rate != 5 {
			t.Fatalf("unit of %d keys, concurrency %d, hold %+v; want at most 120 keys, 30, a hold of 5/s", len(u.Keys), u.Concurrency, u.Hold)
		}
	}
}

// TestExpiredRowsAreHandedOutLast: ten rows whose validity has passed
// (they can only be marked FAILED) and five still valid, all due. Find
// hands the five out first, and holds the provider's rate for them
// alone: a row past its validity takes no share of the rate from one
// that can still be sent. The ten go after them in a unit of their own
// (Unit.Expired), besides the lane's share and with no hold, so that a
// down provider, which defers its lane's units, does not leave them at
// the head of the attention index, filling Find's read. Before, the
// expired rows had the earliest deadlines and went first; then they
// went last in the same units.
func TestExpiredRowsAreHandedOutLast(t *testing.T) {
	t.Parallel()
	e := setupEDF(t, 4, 1000)
	e.rows(t, "expired", 10, e.clock().Add(30*time.Second))
	e.rows(t, "valid", 5, e.clock().Add(time.Hour))
	e.advance(time.Minute)
	q := &units{}
	if rep, err := e.rc.Find(context.Background(), q); err != nil || rep.Found != 15 || len(q.q) != 2 {
		t.Fatalf("Find: %+v, %v, %d units; want 15 rows in two units", rep, err, len(q.q))
	}
	u, dead := q.q[0], q.q[1]
	if len(u.Keys) != 5 || u.Expired {
		t.Fatalf("first unit: %v (expired %t), want the 5 valid rows", u.Keys, u.Expired)
	}
	for i, k := range u.Keys {
		if k[:8] != "v1_valid" {
			t.Fatalf("row %d handed out first is %s, want the valid rows first: %v", i, k, u.Keys)
		}
	}
	if u.Hold == nil || u.Hold.Rate != 1 || !u.Hold.Cut.Deadline.Equal(e.clock().Add(59*time.Minute)) {
		t.Errorf("hold %+v, want 1/s up to the valid rows' deadline", u.Hold)
	}
	if len(dead.Keys) != 10 || !dead.Expired || dead.Hold != nil {
		t.Errorf("second unit: %d keys, expired %t, hold %+v; want the 10 expired rows, marked expired, with no hold", len(dead.Keys), dead.Expired, dead.Hold)
	}
}
