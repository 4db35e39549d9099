package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/dispatch"
	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/ledger/dynamoledger"
	"github.com/sendonce/sendonce/internal/metrics"
	"github.com/sendonce/sendonce/internal/provider/httpprovider"
	"github.com/sendonce/sendonce/internal/provider/simulator"
	"github.com/sendonce/sendonce/internal/reconcile"
	"github.com/sendonce/sendonce/internal/sendkey"
	"github.com/sendonce/sendonce/internal/tableschema"
	"github.com/sendonce/sendonce/internal/testenv"
	"github.com/sendonce/sendonce/internal/testsupport"
	"github.com/sendonce/sendonce/provider"
)

func (b bundle) withSTS(t *testing.T) { b.vars["AWS_ENDPOINT_URL_STS"] = testenv.MotoEndpoint(t) }

// seeder writes ledger rows into the bundle's table at the clock's time.
type seeder struct {
	t   *testing.T
	led *dynamoledger.Ledger
	clk *testsupport.Clock // set to seed rows at chosen times
}

func (b bundle) seeder(t *testing.T) *seeder {
	clk := testsupport.NewClock(time.Now())
	led, err := dynamoledger.New(b.db, b.table, dynamoledger.Config{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	return &seeder{t: t, led: led, clk: clk}
}

// entry is a complete sms entry of tenant's event for recipient.
func entry(tenant, event, recipient, channel string) ledger.Entry {
	k := sendkey.Derive(sendkey.Parts{Tenant: tenant, EventID: event, RecipientID: recipient, Channel: channel, Template: "order_shipped"})
	return ledger.Entry{Key: k, Tenant: tenant, EventID: event, Channel: channel, Class: "transactional", Provider: "http",
		Template: "order_shipped", RecipientID: recipient, Address: "+15551234567", Body: "Your order shipped"}
}

// row claims e at at with lease and, unless state is PENDING, marks it.
func (s *seeder) row(e ledger.Entry, at time.Time, lease time.Duration, state ledger.State, reason string) ledger.Entry {
	s.t.Helper()
	s.clk.Set(at)
	c, err := s.led.Claim(s.t.Context(), e, lease)
	if err != nil {
		s.t.Fatal(err)
	}
	if state != ledger.StatePending {
		if err := s.led.Mark(s.t.Context(), c, ledger.Outcome{State: state, Reason: reason, ProviderMessageID: map[bool]string{true: "msg_" + e.RecipientID}[state == ledger.StateSent]}); err != nil {
			s.t.Fatal(err)
		}
	}
	return e
}

// released claims e at at and releases the claim (due for the
// reconciler at at+lease). A first claim is not in the attention index
// (package ledger, "Why no message is stranded"): the PENDING rows that
// list shows are released or taken-over claims.
func (s *seeder) released(e ledger.Entry, at time.Time, lease time.Duration) ledger.Entry {
	s.t.Helper()
	s.clk.Set(at)
	c, err := s.led.Claim(s.t.Context(), e, lease)
	if err != nil {
		s.t.Fatal(err)
	}
	if err := s.led.Release(s.t.Context(), c, "transient: test", at.Add(lease)); err != nil {
		s.t.Fatal(err)
	}
	return e
}

// lines decodes one JSON object per line.
// okRows fails the test unless r exited 0, and returns its output's
// lines (see lines).
func okRows(t *testing.T, r result) []map[string]any {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	return lines(t, r.stdout)
}

// okRowsBy is okRows, which must be n rows with n values of field, keyed
// by that value.
func okRowsBy(t *testing.T, r result, field string, n int) map[string]map[string]any {
	t.Helper()
	rows := okRows(t, r)
	by := map[string]map[string]any{}
	for _, row := range rows {
		k, _ := row[field].(string)
		by[k] = row
	}
	if len(rows) != n || len(by) != n {
		t.Fatalf("%d rows, %d values of %s, want %d: %s", len(rows), len(by), field, n, r.stdout)
	}
	return by
}

func lines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var rows []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %q is not one JSON object: %v", l, err)
		}
		rows = append(rows, m)
	}
	return rows
}

func keys(rows []map[string]any) []string {
	var ks []string
	for _, r := range rows {
		k, _ := r["key"].(string)
		ks = append(ks, k)
	}
	return ks
}

func sameKeys(t *testing.T, what string, got []string, want ...ledger.Entry) {
	t.Helper()
	var w []string
	for _, e := range want {
		w = append(w, e.Key)
	}
	if strings.Join(got, ",") != strings.Join(w, ",") {
		t.Errorf("%s: keys\n got %v\nwant %v", what, got, w)
	}
}

