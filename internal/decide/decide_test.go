package decide

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/provider"
)

// The dimensions of the decision, each value named as the table writes it.
var (
	callers = []string{"sender", "reconciler"}
	// new: no row yet, the sender's first attempt.
	states   = []string{"new", "pending-live", "pending-stale", "released", "released-backoff", "uncertain", "sent", "failed", "abandoned"}
	caps     = []string{"unconfigured", "none", "idempotent", "lookup", "both"}
	policies = []string{"resend", "resend-if-idempotent", "abandon"}
	settles  = []string{"settling", "settled"}
	ages     = []string{"young", "old"}
	tries    = []string{"few", "many"} // attempts that may have reached the provider vs MaxAttempts
	lookups  = []string{"not_asked", "accepted", "rejected", "no_record", "failed", "unproven"}
	// renders: the row's pinned message renders; it cannot be rendered
	// (its version is gone); the row holds no message at all.
	renders = []string{"ok", "unrenderable", "no_message"}
	// times: the caller has time for a lookup and a send, or less than
	// TakeOverBudget left (Input.NoTime).
	times = []string{"enough", "short"}
	// validities: the message has no validity, or its validity has passed
	// (ledger.Entry.ValidUntil); a validity ahead decides as none does
	// (TestValidityAhead).
	validities = []string{"none", "expired"}
	// healths: the provider answers; every provider that may take the
	// send is known down (Input.ProviderDown); its send rate is spent
	// (Input.Paced).
	healths = []string{"up", "down", "paced"}
)

// rule is one line of the decision table: "*" matches anything, a value
// list "a|b" any of them. The first matching rule decides.
type rule struct {
	caller, state, caps, policy, settle, age, tries, lookup, render, time, validity, health string
	want                                                                                    Action
}

