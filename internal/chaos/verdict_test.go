package chaos

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/localpipeline"
	"github.com/sendonce/sendonce/internal/templates"
	"github.com/sendonce/sendonce/internal/templates/memtemplates"
	"github.com/sendonce/sendonce/notify"
)

// changedLane returns a twilio-like lane whose template change has put
// every version (2 and 3) into an in-memory store.
func changedLane(t *testing.T) *lane {
	t.Helper()
	ctx := context.Background()
	store := memtemplates.New(memtemplates.Config{})
	if _, err := templates.ImportExamples(ctx, store, "chaos-twilio"); err != nil {
		t.Fatal(err)
	}
	tc := &templateRun{c: orderShippedChange, tenant: "chaos-twilio", store: store}
	if lines := tc.step(ctx, 1, time.Now(), nil); len(lines) != 2 {
		t.Fatalf("step put %v, want versions 2 and 3", lines)
	}
	if put, err := tc.Put(); err != nil || len(put) != 2 || put[0].Version != 2 || put[1].Version != 3 {
		t.Fatalf("put %+v, %v; want versions 2 and 3", put, err)
	}
	return &lane{def: Lane{Name: "twilio"}, tc: tc}
}

// message returns the workload message of an order_shipped SMS for event
// with data.
func message(t *testing.T, event, class string, data map[string]any) localpipeline.Message {
	t.Helper()
	r := notify.Request{TenantID: "chaos-twilio", EventID: event, Channel: notify.ChannelSMS, Template: "order_shipped",
		Class: notify.Class(class), Recipient: notify.Recipient{ID: "user-1", Phone: "+15550001111"}, Data: data}
	body, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return localpipeline.Message{Body: string(body), Valid: true, Key: r.Key(), Channel: "sms", Class: class, Address: r.Address()}
}

