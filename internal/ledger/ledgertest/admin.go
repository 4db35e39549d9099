package ledgertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/sendkey"
	"github.com/sendonce/sendonce/internal/testsupport"
)

// AdminLedger is a ledger with the operator's operations.
type AdminLedger interface {
	ledger.Ledger
	ledger.Admin
}

// NewAdminLedgerFunc builds a fresh, empty AdminLedger that reads time
// from now.
type NewAdminLedgerFunc func(t *testing.T, now func() time.Time) AdminLedger

type adminBundle struct {
	ctx   context.Context
	clock *testsupport.Clock
	l     AdminLedger
	t     *testing.T
}

// RunAdmin runs the conformance cases of ledger.Admin against the ledgers
// newLedger builds. Every subtest builds its own ledger.
func RunAdmin(t *testing.T, newLedger NewAdminLedgerFunc) {
	setup := func(t *testing.T) *adminBundle {
		t.Helper()
		t.Parallel()
		clock := testsupport.NewClock(testsupport.Start)
		return &adminBundle{ctx: t.Context(), clock: clock, l: newLedger(t, clock.Now), t: t}
	}
	t.Run("ResolveUncertain", func(t *testing.T) {
		b := setup(t)
		c := b.claim("u1", "user-1")
		b.mark(c, ledger.Outcome{State: ledger.StateUncertain, Reason: "timeout after write"})
		cur := b.get(c.Key)
		b.clock.Advance(time.Minute)
		now := b.clock.Now()
		got, err := b.l.Resolve(b.ctx, ledger.Resolution{Key: c.Key, FromState: cur.State, FromClaimID: cur.ClaimID,
			State: ledger.StateSent, Reason: "provider shows it delivered", By: "arn:aws:iam::1:user/ana", ProviderMessageID: "msg_9"})
		if err != nil {
			t.Fatalf("Resolve: %v", err)
		}
		stored := b.get(c.Key)
		for _, r := range []ledger.Record{got, stored} {
			if r.State != ledger.StateSent || r.ResolvedBy != "arn:aws:iam::1:user/ana" || r.ResolvedReason != "provider shows it delivered" ||
				r.ResolvedFrom != ledger.StateUncertain || !r.ResolvedAt.Equal(now) || r.ProviderMessageID != "msg_9" {
				t.Errorf("resolved row = %+v, want SENT with the audit (by ana, at %v, from UNCERTAIN, msg_9)", r, now)
			}
			if r.Address != "" || r.Subject != "" || r.Body != "" {
				t.Errorf("resolved row keeps address %q / message %q %q, want them dropped", r.Address, r.Subject, r.Body)
			}
			if r.Reason != "timeout after write" || r.Attempts != 1 || !r.UpdatedAt.Equal(now) {
				t.Errorf("resolved row reason %q attempts %d updated %v, want the old reason, 1, %v", r.Reason, r.Attempts, r.UpdatedAt, now)
			}
		}
		if keys := b.attentionKeys(); slices.Contains(keys, c.Key) {
			t.Errorf("resolved row still in the attention index")
		}
		if _, err := b.l.TakeOver(b.ctx, stored, "", time.Minute); !errors.Is(err, ledger.ErrExists) {
			t.Errorf("TakeOver of a resolved row: %v, want ErrExists", err)
		}
	})
	t.Run("ResolveFenced", func(t *testing.T) {
		b := setup(t)
		c := b.claim("f1", "user-1")
		b.mark(c, ledger.Outcome{State: ledger.StateUncertain})
		cur := b.get(c.Key)
		for name, r := range map[string]ledger.Resolution{
			"OtherClaim": {FromState: ledger.StateUncertain, FromClaimID: "someone-else"},
			"OtherState": {FromState: ledger.StatePending, FromClaimID: cur.ClaimID},
		} {
			r.Key, r.State, r.Reason, r.By = c.Key, ledger.StateFailed, "x", "me"
			_, err := b.l.Resolve(b.ctx, r)
			got, ok := ledger.AsConflict(err)
			if !ok || got.State != ledger.StateUncertain || got.ClaimID != cur.ClaimID {
				t.Errorf("%s: Resolve = %v, want a *ConflictError holding the UNCERTAIN row", name, err)
			}
		}
		if r := b.get(c.Key); r.State != ledger.StateUncertain || r.ResolvedBy != "" {
			t.Errorf("after fenced resolves: row %s resolved by %q, want untouched", r.State, r.ResolvedBy)
		}
	})
	t.Run("ResolveFinalNeedsForce", func(t *testing.T) {
		b := setup(t)
		c := b.claim("fin", "user-1")
		b.mark(c, ledger.Outcome{State: ledger.StateFailed, Reason: "rejected"})
		cur := b.get(c.Key)
		r := ledger.Resolution{Key: c.Key, FromState: cur.State, FromClaimID: cur.ClaimID, State: ledger.StateSent, Reason: "it went", By: "me"}
		if _, err := b.l.Resolve(b.ctx, r); !errors.Is(err, ledger.ErrFinal) {
			t.Fatalf("Resolve of a FAILED row without force: %v, want ErrFinal", err)
		}
		r.Force = true
		got, err := b.l.Resolve(b.ctx, r)
		if err != nil || got.State != ledger.StateSent || got.ResolvedFrom != ledger.StateFailed {
			t.Errorf("forced Resolve = %+v, %v; want SENT resolved from FAILED", got, err)
		}
	})
	t.Run("ResolvePending", func(t *testing.T) {
		b := setup(t)
		c := b.claim("p1", "user-1")
		cur := b.get(c.Key)
		r := ledger.Resolution{Key: c.Key, FromState: cur.State, FromClaimID: cur.ClaimID, State: ledger.StateFailed, Reason: "gave up", By: "me"}
		if _, err := b.l.Resolve(b.ctx, r); !errors.Is(err, ledger.ErrInFlight) {
			t.Fatalf("Resolve of an in-flight PENDING row: %v, want ErrInFlight", err)
		}
		b.clock.Set(cur.LeaseUntil)
		if _, err := b.l.Resolve(b.ctx, r); err != nil {
			t.Fatalf("Resolve of a stale PENDING row: %v", err)
		}
		if err := b.l.Mark(b.ctx, c, ledger.Outcome{State: ledger.StateSent}); !errors.Is(err, ledger.ErrFencingLost) {
			t.Errorf("the old worker's Mark after a resolve: %v, want ErrFencingLost", err)
		}
	})
	t.Run("ResolveInvalid", func(t *testing.T) {
		b := setup(t)
		c := b.claim("inv", "user-1")
		cur := b.get(c.Key)
		ok := ledger.Resolution{Key: c.Key, FromState: cur.State, FromClaimID: cur.ClaimID, State: ledger.StateSent, Reason: "r", By: "me", Force: true}
		for name, mut := range map[string]func(*ledger.Resolution){
			"NoKey":      func(r *ledger.Resolution) { r.Key = "" },
			"ToPending":  func(r *ledger.Resolution) { r.State = ledger.StatePending },
			"ToUncertn":  func(r *ledger.Resolution) { r.State = ledger.StateUncertain },
			"NoReason":   func(r *ledger.Resolution) { r.Reason = "" },
			"NoIdentity": func(r *ledger.Resolution) { r.By = "" },
			"NoFrom":     func(r *ledger.Resolution) { r.FromState = "" },
		} {
			r := ok
			mut(&r)
			if _, err := b.l.Resolve(b.ctx, r); err == nil {
				t.Errorf("%s: Resolve accepted %+v", name, r)
			}
		}
		if _, err := b.l.Resolve(b.ctx, ledger.Resolution{Key: Key("never-claimed"), FromState: ledger.StateUncertain, FromClaimID: "x",
			State: ledger.StateSent, Reason: "r", By: "me"}); !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("Resolve of an unknown key: %v, want ErrNotFound", err)
		}
		if r := b.get(c.Key); r.State != ledger.StatePending {
			t.Errorf("row is %s after invalid resolves, want PENDING", r.State)
		}
	})
	t.Run("Abandoned", func(t *testing.T) {
		b := setup(t)
		keys := b.marked("ab", 3, ledger.Outcome{State: ledger.StateAbandoned, Reason: "policy"})
		other := b.claim("sent", "user-1")
		b.mark(other, ledger.Outcome{State: ledger.StateSent})
		if got := b.abandoned(time.Time{}, 1); !slices.Equal(got, keys) {
			t.Errorf("Abandoned (pages of 1) = %v, want %v oldest first", got, keys)
		}
		if got := b.abandoned(testsupport.Start.Add(1500*time.Millisecond), 0); !slices.Equal(got, keys[:2]) {
			t.Errorf("Abandoned before +1.5s = %v, want %v", got, keys[:2])
		}
		if got := b.attentionKeys(); len(got) != 0 {
			t.Errorf("attention index holds %v, want abandoned and sent rows out of it", got)
		}
		// Resolving an abandoned row as sent takes it off the list;
		// resolving an uncertain one as abandoned puts it on.
		cur := b.get(keys[0])
		if _, err := b.l.Resolve(b.ctx, ledger.Resolution{Key: cur.Key, FromState: cur.State, FromClaimID: cur.ClaimID,
			State: ledger.StateSent, Reason: "provider had it", By: "me", Force: true}); err != nil {
			t.Fatal(err)
		}
		u := b.claim("ab-u", "user-1")
		b.mark(u, ledger.Outcome{State: ledger.StateUncertain})
		ur := b.get(u.Key)
		if _, err := b.l.Resolve(b.ctx, ledger.Resolution{Key: u.Key, FromState: ur.State, FromClaimID: ur.ClaimID,
			State: ledger.StateAbandoned, Reason: "no way to tell", By: "me"}); err != nil {
			t.Fatal(err)
		}
		if got, want := b.abandoned(time.Time{}, 0), []string{keys[1], keys[2], u.Key}; !slices.Equal(got, want) {
			t.Errorf("Abandoned after resolves = %v, want %v", got, want)
		}
		if _, err := b.l.Abandoned(b.ctx, ledger.AbandonedQuery{Shard: ledger.AttentionShards}); err == nil {
			t.Error("Abandoned accepted a shard out of range")
		}
	})
	t.Run("ByEvent", func(t *testing.T) {
		b := setup(t)
		var want []string
		for _, rcpt := range []string{"user-1", "user-2", "user-3"} {
			want = append(want, b.claim("evt-1", rcpt).Key)
		}
		b.claim("evt-2", "user-1")
		e := NewEntry(sendkey.Derive(sendkey.Parts{Tenant: "globex", EventID: "evt-1", RecipientID: "user-1", Channel: "sms", Template: "order_shipped"}))
		e.Tenant, e.EventID = "globex", "evt-1"
		if _, err := b.l.Claim(b.ctx, e, lease); err != nil {
			t.Fatal(err)
		}
		slices.Sort(want)
		got, err := b.l.ByEvent(b.ctx, "acme", "evt-1")
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, r := range got {
			keys = append(keys, r.Key)
			if r.EventID != "evt-1" || r.Tenant != "acme" || r.State != ledger.StatePending {
				t.Errorf("row %s: event %q tenant %q state %s, want evt-1 acme PENDING", r.Key, r.EventID, r.Tenant, r.State)
			}
		}
		if !slices.Equal(keys, want) {
			t.Errorf("ByEvent(acme, evt-1) = %v, want %v (not globex's, not evt-2's)", keys, want)
		}
		if got, err := b.l.ByEvent(b.ctx, "acme", "none"); err != nil || len(got) != 0 {
			t.Errorf("ByEvent of an unknown event = %v, %v; want none", got, err)
		}
		if _, err := b.l.ByEvent(b.ctx, "", "evt-1"); err == nil {
			t.Error("ByEvent accepted an empty tenant")
		}
	})
	t.Run("Failed", func(t *testing.T) {
		b := setup(t)
		want := b.marked("fl", 3, ledger.Outcome{State: ledger.StateFailed, Reason: "rejected"})
		s := b.claim("fl-sent", "user-1")
		b.mark(s, ledger.Outcome{State: ledger.StateSent})
		b.claim("fl-pending", "user-1")
		var got []string
		cursor := ""
		for pages := 0; ; pages++ {
			if pages > 20 {
				t.Fatal("Failed never ends")
			}
			p, err := b.l.Failed(b.ctx, ledger.ScanQuery{Limit: 2, Cursor: cursor})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range p.Records {
				got = append(got, r.Key)
			}
			if cursor = p.Cursor; cursor == "" {
				break
			}
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("Failed = %v, want %v", got, want)
		}
	})
}