// table is the decision, in order. It is the documentation the package
// doc summarises; TestTable checks decide.Of against it over every
// combination of the dimensions above.
var table = []rule{
	// caller      state                        caps                    policy    settle     age    tries   lookup   render   time   validity   health   want
	// A new message (the sender, before its first claim).
	{"*", "new", "*", "*", "*", "*", "*", "*", "*", "*", "expired", "*", Expire},
	{"*", "new", "*", "*", "*", "*", "*", "*", "unrenderable|no_message", "*", "*", "*", MarkFailed},
	{"*", "new", "unconfigured", "*", "*", "*", "*", "*", "*", "*", "*", "*", Wait},
	{"*", "new", "*", "*", "*", "*", "*", "*", "*", "*", "*", "*", Send},
	{"*", "sent|failed|abandoned", "*", "*", "*", "*", "*", "*", "*", "*", "*", "*", Acknowledge},
	{"*", "pending-live", "*", "*", "*", "*", "*", "*", "*", "*", "*", "*", Wait},
	// The fast path: an UNCERTAIN row whose provider drops repeats is
	// the sender's next receive's to repeat; every other is handed off.
	{"sender", "uncertain", "unconfigured|none|lookup", "*", "*", "*", "*", "*", "*", "*", "*", "*", HandOff},
	{"sender", "uncertain", "*", "*", "*", "*", "*", "*", "unrenderable|no_message", "*", "*", "*", HandOff},
	{"sender", "uncertain", "*", "*", "*", "*", "*", "*", "*", "*", "expired", "*", HandOff},
	// Past its validity a message is never sent: a released row sent
	// nothing, so it ends FAILED (expired) at once.
	{"*", "released|released-backoff", "*", "*", "*", "*", "*", "*", "*", "*", "expired", "*", Expire},
	{"reconciler", "released-backoff", "*", "*", "*", "*", "*", "*", "*", "*", "*", "*", Wait},
	{"reconciler", "*", "*", "*", "*", "old", "*", "*", "*", "*", "*", "*", Abandon},
	// A message the row pins that cannot be rendered: FAILED when nothing
	// can have been sent; otherwise it waits (a stale first claim is
	// marked uncertain by the sender, so the reconciler sees it).
	{"*", "released|released-backoff", "*", "*", "*", "*", "*", "*", "unrenderable|no_message", "*", "*", "*", MarkFailed},
	{"*", "*", "*", "*", "*", "*", "*", "*", "no_message", "*", "*", "*", MarkFailed},
	{"sender", "pending-stale", "*", "*", "*", "*", "few", "*", "unrenderable", "*", "*", "*", MarkUncertain},
	{"*", "*", "*", "*", "*", "*", "*", "*", "unrenderable", "*", "*", "*", Wait},
	{"sender", "released|released-backoff", "unconfigured", "*", "*", "*", "*", "*", "*", "*", "*", "*", Wait},
	{"reconciler", "released", "unconfigured", "*", "*", "*", "*", "*", "*", "*", "*", "*", Postpone},
	// A send that could not go (the provider is known down, or its rate
	// is spent) waits, without a takeover.
	{"*", "released|released-backoff", "*", "*", "*", "*", "*", "*", "*", "*", "*", "down|paced", Wait},
	{"*", "released|released-backoff", "*", "*", "*", "*", "*", "*", "*", "*", "*", "*", Send},
	{"sender", "pending-stale", "unconfigured", "*", "*", "*", "few", "*", "*", "*", "*", "*", MarkUncertain},
	{"*", "*", "unconfigured", "*", "*", "*", "*", "*", "*", "*", "*", "*", Wait},
	// The previous attempt may have reached the provider.
	{"sender", "pending-stale", "lookup|both", "*", "*", "*", "few", "not_asked", "*", "short", "*", "*", MarkUncertain},
	{"*", "*", "lookup|both", "*", "*", "*", "*", "not_asked", "*", "short", "*", "*", Wait},
	{"*", "*", "lookup|both", "*", "*", "*", "*", "not_asked", "*", "*", "*", "*", LookUp},
	{"*", "*", "lookup|both", "*", "*", "*", "*", "accepted", "*", "*", "*", "*", MarkSent},
	{"*", "*", "lookup|both", "*", "*", "*", "*", "rejected", "*", "*", "*", "*", MarkFailed},
	// An expired message whose earlier attempt may have been sent is
	// still looked up, so the ledger knows what happened; never resent.
	{"*", "*", "lookup|both", "*", "settled", "*", "*", "no_record", "*", "*", "expired", "*", Expire},
	{"sender", "pending-stale", "lookup|both", "*", "*", "*", "few", "no_record|failed", "*", "*", "expired", "*", MarkUncertain},
	{"*", "*", "lookup|both", "*", "*", "*", "*", "no_record|failed", "*", "*", "expired", "*", Wait},
	{"sender", "*", "*", "*", "*", "*", "*", "*", "*", "*", "expired", "*", MarkUncertain},
	{"reconciler", "*", "*", "*", "*", "*", "*", "*", "*", "*", "expired", "*", Abandon},
	{"sender", "pending-stale", "both|idempotent", "*", "*", "*", "few", "*", "*", "*", "*", "down|paced", MarkUncertain},
	{"*", "*", "both|idempotent", "*", "*", "*", "*", "*", "*", "*", "*", "down|paced", Wait},
	{"*", "*", "both", "*", "*", "*", "*", "*", "*", "*", "*", "*", Send},
	{"sender", "pending-stale", "lookup", "*", "settled", "*", "few", "no_record", "*", "*", "*", "down|paced", MarkUncertain},
	{"*", "*", "lookup", "*", "settled", "*", "*", "no_record", "*", "*", "*", "down|paced", Wait},
	{"*", "*", "lookup", "*", "settled", "*", "*", "no_record", "*", "*", "*", "*", Send},
	{"sender", "pending-stale", "lookup", "*", "*", "*", "few", "no_record|failed", "*", "*", "*", "*", MarkUncertain},
	{"*", "*", "lookup", "*", "*", "*", "*", "no_record|failed", "*", "*", "*", "*", Wait},
	// An unproven lookup (a content match) proves nothing: as if the
	// provider could not be asked.
	{"*", "*", "idempotent", "*", "*", "*", "*", "*", "*", "*", "*", "*", Send},
	{"sender", "*", "none|lookup", "*", "*", "*", "*", "*", "*", "*", "*", "*", MarkUncertain},
	{"reconciler", "*", "none|lookup", "resend", "*", "*", "many", "*", "*", "*", "*", "*", Abandon},
	{"reconciler", "*", "none|lookup", "resend", "*", "*", "*", "*", "*", "*", "*", "down|paced", Wait},
	{"reconciler", "*", "none|lookup", "resend", "*", "*", "*", "*", "*", "*", "*", "*", Send},
	{"reconciler", "*", "none|lookup", "*", "*", "*", "*", "*", "*", "*", "*", "*", Abandon},
}