// TestFind runs on a table with the event index and on one without it
// (the default: the event lookup scans, and says so on stderr): the same
// rows, in key order.
func TestFind(t *testing.T) {
	t.Parallel()
	for _, indexed := range []bool{false, true} {
		t.Run(fmt.Sprint("EventIndex=", indexed), func(t *testing.T) {
			t.Parallel()
			testFind(t, indexed)
		})
	}
}

func testFind(t *testing.T, indexed bool) {
	b := setup(t, tableschema.WithEventIndex(indexed))
	s := b.seeder(t)
	now := time.Now()
	sent := s.row(entry("acme", "evt-find", "user-1", "sms"), now, time.Minute, ledger.StateSent, "")
	pend := s.row(entry("acme", "evt-find", "user-2", "sms"), now, time.Minute, ledger.StatePending, "")
	mail := s.row(entry("acme", "evt-find", "user-1", "email"), now, time.Minute, ledger.StateFailed, "rejected by +15551234567")
	s.row(entry("acme", "evt-other", "user-1", "sms"), now, time.Minute, ledger.StateSent, "")
	s.row(entry("globex", "evt-find", "user-1", "sms"), now, time.Minute, ledger.StateSent, "")

	t.Run("OneMessageAsInspect", func(t *testing.T) {
		r := b.run(t, "find", "--tenant", "acme", "--event", "evt-find", "--recipient", "user-1", "--channel", "sms", "--template", "order_shipped")
		want := b.run(t, "inspect", sent.Key)
		if r.code != 0 || r.stdout != want.stdout || !strings.Contains(r.stdout, `"state": "SENT"`) {
			t.Errorf("find = %d %q %q; want inspect's output %q", r.code, r.stdout, r.stderr, want.stdout)
		}
		tab := b.run(t, "find", "--tenant", "acme", "--event", "evt-find", "--recipient", "user-1", "--channel", "sms", "--template", "order_shipped", "--output", "table")
		if tab.code != 0 || !strings.Contains(tab.stdout, "state:") || !strings.Contains(tab.stdout, "SENT") || strings.Contains(tab.stdout, "{") {
			t.Errorf("find --output table = %q, want field: value lines", tab.stdout)
		}
	})
	t.Run("WholeEvent", func(t *testing.T) {
		r := b.run(t, "find", "--tenant", "acme", "--event", "evt-find")
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		if scanNote := strings.Contains(r.stderr, "has no event index, so this lookup scanned the whole table"); scanNote == indexed || strings.Count(r.stderr, "\n") > 1 {
			t.Errorf("EventIndex=%v: stderr %q; want one scan note exactly when the table has no event index", indexed, r.stderr)
		}
		rows := lines(t, r.stdout)
		want := []ledger.Entry{sent, pend, mail}
		sortEntries(want)
		sameKeys(t, "find --event", keys(rows), want...)
		for _, row := range rows {
			if row["event_id"] != "evt-find" || row["tenant"] != "acme" {
				t.Errorf("row %v: want event evt-find of acme", row)
			}
		}
		if strings.Contains(r.stdout, "+15551234567") {
			t.Errorf("output holds a raw address: %s", r.stdout)
		}
		tab := b.run(t, "find", "--tenant", "acme", "--event", "evt-find", "--output", "table")
		if tab.code != 0 || !strings.HasPrefix(tab.stdout, "KEY") || strings.Count(tab.stdout, "\n") != 4 {
			t.Errorf("table output = %q", tab.stdout)
		}
	})
	t.Run("Errors", func(t *testing.T) {
		oneLineError(t, b.run(t, "find", "--tenant", "acme", "--event", "nope"), "no ledger rows for event")
		oneLineError(t, b.run(t, "find", "--tenant", "acme", "--event", "nope", "--recipient", "u", "--channel", "sms", "--template", "t"), "no ledger row for")
		oneLineError(t, b.run(t, "find", "--tenant", "ac me", "--event", "e"), "is not 1 to 64")
		for _, args := range [][]string{
			{"find", "--tenant", "acme"},
			{"find", "--tenant", "acme", "--event", "e", "--recipient", "u"},
			{"find", "--tenant", "acme", "--event", "e", "--output", "xml"},
		} {
			if r := b.run(t, args...); r.code != exitUsage {
				t.Errorf("%v: exit %d, want 2", args, r.code)
			}
		}
	})
}

func sortEntries(es []ledger.Entry) {
	for i := range es {
		for j := i + 1; j < len(es); j++ {
			if es[j].Key < es[i].Key {
				es[i], es[j] = es[j], es[i]
			}
		}
	}
}

