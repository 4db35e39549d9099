package dispatch_test

import (
	"slices"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/dispatch"
	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/ledger/memledger"
	"github.com/sendonce/sendonce/provider"
	"github.com/sendonce/sendonce/provider/providertest"
)

func names(ps []provider.Adapter) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Name())
	}
	return out
}

// TestCandidates: a row whose attempt may have reached a provider stays
// with it (or with nothing, once the route no longer holds it); a row
// whose every attempt was released may take any provider, starting after
// the one that refused last.
func TestCandidates(t *testing.T) {
	t.Parallel()
	a, b, c := &providertest.Fake{ProviderName: "a"}, &providertest.Fake{ProviderName: "b"}, &providertest.Fake{ProviderName: "c"}
	route := []provider.Adapter{a, b, c}
	row := func(p string, attempts, releases int, released bool) ledger.Record {
		r := ledger.Record{Attempts: attempts, Releases: releases, Released: released}
		r.Provider = p
		return r
	}
	for _, tc := range []struct {
		name  string
		rec   ledger.Record
		route []provider.Adapter
		want  []string
	}{
		{"NewMessage", ledger.Record{}, route, []string{"a", "b", "c"}},
		{"NilSkipped", ledger.Record{}, []provider.Adapter{nil, b}, []string{"b"}},
		{"NoProvider", ledger.Record{}, nil, nil},
		{"MayHaveSentStays", row("b", 1, 0, false), route, []string{"b"}},
		{"MayHaveSentAfterALaterRelease", row("b", 2, 1, true), route, []string{"b"}},
		{"MayHaveSentProviderGone", row("z", 1, 0, false), route, nil},
		{"ReleasedRotates", row("a", 1, 1, true), route, []string{"b", "c", "a"}},
		{"ReleasedByTheLast", row("c", 2, 2, true), route, []string{"a", "b", "c"}},
		{"ReleasedProviderGone", row("z", 1, 1, true), route, []string{"a", "b", "c"}},
		{"NeverReachedAProvider", row("", 1, 0, false), route, []string{"a", "b", "c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := names(dispatch.Candidates(tc.rec, tc.route))
			if !slices.Equal(got, tc.want) {
				t.Errorf("Candidates = %v, want %v", got, tc.want)
			}
			p, ok := dispatch.AttemptAdapter(tc.rec, tc.route...)
			if ok != (len(tc.want) > 0) || ok && p.Name() != tc.want[0] {
				t.Errorf("AttemptAdapter = %v, %t; want the first of %v", p, ok, tc.want)
			}
		})
	}
}

// TestHealth: a provider that failed Threshold times in a row is skipped
// for its cool-down (Pick moves it last), then tried again; an answer
// resets it.
func TestHealth(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	h := &dispatch.Health{Now: func() time.Time { return now }}
	d, err := dispatch.New(dispatch.Dispatcher{Ledger: memledger.New(memledger.Config{}), ProviderTimeout: time.Second, Health: h, ClaimTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	a, b := &providertest.Fake{ProviderName: "a"}, &providertest.Fake{ProviderName: "b"}
	route := []provider.Adapter{a, b}
	pick := func() []string { return names(d.Pick(ledger.Record{}, route)) }
	for range dispatch.DefaultHealthThreshold - 1 {
		h.Record("a", false)
	}
	if got := pick(); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("below the threshold Pick = %v, want [a b]", got)
	}
	h.Record("a", false)
	if got := pick(); !slices.Equal(got, []string{"b", "a"}) {
		t.Errorf("at the threshold Pick = %v, want [b a]", got)
	}
	h.Record("b", false)
	h.Record("b", false)
	h.Record("b", false)
	if got := pick(); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("both cooling down: Pick = %v, want the route's order [a b]", got)
	}
	now = now.Add(dispatch.DefaultHealthCooldown)
	if !h.Healthy("a") {
		t.Error("a still skipped after its cool-down")
	}
	h.Record("a", false) // the probe fails: skipped again at once
	if h.Healthy("a") {
		t.Error("a failed probe did not start another cool-down")
	}
	h.Record("a", true)
	if !h.Healthy("a") {
		t.Error("an answer did not reset a")
	}
	var none *dispatch.Health
	none.Record("a", false)
	if !none.Healthy("a") {
		t.Error("a nil Health skips a provider")
	}
}