func match(pattern, v string) bool {
	if pattern == "*" {
		return true
	}
	for _, p := range strings.Split(pattern, "|") {
		if p == v {
			return true
		}
	}
	return false
}

func (r rule) matches(c combo) bool {
	return match(r.caller, c.caller) && match(r.state, c.state) && match(r.caps, c.caps) && match(r.policy, c.policy) &&
		match(r.settle, c.settle) && match(r.age, c.age) && match(r.tries, c.tries) && match(r.lookup, c.lookup) &&
		match(r.render, c.render) && match(r.time, c.time) && match(r.validity, c.validity) && match(r.health, c.health)
}

type combo struct{ caller, state, caps, policy, settle, age, tries, lookup, render, time, validity, health string }

func (c combo) String() string {
	return fmt.Sprintf("%s/%s/%s/%s/%s/%s/%s/%s/%s/%s/%s/%s", c.caller, c.state, c.caps, c.policy, c.settle, c.age, c.tries, c.lookup, c.render, c.time, c.validity, c.health)
}

var now = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

const (
	settle      = 2 * time.Minute
	maxAge      = 72 * time.Hour
	maxAttempts = 3
)

// input builds the decision's input for a combination.
func (c combo) input() Input {
	in := Input{Now: now, Settle: settle, MaxAge: maxAge, MaxAttempts: maxAttempts, Policy: Policy(c.policy), Configured: c.caps != "unconfigured", NoTime: c.time == "short",
		ProviderDown: c.health == "down", Paced: c.health == "paced"}
	switch c.caller {
	case "sender":
		in.Caller = Sender
	default:
		in.Caller = Reconciler
	}
	switch c.caps {
	case "idempotent":
		in.Caps = provider.Capabilities{IdempotentSends: true}
	case "lookup":
		in.Caps = provider.Capabilities{LookupByReference: true}
	case "both":
		in.Caps = provider.Capabilities{IdempotentSends: true, LookupByReference: true}
	}
	r := ledger.Record{Entry: ledger.Entry{Key: "v1_k", Channel: "sms", Class: "transactional", Provider: "twilio", Template: "t", TemplateVersion: 2}, ClaimID: "c", Attempts: 1}
	switch c.render {
	case "unrenderable":
		in.Unrenderable = "version 2 is gone"
	case "no_message":
		r.TemplateVersion = 0
		in.Unrenderable = "the row holds no message"
	}
	r.CreatedAt = now.Add(-time.Hour)
	if c.age == "old" {
		r.CreatedAt = now.Add(-maxAge)
	}
	r.AttemptedAt = now.Add(-time.Minute)
	if c.settle == "settled" {
		r.AttemptedAt = now.Add(-settle)
	}
	if c.validity == "expired" {
		r.ValidUntil = now.Add(-time.Millisecond)
	}
	switch c.state {
	case "new":
		// No row yet: the entry the claim would write.
		r = ledger.Record{Entry: r.Entry}
	case "pending-live":
		r.State, r.LeaseUntil = ledger.StatePending, now.Add(time.Second)
	case "pending-stale":
		r.State, r.LeaseUntil = ledger.StatePending, now.Add(-time.Second)
	case "released", "released-backoff":
		r.State, r.LeaseUntil, r.Released, r.Releases, r.RetryAt = ledger.StatePending, r.AttemptedAt, true, 1, now
		if c.state == "released-backoff" {
			r.RetryAt = now.Add(time.Minute)
		}
	case "uncertain":
		r.State, r.UpdatedAt = ledger.StateUncertain, r.AttemptedAt
	case "sent":
		r.State = ledger.StateSent
	case "failed":
		r.State = ledger.StateFailed
	case "abandoned":
		r.State = ledger.StateAbandoned
	}
	if c.tries == "many" {
		// maxAttempts attempts that may have reached the provider, plus
		// released ones that do not count.
		r.Attempts = maxAttempts + r.Releases
	}
	for i, name := range lookups {
		if name == c.lookup {
			in.Answer = Answer(i)
		}
	}
	in.Row = r
	return in
}