func TestList(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.seeder(t)
	now := time.Now()
	base := now.Add(-2 * time.Hour)
	u1 := s.row(entry("acme", "u1", "r", "sms"), base, time.Minute, ledger.StateUncertain, "timeout")
	u2 := s.row(entry("globex", "u2", "r", "sms"), base.Add(time.Hour), time.Minute, ledger.StateUncertain, "reset")
	u3 := s.row(entry("acme", "u3", "r", "email"), now.Add(-time.Minute), time.Minute, ledger.StateUncertain, "timeout")
	p1 := s.released(entry("acme", "p1", "r", "sms"), base, time.Minute)
	p2 := s.released(entry("acme", "p2", "r", "sms"), now, time.Hour)
	a1 := s.row(entry("acme", "a1", "r", "sms"), base.Add(30*time.Minute), time.Minute, ledger.StateAbandoned, "policy: marketing")
	a2 := s.row(entry("acme", "a2", "r", "sms"), base.Add(45*time.Minute), time.Minute, ledger.StateAbandoned, "attempt limit")
	f1 := s.row(entry("acme", "f1", "r", "sms"), base, time.Minute, ledger.StateFailed, "rejected")
	f2 := s.row(entry("acme", "f2", "r", "sms"), base.Add(time.Minute), time.Minute, ledger.StateFailed, "rejected")
	s.row(entry("acme", "s1", "r", "sms"), base, time.Minute, ledger.StateSent, "")

	for _, tc := range []struct {
		name string
		args []string
		want []ledger.Entry
	}{
		{"Uncertain", []string{"--state", "uncertain"}, []ledger.Entry{u1, u2, u3}},
		{"OlderThan", []string{"--state", "UNCERTAIN", "--older-than", "30m"}, []ledger.Entry{u1, u2}},
		{"Tenant", []string{"--state", "uncertain", "--tenant", "globex"}, []ledger.Entry{u2}},
		{"Channel", []string{"--state", "uncertain", "--channel", "email"}, []ledger.Entry{u3}},
		{"Limit", []string{"--state", "uncertain", "--limit", "2"}, []ledger.Entry{u1, u2}},
		{"Pending", []string{"--state", "pending"}, []ledger.Entry{p1, p2}},
		{"PendingStale", []string{"--state", "pending", "--older-than", "1s"}, []ledger.Entry{p1}},
		{"Abandoned", []string{"--state", "abandoned"}, []ledger.Entry{a1, a2}},
		{"AbandonedOlder", []string{"--state", "abandoned", "--older-than", "85m"}, []ledger.Entry{a1}}, // ages 90m and 75m
		{"Failed", []string{"--state", "failed"}, []ledger.Entry{f1, f2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := b.run(t, append([]string{"list"}, tc.args...)...)
			rows := okRows(t, r)
			sameKeys(t, strings.Join(tc.args, " "), keys(rows), tc.want...)
			for _, row := range rows {
				for _, f := range []string{"key", "tenant", "channel", "class", "attempts", "age", "due_at", "state"} {
					if _, ok := row[f]; !ok {
						t.Errorf("row lacks %q: %v", f, row)
					}
				}
			}
			if warned := strings.Contains(r.stderr, "scans the whole table"); warned != (tc.name == "Failed") {
				t.Errorf("stderr = %q: the cost warning belongs to failed alone", r.stderr)
			}
		})
	}
	t.Run("Table", func(t *testing.T) {
		t.Parallel()
		r := b.run(t, "list", "--state", "uncertain", "--output", "table")
		if r.code != 0 || !strings.HasPrefix(r.stdout, "KEY") || !strings.Contains(r.stdout, "AGE") || strings.Count(r.stdout, "\n") != 4 {
			t.Errorf("table = %q", r.stdout)
		}
	})
	t.Run("Usage", func(t *testing.T) {
		t.Parallel()
		for _, args := range [][]string{{"list"}, {"list", "--state", "sent"}, {"list", "--state", "failed", "--limit", "0"}, {"list", "--state", "failed", "--older-than", "soon"}} {
			if r := b.run(t, args...); r.code != exitUsage {
				t.Errorf("%v: exit %d, want 2", args, r.code)
			}
		}
	})
}

