package opstate_test

import (
	"context"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/opstate"
	"github.com/sendonce/sendonce/internal/testenv"
)

// TestStore: against DynamoDB Local, a provider's state is read back
// while it lasts, a later write never shortens it, a state that is over
// is not read, and the last reconcile run is the latest written.
func TestStore(t *testing.T) {
	t.Parallel()
	db := testenv.DynamoDB(t)
	table := testenv.NewTable(t, db)
	s := opstate.Store{DB: db, Table: table}
	ctx, now := t.Context(), time.Now()

	if st, err := opstate.Read(ctx, db, table, now); err != nil || st.Reconcile != nil || len(st.Providers) != 0 {
		t.Fatalf("empty table: %+v, %v; want nothing", st, err)
	}
	later := now.Add(2 * time.Minute).Truncate(time.Second)
	for _, w := range []struct {
		provider, state string
		until           time.Time
	}{
		{"twilio", opstate.Down, later},
		{"twilio", opstate.Down, now.Add(time.Minute)}, // never shortens
		{"sns", opstate.Paused, now.Add(time.Minute)},
		{"http", opstate.Down, now.Add(-time.Second)}, // over
	} {
		if err := s.ProviderState(ctx, w.provider, w.state, w.until); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.ReconcileRun(ctx, now.Add(-time.Minute), map[string]int{"found": 1}); err != nil {
		t.Fatal(err)
	}
	if err := s.ReconcileRun(ctx, now, map[string]int{"found": 2}); err != nil {
		t.Fatal(err)
	}
	st, err := opstate.Read(ctx, db, table, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Providers) != 2 || st.Providers[0].Provider != "sns" || st.Providers[0].State != opstate.Paused ||
		st.Providers[1].Provider != "twilio" || !st.Providers[1].Until.Equal(later) {
		t.Errorf("providers %+v, want sns paused and twilio down until %s", st.Providers, later)
	}
	if st.Reconcile == nil || !st.Reconcile.At.Equal(now.Truncate(time.Millisecond)) || string(st.Reconcile.Summary) != `{"found":2}` {
		t.Errorf("reconcile %+v, want the run at %s", st.Reconcile, now)
	}
}

// providerStates is what the reconciler and dispatch use of the
// providers' item: Store on DynamoDB, Memory in the simulator and unit
// tests.
type providerStates interface {
	ProviderState(ctx context.Context, provider, state string, until time.Time) error
	Providers(ctx context.Context) (map[string]opstate.Provider, error)
}

// TestProvidersConformance: Store (on DynamoDB Local) and Memory answer
// the same writes alike: nothing before any write; each provider's down
// and up states to the second, whether or not they have passed; a later
// write never shortens a state; a paused provider is not among them.
func TestProvidersConformance(t *testing.T) {
	t.Parallel()
	for name, open := range map[string]func(t *testing.T) providerStates{
		"DynamoDB": func(t *testing.T) providerStates {
			db := testenv.DynamoDB(t)
			return opstate.Store{DB: db, Table: testenv.NewTable(t, db)}
		},
		"Memory": func(*testing.T) providerStates { return &opstate.Memory{} },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, ctx := open(t), t.Context()
			if ps, err := s.Providers(ctx); err != nil || len(ps) != 0 {
				t.Fatalf("before any write: %v, %v; want none", ps, err)
			}
			now := time.Date(2026, 12, 6, 14, 0, 0, 500_000_000, time.UTC)
			sec := func(d time.Duration) time.Time { return now.Add(d).Truncate(time.Second) }
			for _, w := range []struct {
				provider, state string
				until           time.Time
			}{
				{"twilio", opstate.Down, now.Add(2 * time.Minute)},
				{"twilio", opstate.Down, now.Add(time.Minute)}, // never shortens
				{"twilio", opstate.Up, now.Add(-time.Hour)},
				{"twilio", opstate.Up, now}, // a later recovery
				{"sns", opstate.Paused, now.Add(time.Minute)},
				{"http", opstate.Down, now.Add(-time.Minute)}, // over, still read
			} {
				if err := s.ProviderState(ctx, w.provider, w.state, w.until); err != nil {
					t.Fatal(err)
				}
			}
			ps, err := s.Providers(ctx)
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]opstate.Provider{
				"twilio": {DownUntil: sec(2 * time.Minute), UpAt: sec(0)},
				"http":   {DownUntil: sec(-time.Minute)},
			}
			if len(ps) != len(want) {
				t.Errorf("providers %v, want %v", ps, want)
			}
			for p, w := range want {
				if got := ps[p]; !got.DownUntil.Equal(w.DownUntil) || !got.UpAt.Equal(w.UpAt) {
					t.Errorf("%s: %+v, want %+v", p, got, w)
				}
			}
		})
	}
}
