package reconcile

import "testing"

// TestTune: the template's defaults (10 workers, 4 rows at once, units
// of 25, a run a minute) tuned to a provider's rate: the concurrency
// that keeps it busy at 200 ms a row, units of four rounds of it, and
// two minutes of its rate handed out; capped at 300 rows at once (15,000
// rows a second: DynamoDB's limits). An unpaced provider keeps the
// defaults.
func TestTune(t *testing.T) {
	t.Parallel()
	r := setup(t).reconciler(t, nil, nil)
	for _, tc := range []struct {
		rate int
		want Tuning
	}{
		{0, Tuning{Concurrency: 4, UnitSize: 25}},
		{100, Tuning{Rate: 100, Concurrency: 4, UnitSize: 25, Rows: 12000}},
		{1500, Tuning{Rate: 1500, Concurrency: 30, UnitSize: 120, Rows: 180000}},
		{5000, Tuning{Rate: 5000, Concurrency: 100, UnitSize: 400, Rows: 600000}},
		{15000, Tuning{Rate: 15000, Concurrency: 300, UnitSize: 1200, Rows: 1800000}},
		{20000, Tuning{Rate: 15000, Concurrency: 300, UnitSize: 1200, Rows: 1800000}},
	} {
		if got := Tune(r.cfg, tc.rate); got != tc.want {
			t.Errorf("Tune(%d) = %+v, want %+v", tc.rate, got, tc.want)
		}
	}
}
