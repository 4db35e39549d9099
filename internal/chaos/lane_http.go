package chaos

import (
	"context"
	"net/http"
	"time"

	"github.com/sendonce/sendonce/internal/localpipeline"
	"github.com/sendonce/sendonce/internal/provider/registry"
	"github.com/sendonce/sendonce/internal/provider/simulator"
)

// httpLane is the generic HTTP adapter against the pipeline's provider
// simulator. The simulator ignores Idempotency-Key, as an in-house
// gateway may (simulator.Options.IdempotencyDisabled, set by startLane),
// and the adapter is told so: it settles every ambiguous send by lookup,
// and a repeat it sends shows in the simulator's record.
type httpLane struct {
	o   Options
	sim *simulator.Simulator
}

func newHTTPLane(_ context.Context, o Options, _ uint64) (Counterpart, error) {
	return &httpLane{o: o}, nil
}

// Env keeps the pipeline's HTTP provider (its simulator) for both
// channels.
func (l *httpLane) Env() map[string]string {
	return map[string]string{registry.EnvHTTPIdempotent: "false"}
}

func (l *httpLane) Attach(p *localpipeline.Pipeline) { l.sim = p.Simulator() }

func (l *httpLane) Plan(m localpipeline.Message, slow time.Duration) {
	if m.Fault.Kind != "" {
		l.sim.AddFault(m.Fault)
	} else if slow > 0 {
		l.sim.AddFault(simulator.Fault{Kind: simulator.FaultLatency, Delay: slow, Reference: m.Key, Count: 1})
	}
}

func (l *httpLane) SetFaults(m faultMode) {
	switch m {
	case faultsOn:
		_ = l.sim.SetRandom(l.o.ProviderFaults)
	case outage:
		_ = l.sim.SetRandom(simulator.RandomFaults{StatusRate: 1, Statuses: []int{http.StatusTooManyRequests, http.StatusServiceUnavailable}})
	default:
		l.sim.ClearFaults()
		l.sim.SetLatency(0, 0)
	}
}

// Delivered counts, per key, the messages the simulator accepted, with
// the delivery status of each key's message.
func (l *httpLane) Delivered(context.Context, localpipeline.Workload) (map[string]int, map[string]string, error) {
	count, status := map[string]int{}, map[string]string{}
	for _, m := range l.sim.Messages() {
		count[m.Reference]++
		status[m.Reference] = string(m.Status)
	}
	return count, status, nil
}

func (l *httpLane) Sent() int { return len(l.sim.DeliveredAll()) }

func (l *httpLane) Faulted() map[string]int {
	out := map[string]int{}
	for k, v := range l.sim.Stats().Faults {
		out[string(k)] += v
	}
	return out
}

// Quiesce waits (bounded by ctx and a minute) until the simulator has
// posted every callback.
func (l *httpLane) Quiesce(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	localpipeline.WaitCallbacks(ctx, l.sim, l.o.Callbacks.Duplicates)
}

func (l *httpLane) Close() {}