// TestJudge: what the lane adds to groundtruth.Judge (whose rules
// groundtruth's TestJudge tables): the provider ids a recording
// counterpart tells to their keys, the FAILED rows a template change
// explains, the texts sent against the versions rows pin, and the lane's
// counts. Each case names the violations it must raise (none for an
// outcome the product may reach) and the counts it must move.
func TestJudge(t *testing.T) {
	t.Parallel()
	l := changedLane(t)
	order := map[string]any{"order_id": "A-1"}
	a, b := message(t, "evt-a", "transactional", order), message(t, "evt-b", "transactional", order)
	otp := message(t, "evt-otp", "otp", order)
	texts := l.tc.texts(request(a))
	v1, v2 := texts[1], texts[2]
	if v1 == "" || v2 == "" || v1 == v2 {
		t.Fatalf("texts %v: want distinct texts of versions 1 and 2", texts)
	}
	if _, ok := texts[3]; ok {
		t.Fatalf("version 3 renders %v: the test needs data it cannot render", order)
	}
	put, _ := l.tc.Put()
	put3 := put[len(put)-1].At
	owner := map[string]string{"SMa": a.Key, "SMb": b.Key}
	idStatus := map[string]string{"SMa": "delivered", "SMb": "undelivered"}
	pinned := func(state ledger.State, version int, id, reason string) ledger.Record {
		r := ledger.Record{State: state, ProviderMessageID: id, Reason: reason}
		r.TemplateVersion = version
		return r
	}
	noEvidence := keyEvidence{}
	resent := keyEvidence{policyResend: true}
	for _, tc := range []struct {
		name       string
		m          localpipeline.Message
		capability Capability
		n          int
		status     string
		rec        ledger.Record
		ev         keyEvidence
		bodies     []string
		at         time.Duration // after version 3's put, when the provider took them
		want       []string
		check      func(t *testing.T, lr LaneReport, cc ClassCount)
	}{
		{name: "SentOnce", m: a, capability: ByContent, n: 1, rec: pinned(ledger.StateSent, 1, "SMa", ""), bodies: []string{v1}},
		{name: "SentWithAnotherMessagesID", m: a, capability: ByContent, rec: pinned(ledger.StateSent, 1, "SMb", ""),
			want: []string{"SENT with another message's id"},
			check: func(t *testing.T, lr LaneReport, _ ClassCount) {
				if lr.Lost != 1 {
					t.Errorf("Lost = %d, want 1: a message marked SENT with another's id was never sent", lr.Lost)
				}
			}},
		{name: "SentWithAnIDNeverIssued", m: a, capability: ByContent, n: 1, rec: pinned(ledger.StateSent, 1, "SMx", ""), bodies: []string{v1},
			want: []string{"SENT with another message's id"}},
		{name: "FailedByAnotherMessagesStatus", m: a, capability: ByContent, rec: pinned(ledger.StateFailed, 1, "SMb", "twilio status undelivered (error 30007)"),
			want: []string{"FAILED by another message's status"}},
		{name: "FailedNeverRejectedPinned", m: a, capability: ByContent, rec: pinned(ledger.StateFailed, 1, "", `render order_shipped for sms: text: map has no entry for key "carrier"`),
			want: []string{"FAILED, never rejected"}},
		{name: "FailedUnrenderableAtFirstClaim", m: a, capability: ByContent, rec: pinned(ledger.StateFailed, 0, "", `map has no entry for key "carrier"`),
			check: func(t *testing.T, lr LaneReport, _ ClassCount) {
				if lr.FailedUnrenderable != 1 {
					t.Errorf("FailedUnrenderable = %d, want 1", lr.FailedUnrenderable)
				}
			}},
		{name: "FailedUnrenderableButEveryVersionRenders", m: message(t, "evt-c", "transactional", map[string]any{"order_id": "A-2", "carrier": "UPS"}),
			capability: ByContent, rec: pinned(ledger.StateFailed, 0, "", "render"), want: []string{"FAILED, never rejected"}},
		{name: "TwiceByOTPPolicy", m: otp, capability: ByContent, n: 2, ev: resent, rec: pinned(ledger.StateSent, 1, "", ""), bodies: []string{v1, v1},
			check: func(t *testing.T, lr LaneReport, cc ClassCount) {
				if lr.TwiceByPolicy != 1 || cc.Duplicates != 1 || lr.PolicySettled != 1 {
					t.Errorf("TwiceByPolicy %d, class duplicates %d, PolicySettled %d; want 1 each", lr.TwiceByPolicy, cc.Duplicates, lr.PolicySettled)
				}
			}},
		{name: "MissByPolicy", m: a, capability: ByContent, rec: pinned(ledger.StateAbandoned, 1, "", "class transactional policy: abandon an ambiguous attempt the provider cannot look up or dedupe"),
			check: func(t *testing.T, lr LaneReport, cc ClassCount) {
				if lr.AbandonedByPolicy != 1 || cc.Misses != 1 || lr.PolicySettled != 1 {
					t.Errorf("AbandonedByPolicy %d, class misses %d, PolicySettled %d; want 1 each", lr.AbandonedByPolicy, cc.Misses, lr.PolicySettled)
				}
			}},
		{name: "SentWithAVersionItDoesNotPin", m: a, capability: ByContent, n: 1, rec: pinned(ledger.StateSent, 1, "SMa", ""), bodies: []string{v2},
			want: []string{"sent with a version it does not pin"},
			check: func(t *testing.T, lr LaneReport, _ ClassCount) {
				if got := lr.Template.Versions[1]; got.Version != 2 || got.Received != 1 {
					t.Errorf("version row %+v, want version 2 received once", got)
				}
			}},
		{name: "StraddledTheChange", m: a, capability: ByContent, n: 1, rec: pinned(ledger.StateSent, 2, "SMa", ""), bodies: []string{v2}, at: time.Minute,
			check: func(t *testing.T, lr LaneReport, _ ClassCount) {
				if lr.Template.Straddled != 1 {
					t.Errorf("Straddled = %d, want 1: version 3 cannot render it, and it was sent with version 2's text after version 3 was live", lr.Template.Straddled)
				}
			}},
		{name: "SentBeforeTheChangeWasLive", m: a, capability: ByContent, n: 1, rec: pinned(ledger.StateSent, 2, "SMa", ""), bodies: []string{v2},
			check: func(t *testing.T, lr LaneReport, _ ClassCount) {
				if lr.Template.Straddled != 0 {
					t.Errorf("Straddled = %d, want 0: sent before version 3 was live", lr.Template.Straddled)
				}
			}},
		{name: "SentWithTwoTexts", m: a, capability: ByContent, n: 2, ev: resent, rec: pinned(ledger.StateSent, 2, "SMa", ""), bodies: []string{v1, v2},
			want: []string{"delivered twice against its class policy", "sent with a version it does not pin", "sent with two texts"}},
		{name: "SentWithATextNoVersionRenders", m: a, capability: ByContent, n: 1, rec: pinned(ledger.StateSent, 1, "SMa", ""), bodies: []string{"Your order A-9 has shipped."},
			want: []string{"sent with a text no version renders"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ev := tc.ev
			if ev == (keyEvidence{}) {
				ev = noEvidence
			}
			lr := LaneReport{Failed: map[string]int{}, NeverAcceptedCauses: map[string]int{}}
			tr := l.templateReport()
			lr.Template = tr
			var cc ClassCount
			var got []string
			l.judge(&lr, &cc, facts{
				m: tc.m, capability: tc.capability, n: tc.n, status: tc.status, rec: tc.rec, state: tc.rec.State,
				evidence: func() map[string]keyEvidence { return map[string]keyEvidence{tc.m.Key: ev} },
				recorded: tc.capability == ByContent, owner: owner, idStatus: idStatus, accepted: accepted(tc.m.Key, tc.bodies, put3.Add(tc.at)),
			}, tr, func(v Violation) { got = append(got, v.Kind) })
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("violations %q, want %q", got, tc.want)
			}
			if tc.check != nil {
				tc.check(t, lr, cc)
			}
		})
	}
}