// TestResolve: an UNCERTAIN row resolved as sent shows the audit, and the
// next reconciler run sends nothing for it (while it resends an unresolved
// twin, so the run would have acted).
func TestResolve(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.withSTS(t)
	s := b.seeder(t)
	past := time.Now().Add(-10 * time.Minute)
	done := s.row(entry("acme", "resolve-me", "r", "sms"), past, time.Minute, ledger.StateUncertain, "timeout after write")
	twin := s.row(entry("acme", "leave-me", "r", "sms"), past, time.Minute, ledger.StateUncertain, "timeout after write")

	r := b.run(t, "resolve", done.Key, "--as", "sent", "--reason", "provider console shows it delivered", "--provider-id", "msg_42")
	if r.code != 0 {
		t.Fatalf("resolve: exit %d: %s", r.code, r.stderr)
	}
	ins := b.run(t, "inspect", done.Key)
	var row map[string]any
	if err := json.Unmarshal([]byte(ins.stdout), &row); err != nil {
		t.Fatal(err)
	}
	if row["state"] != "SENT" || row["resolved_from"] != "UNCERTAIN" || row["resolved_reason"] != "provider console shows it delivered" ||
		row["provider_message_id"] != "msg_42" || !strings.HasPrefix(row["resolved_by"].(string), "arn:aws:") || row["resolved_at"] == nil {
		t.Errorf("inspect after resolve = %v; want SENT with the audit (who from STS, when, why, from)", row)
	}
	if _, ok := row["address"]; ok {
		t.Errorf("a resolved row keeps its address: %v", row)
	}

	// The next reconciler run.
	sim, simURL := testsupport.Simulator(t, simulator.Options{Token: "tok"})
	prov, err := httpprovider.New(httpprovider.Config{BaseURL: simURL, Token: "tok", Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	led := b.ledger(t)
	rec, err := reconcile.New(reconcile.Config{
		Dispatcher: testsupport.Dispatcher(t, dispatch.Dispatcher{
			Ledger:          led,
			Providers:       map[string]provider.Adapter{"sms": prov},
			Metrics:         metrics.Discard,
			ProviderTimeout: 2 * time.Second,
			ClaimTimeout:    30 * time.Second,
			Settle:          time.Second,
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rec.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := sim.Delivered(done.Key); got != 0 {
		t.Errorf("the reconciler sent the resolved message %d times, want 0", got)
	}
	if got := sim.Delivered(twin.Key); got != 1 {
		t.Errorf("the reconciler sent the unresolved twin %d times, want 1 (else this test proves nothing)", got)
	}
	if after := b.run(t, "inspect", done.Key); after.stdout != ins.stdout {
		t.Errorf("the reconciler changed the resolved row:\n%s\nwas\n%s", after.stdout, ins.stdout)
	}

	t.Run("FinalNeedsForce", func(t *testing.T) {
		oneLineError(t, b.run(t, "resolve", done.Key, "--as", "failed", "--reason", "x"), "row is final")
		r := b.run(t, "resolve", done.Key, "--as", "failed", "--reason", "it bounced after all", "--force")
		if r.code != 0 || !strings.Contains(r.stdout, `"resolved_from": "SENT"`) {
			t.Errorf("forced resolve: exit %d %q %q", r.code, r.stdout, r.stderr)
		}
	})
	t.Run("InFlightNeedsForce", func(t *testing.T) {
		live := s.row(entry("acme", "in-flight", "r", "sms"), time.Now(), time.Hour, ledger.StatePending, "")
		oneLineError(t, b.run(t, "resolve", live.Key, "--as", "abandoned", "--reason", "x"), "in flight")
		r := b.run(t, "resolve", live.Key, "--as", "abandoned", "--reason", "worker is gone", "--force")
		if r.code != 0 {
			t.Fatalf("forced: exit %d %s", r.code, r.stderr)
		}
		if l := b.run(t, "list", "--state", "abandoned"); !strings.Contains(l.stdout, live.Key) {
			t.Errorf("a row resolved as abandoned is not listed: %q", l.stdout)
		}
	})
	t.Run("Errors", func(t *testing.T) {
		oneLineError(t, b.run(t, "resolve", sampleKey, "--as", "sent", "--reason", "x"), "no ledger row")
		oneLineError(t, b.run(t, "resolve", "v1_nope", "--as", "sent", "--reason", "x"), "not an idempotency key")
		for _, args := range [][]string{
			{"resolve", twin.Key, "--as", "uncertain", "--reason", "x"},
			{"resolve", twin.Key, "--as", "sent"},
			{"resolve", "--as", "sent", "--reason", "x"},
		} {
			if r := b.run(t, args...); r.code != exitUsage {
				t.Errorf("%v: exit %d, want 2", args, r.code)
			}
		}
	})
}