func (b *adminBundle) claim(event, recipient string) ledger.Claim {
	b.t.Helper()
	p := sendkey.Parts{Tenant: "acme", EventID: b.t.Name() + "/" + event, RecipientID: recipient, Channel: "sms", Template: "order_shipped"}
	if event == "evt-1" || event == "evt-2" {
		p.EventID = event
	}
	e := NewEntry(sendkey.Derive(p))
	e.EventID, e.RecipientID = p.EventID, recipient
	c, err := b.l.Claim(b.ctx, e, lease)
	if err != nil {
		b.t.Fatalf("Claim: %v", err)
	}
	return c
}

func (b *adminBundle) mark(c ledger.Claim, o ledger.Outcome) {
	b.t.Helper()
	if err := b.l.Mark(b.ctx, c, o); err != nil {
		b.t.Fatalf("Mark(%s): %v", o.State, err)
	}
}

// marked claims n keys for events prefix0, prefix1, ..., marks each with
// o and advances the clock a second after each; it returns their keys in
// that order.
func (b *adminBundle) marked(prefix string, n int, o ledger.Outcome) []string {
	b.t.Helper()
	keys := make([]string, n)
	for i := range n {
		c := b.claim(fmt.Sprintf("%s%d", prefix, i), "user-1")
		b.mark(c, o)
		keys[i] = c.Key
		b.clock.Advance(time.Second)
	}
	return keys
}