func combos() []combo {
	var out []combo
	for _, caller := range callers {
		for _, state := range states {
			for _, cp := range caps {
				for _, policy := range policies {
					for _, st := range settles {
						for _, age := range ages {
							for _, tr := range tries {
								for _, lk := range lookups {
									for _, rd := range renders {
										for _, tm := range times {
											for _, v := range validities {
												for _, h := range healths {
													out = append(out, combo{caller, state, cp, policy, st, age, tr, lk, rd, tm, v, h})
												}
											}
										}
									}
								}
							}
						}
					}
				}
			}
		}
	}
	return out
}

// TestTable checks Of against the decision table over every caller ×
// state × released × capability × class policy × settle × age × attempts ×
// lookup combination, and that every rule of the table decides at least
// one of them.
func TestTable(t *testing.T) {
	t.Parallel()
	used := make([]int, len(table))
	all := combos()
	for _, c := range all {
		want := Action(0)
		for i, r := range table {
			if r.matches(c) {
				want = r.want
				used[i]++
				break
			}
		}
		if want == 0 {
			t.Fatalf("%s: no rule of the table matches", c)
		}
		in := c.input()
		got := Of(in)
		if got.Action != want {
			t.Errorf("%s: Of = %s (%s), want %s", c, got.Action, got.Reason, want)
		}
		checkValidity(t, c, in, got)
		if got.Reason == "" {
			t.Errorf("%s: Of gave %s without a reason", c, got.Action)
		}
		if got.Action == Wait && got.Cause == CauseNone {
			t.Errorf("%s: Of waits without a Cause (%s)", c, got.Reason)
		}
	}
	for i, n := range used {
		if n == 0 {
			t.Errorf("rule %d (%+v) decides no combination", i, table[i])
		}
	}
	t.Logf("%d combinations, %d rules", len(all), len(table))
}

// TestSenderNeverGivesUp: the sender acts on a real delivery; giving up
// (Abandon) and postponing are the reconciler's alone.
func TestSenderNeverGivesUp(t *testing.T) {
	t.Parallel()
	for _, c := range combos() {
		if c.caller != "sender" {
			continue
		}
		if a := Of(c.input()).Action; a == Abandon || a == Postpone {
			t.Errorf("%s: the sender decided %s", c, a)
		}
	}
}

// TestReleasedNeverAbandonedByAttempts (defect 2): released attempts sent
// nothing and never count toward giving up, however many there are; only
// the maximum age abandons a released row.
func TestReleasedNeverAbandonedByAttempts(t *testing.T) {
	t.Parallel()
	r := ledger.Record{Entry: ledger.Entry{Key: "v1_k", Channel: "sms", Class: "marketing"}, State: ledger.StatePending,
		Released: true, Attempts: 50, Releases: 50, CreatedAt: now.Add(-time.Hour), LeaseUntil: now.Add(-time.Minute), RetryAt: now}
	in := Input{Caller: Reconciler, Row: r, Now: now, Configured: true, Policy: PolicyAbandon, Settle: settle, MaxAge: maxAge, MaxAttempts: 5}
	sendsUntilMaxAge(t, "50 released attempts", in)
}

