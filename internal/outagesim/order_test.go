package outagesim

import (
	"testing"
	"time"
)

// TestBacklogFirstOffline: the workload of make sim-outage (10 messages
// a second for two hours, the provider down for the first; otp 60 % with
// 10 minutes of validity, transactional 30 % with an hour, marketing 10 %
// with none), laid out evenly, at the three limits of issue 34 (scaled:
// 15, 50 and 150 a second). The product's order (productOrder: the
// urgent messages, then the backlog, then the rest) delivers as many
// messages within their validity as the optimum, and empties the
// outage's backlog sooner than earliest deadline first alone, within the
// goal of 1.1 × the arithmetic bound at 5,000/s (6m44s), which earliest
// deadline first misses (6m48s on this workload).
func TestBacklogFirstOffline(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	recovery, end := start.Add(time.Hour), start.Add(2*time.Hour)
	var msgs []*msg
	for s := range 7200 {
		for k := range 10 {
			at := start.Add(time.Duration(s)*time.Second + time.Duration(k)*100*time.Millisecond)
			m := &msg{arrived: at}
			switch k {
			case 0, 1, 2, 3, 4, 5:
				m.expires = at.Add(10 * time.Minute)
			case 6, 7, 8:
				m.expires = at.Add(time.Hour)
			}
			msgs = append(msgs, m)
		}
	}
	for _, tc := range []struct {
		capacity int
		goal     time.Duration // the drain's goal, where EDF misses it
	}{{15, 0}, {50, 6*time.Minute + 44*time.Second}, {150, 0}} {
		opt := optimum(msgs, start, recovery, end, tc.capacity)
		in, drain := productOrder(msgs, start, recovery, end, tc.capacity, true)
		edfIn, edfDrain := productOrder(msgs, start, recovery, end, tc.capacity, false)
		t.Logf("capacity %d/s: optimum %d; backlog first %d, drain %s; earliest deadline first %d, drain %s", tc.capacity, opt, in, drain, edfIn, edfDrain)
		if in < opt*999/1000 {
			t.Errorf("capacity %d/s: the product's order delivers %d within validity, want the optimum %d", tc.capacity, in, opt)
		}
		if drain < 0 || drain >= edfDrain {
			t.Errorf("capacity %d/s: the product's order drains in %s, want sooner than earliest deadline first's %s", tc.capacity, drain, edfDrain)
		}
		if tc.goal > 0 && (drain > tc.goal || edfDrain <= tc.goal) {
			t.Errorf("capacity %d/s: drains %s (backlog first) and %s (earliest deadline first), want within %s and past it", tc.capacity, drain, edfDrain, tc.goal)
		}
	}
}