func (b *adminBundle) get(key string) ledger.Record {
	b.t.Helper()
	return Row(b.t, b.l, key)
}

// attentionKeys lists every key in the attention index, due or not.
func (b *adminBundle) attentionKeys() []string {
	b.t.Helper()
	var keys []string
	for s := range ledger.AttentionShards {
		p, err := b.l.Attention(b.ctx, ledger.AttentionQuery{Shard: s, DueBefore: b.clock.Now().Add(24 * time.Hour), Limit: 1000})
		if err != nil {
			b.t.Fatal(err)
		}
		for _, r := range p.Records {
			keys = append(keys, r.Key)
		}
	}
	return keys
}

// abandoned lists every abandoned key before t, oldest first, reading
// every shard in pages of limit.
func (b *adminBundle) abandoned(before time.Time, limit int) []string {
	b.t.Helper()
	var rows []ledger.Record
	for s := range ledger.AttentionShards {
		cursor := ""
		for pages := 0; ; pages++ {
			if pages > 50 {
				b.t.Fatal("Abandoned never ends")
			}
			p, err := b.l.Abandoned(b.ctx, ledger.AbandonedQuery{Shard: s, Before: before, Limit: limit, Cursor: cursor})
			if err != nil {
				b.t.Fatal(err)
			}
			rows = append(rows, p.Records...)
			if cursor = p.Cursor; cursor == "" {
				break
			}
		}
	}
	slices.SortStableFunc(rows, func(x, y ledger.Record) int { return x.DueAt().Compare(y.DueAt()) })
	keys := make([]string, len(rows))
	for i, r := range rows {
		if r.State != ledger.StateAbandoned {
			b.t.Errorf("Abandoned returned a %s row", r.State)
		}
		keys[i] = r.Key
	}
	return keys
}