// TestSettledNoRecordNeverCountsTowardGivingUp (chaos seed 1, http lane,
// email through a provider that can be asked but ignores the key): a 5xx
// outage makes every attempt ambiguous, and each reconciler run that finds
// no record after the settle time resends. Those attempts provably sent
// nothing (the lookup covers them all, from LookupStart), so they must not
// count toward the attempt limit: the row is resent, never abandoned,
// until the maximum age.
func TestSettledNoRecordNeverCountsTowardGivingUp(t *testing.T) {
	t.Parallel()
	r := ledger.Record{Entry: ledger.Entry{Key: "v1_k", Channel: "email", Class: "transactional"}, State: ledger.StateUncertain,
		Attempts: 50, CreatedAt: now.Add(-time.Hour), AttemptedAt: now.Add(-settle), UpdatedAt: now.Add(-settle)}
	in := Input{Caller: Reconciler, Row: r, Now: now, Configured: true, Caps: provider.Capabilities{LookupByReference: true},
		Policy: PolicyAbandon, Settle: settle, MaxAge: maxAge, MaxAttempts: 5, Answer: NoRecord}
	sendsUntilMaxAge(t, "50 attempts a settled lookup found no record of", in)
}

// sendsUntilMaxAge fails t unless in (what) decides Send, and Abandon by
// age once its row reaches the maximum age.
func sendsUntilMaxAge(t *testing.T, what string, in Input) {
	t.Helper()
	if d := Of(in); d.Action != Send {
		t.Fatalf("%s: Of = %s (%s), want send", what, d.Action, d.Reason)
	}
	in.Row.CreatedAt = now.Add(-maxAge)
	if d := Of(in); d.Action != Abandon || !strings.Contains(d.Reason, "maximum age") {
		t.Fatalf("%s, at the maximum age: Of = %s (%s), want abandon by age", what, d.Action, d.Reason)
	}
}

func TestCheckClaimTimeout(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		claim, provider time.Duration
		ok              bool
	}{
		{60 * time.Second, 5 * time.Second, true},
		{15 * time.Second, 5 * time.Second, true},
		{14 * time.Second, 5 * time.Second, false},
		{10 * time.Second, 5 * time.Second, false}, // one call + margin: a takeover's lookup and send do not fit
		{60 * time.Second, 30 * time.Second, false},
		{65 * time.Second, 30 * time.Second, true},
		{time.Minute, 0, false},
	} {
		if err := CheckClaimTimeout(tc.claim, tc.provider); (err == nil) != tc.ok {
			t.Errorf("CheckClaimTimeout(%s, %s) = %v, want ok=%v", tc.claim, tc.provider, err, tc.ok)
		}
	}
	if got, want := TakeOverBudget(5*time.Second), 15*time.Second; got != want {
		t.Errorf("TakeOverBudget(5s) = %s, want %s", got, want)
	}
	if got, want := SendBudget(5*time.Second), 10*time.Second; got != want {
		t.Errorf("SendBudget(5s) = %s, want %s", got, want)
	}
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	want := []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 16 * time.Minute, 30 * time.Minute, 30 * time.Minute}
	for i, w := range want {
		if got := RetryAfter(i + 1); got != w {
			t.Errorf("RetryAfter(%d) = %s, want %s", i+1, got, w)
		}
	}
	if got := RetryAfter(1000); got != RetryCap {
		t.Errorf("RetryAfter(1000) = %s, want the cap %s", got, RetryCap)
	}
	if got := RetryAfter(0); got != RetryBase {
		t.Errorf("RetryAfter(0) = %s, want %s", got, RetryBase)
	}
}

// TestBackoff: released rows back off from the configured base, doubling
// per attempt, capped; RetryAfter is Backoff from RetryBase.
func TestBackoff(t *testing.T) {
	for _, tc := range []struct {
		base    time.Duration
		attempt int
		want    time.Duration
	}{
		{time.Second, 1, time.Second},
		{time.Second, 3, 4 * time.Second},
		{time.Minute, 10, RetryCap},
	} {
		if got := Backoff(tc.base, tc.attempt); got != tc.want {
			t.Errorf("Backoff(%s, %d) = %s, want %s", tc.base, tc.attempt, got, tc.want)
		}
	}
	if got, want := RetryAfter(2), Backoff(RetryBase, 2); got != want {
		t.Errorf("RetryAfter(2) = %s, want %s", got, want)
	}
}

