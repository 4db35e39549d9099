package simtest

import (
	"slices"
	"testing"
	"time"
)

// TestQueueCandidates checks the SQS model's receivable messages: a
// standard queue offers every visible message; a FIFO queue offers
// nothing of a group with a message in flight, and nothing behind a
// message of its group that is not receivable yet.
func TestQueueCandidates(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	msgs := func() []*sqsMsg {
		return []*sqsMsg{
			{id: "a1", group: "a", receives: 1, visibleAt: now.Add(time.Minute)}, // in flight
			{id: "a2", group: "a"},
			{id: "b1", group: "b", arrive: now.Add(time.Second)}, // not arrived yet
			{id: "c1", group: "c", receives: 1, visibleAt: now.Add(-time.Second)},
			{id: "c2", group: "c"},
			{id: "d1", group: "d", deleted: true},
			{id: "d2", group: "d"},
		}
	}
	ids := func(ms []*sqsMsg) (out []string) {
		for _, m := range ms {
			out = append(out, m.id)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		fifo bool
		want []string
	}{
		{"Standard", false, []string{"a2", "c1", "c2", "d2"}},
		{"FIFO", true, []string{"c1", "c2", "d2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := &queue{fifo: tc.fifo, msgs: msgs()}
			if got := ids(q.candidates(now)); !slices.Equal(got, tc.want) {
				t.Errorf("candidates = %v, want %v", got, tc.want)
			}
		})
	}
}