// TestTemplateChangeTexts: the texts each version renders for a message,
// and the version a FAILED row may have failed by.
func TestTemplateChangeTexts(t *testing.T) {
	t.Parallel()
	l := changedLane(t)
	old := request(message(t, "evt-old", "transactional", map[string]any{"order_id": "A-1"}))
	upgraded := request(message(t, "evt-new", "transactional", map[string]any{"order_id": "A-1", "carrier": "DHL"}))
	want := map[int]string{1: "Your order A-1 has shipped.", 2: "Order A-1 is on its way."}
	if got := l.tc.texts(old); !maps.Equal(got, want) {
		t.Errorf("texts of a message without the carrier = %v, want %v", got, want)
	}
	want[3] = "Order A-1 is on its way with DHL."
	if got := l.tc.texts(upgraded); !maps.Equal(got, want) {
		t.Errorf("texts of a message with the carrier = %v, want %v", got, want)
	}
	otp := notify.Request{TenantID: "chaos-twilio", Channel: notify.ChannelSMS, Template: "otp", Data: map[string]any{"code": "123456"}}
	if got := l.tc.texts(otp); len(got) != 1 || got[1] == "" {
		t.Errorf("texts of an unchanged template = %v, want version 1 only", got)
	}
}

// accepted returns the provider's record of bodies, each taken for key at
// at.
func accepted(key string, bodies []string, at time.Time) []acceptedMessage {
	var out []acceptedMessage
	for _, b := range bodies {
		out = append(out, acceptedMessage{Key: key, Body: b, At: at})
	}
	return out
}

// TestTemplateChangeStep: versions are put as their share of the lane is
// accepted; the last one with the provider throttled from ThrottleLead
// before its put until Throttle after the throttle began.
func TestTemplateChangeStep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := memtemplates.New(memtemplates.Config{})
	if _, err := templates.ImportExamples(ctx, store, "chaos-twilio"); err != nil {
		t.Fatal(err)
	}
	tc := &templateRun{c: orderShippedChange, tenant: "chaos-twilio", store: store}
	var throttled []bool
	throttle := func(on bool) { throttled = append(throttled, on) }
	t0 := time.Now()
	versions := func() []int {
		put, err := tc.Put()
		if err != nil {
			t.Fatal(err)
		}
		var out []int
		for _, p := range put {
			out = append(out, p.Version)
		}
		return out
	}
	for _, s := range []struct {
		accepted  float64
		after     time.Duration
		versions  []int
		throttled []bool
	}{
		{0.1, 0, nil, nil},
		{0.2, time.Second, []int{2}, nil},
		{0.4, 2 * time.Second, []int{2}, nil},
		{0.5, 3 * time.Second, []int{2}, []bool{true}},            // due: throttled first
		{0.6, 12 * time.Second, []int{2}, []bool{true}},           // not yet ThrottleLead into it
		{0.6, 13 * time.Second, []int{2, 3}, []bool{true}},        // put
		{0.7, 22 * time.Second, []int{2, 3}, []bool{true}},        // still throttled
		{0.7, 23 * time.Second, []int{2, 3}, []bool{true, false}}, // Throttle after it began
		{0.9, 40 * time.Second, []int{2, 3}, []bool{true, false}}, // nothing more
	} {
		tc.step(ctx, s.accepted, t0.Add(s.after), throttle)
		if got := versions(); !slices.Equal(got, s.versions) || !slices.Equal(throttled, s.throttled) {
			t.Fatalf("at %.0f%% accepted, %s: versions %v, throttle calls %v; want %v, %v", 100*s.accepted, s.after, got, throttled, s.versions, s.throttled)
		}
	}
}

// TestMissesOthers: a miss counts when every message with its recipient
// and text at the provider is another key's and that key's row holds its
// id; not when one of them is unclaimed, or when there is none.
func TestMissesOthers(t *testing.T) {
	t.Parallel()
	accepted := map[string][]acceptedMessage{
		"b": {{Key: "b", ID: "SMb", To: "+1", Body: "hi"}},
		"c": {{Key: "c", ID: "SMc", To: "+2", Body: "hi"}},
		"d": {{Key: "d", ID: "SMd", To: "+2", Body: "hi"}},
	}
	rowIDs := map[string]string{"b": "SMb", "c": "SMc", "d": ""}
	for _, tc := range []struct {
		name string
		miss missCase
		want int
	}{
		{"OnlyAnotherKeysProvenMessage", missCase{"a", "+1", "hi"}, 1},
		{"OneUnclaimed", missCase{"a", "+2", "hi"}, 0},
		{"OtherText", missCase{"a", "+1", "bye"}, 0},
		{"OtherRecipient", missCase{"a", "+3", "hi"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := missesOthers([]missCase{tc.miss}, rowIDs, accepted); got != tc.want {
				t.Errorf("missesOthers = %d, want %d", got, tc.want)
			}
		})
	}
}
