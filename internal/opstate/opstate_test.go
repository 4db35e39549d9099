package opstate_test

import (
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