// TestRetryDelay: a release because the provider is down or paced waits
// the base, however many attempts the row has (an outage's rows are due
// again within the base of the recovery); any other release backs off
// exponentially.
func TestRetryDelay(t *testing.T) {
	t.Parallel()
	for _, cause := range []Cause{CauseProviderDown, CausePaced} {
		for _, attempt := range []int{1, 5, 12} {
			if got := RetryDelay(time.Minute, attempt, cause); got != time.Minute {
				t.Errorf("RetryDelay(1m, %d, %s) = %s, want the base 1m", attempt, cause, got)
			}
		}
	}
	if got := RetryDelay(time.Hour, 1, CauseProviderDown); got != RetryCap {
		t.Errorf("RetryDelay(1h, 1, provider_down) = %s, want the cap %s", got, RetryCap)
	}
	for _, attempt := range []int{1, 5, 12} {
		if got, want := RetryDelay(time.Minute, attempt, CauseNone), Backoff(time.Minute, attempt); got != want {
			t.Errorf("RetryDelay(1m, %d, none) = %s, want Backoff %s", attempt, got, want)
		}
	}
}

// checkValidity checks, for combination c with input in that Of decided
// got: past its validity a message is never sent, by either caller,
// whatever else holds, and a row that ends final because of it says so
// in its reason (ReasonExpired); a validity not passed yet (ahead, or
// exactly now: valid up to and including its ValidUntil) decides as none
// does (the table's validity dimension is none or expired).
func checkValidity(t *testing.T, c combo, in Input, got Decision) {
	t.Helper()
	switch c.validity {
	case "expired":
		if got.Action == Send {
			t.Fatalf("%s: an expired message was sent (%s)", c, got.Reason)
		}
		if got.Action == Expire && !IsExpired(got.Reason) {
			t.Errorf("%s: expire with reason %q", c, got.Reason)
		}
	case "none":
		for _, v := range []time.Time{now.Add(time.Millisecond), now} {
			in.Row.ValidUntil = v
			if ahead := Of(in); ahead != got {
				t.Fatalf("%s: valid until %v: Of = %v, want %v as without a validity", c, v, ahead, got)
			}
		}
	}
}

func TestIsExpired(t *testing.T) {
	t.Parallel()
	if !IsExpired("expired") || !IsExpired("expired: valid until x") || IsExpired("expiredness") || IsExpired("not expired") {
		t.Error("IsExpired misjudges a reason")
	}
}

func TestParseValidity(t *testing.T) {
	t.Parallel()
	got, err := ParseValidity(" otp=10m, transactional=24h ,")
	if err != nil || len(got) != 2 || got["otp"] != 10*time.Minute || got["transactional"] != 24*time.Hour {
		t.Fatalf("ParseValidity = %v, %v", got, err)
	}
	if got, err := ParseValidity(""); err != nil || len(got) != 0 {
		t.Errorf("ParseValidity(\"\") = %v, %v; want none", got, err)
	}
	for _, bad := range []string{"otp", "otp=", "otp=10", "otp=-1m", "otp=0s", "=10m", "otp=10m,otp=5m"} {
		if _, err := ParseValidity(bad); err == nil {
			t.Errorf("ParseValidity(%q) accepted", bad)
		}
	}
}

func TestValidUntil(t *testing.T) {
	t.Parallel()
	exp := now.Add(time.Hour)
	for _, tc := range []struct {
		expires time.Time
		def     time.Duration
		want    time.Time
	}{
		{time.Time{}, 0, time.Time{}},
		{exp, 0, exp},
		{time.Time{}, 10 * time.Minute, now.Add(10 * time.Minute)},
		{exp, 10 * time.Minute, now.Add(10 * time.Minute)},
		{exp, 2 * time.Hour, exp},
	} {
		if got := ValidUntil(tc.expires, now, tc.def); !got.Equal(tc.want) {
			t.Errorf("ValidUntil(%v, now, %s) = %v, want %v", tc.expires, tc.def, got, tc.want)
		}
	}
}
