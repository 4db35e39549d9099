package chaos

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/sendonce/sendonce/internal/localpipeline"
	"github.com/sendonce/sendonce/internal/provider/registry"
	"github.com/sendonce/sendonce/internal/provider/simulator"
)

// httpLane is the generic HTTP provider against the provider simulator:
// one simulator that honours Idempotency-Key and, for Options.LookupOnly's
// channel, one that ignores it (the adapter then relies on lookup).
type httpLane struct {
	o      Options
	seed   uint64
	router *Router
	url    string
	stop   func()

	mu       sync.Mutex
	sims     map[string]*simulator.Simulator
	distinct []*simulator.Simulator
	faultsOn bool
}

func newHTTPLane(_ context.Context, o Options, seed uint64) (Counterpart, error) {
	l := &httpLane{o: o, seed: seed, router: NewRouter(), sims: map[string]*simulator.Simulator{}}
	url, stop, err := serve(l.router)
	if err != nil {
		return nil, err
	}
	l.url, l.stop = url, stop
	return l, nil
}

func (l *httpLane) Env() map[string]string {
	env := map[string]string{
		registry.EnvSMSProvider: "http", registry.EnvEmailProvider: "http",
		registry.EnvHTTPURL: l.url,
	}
	if l.o.LookupOnly != "" {
		env[registry.EnvHTTPIdempotent] = "false"
	}
	return env
}

func (l *httpLane) Attach(p *localpipeline.Pipeline) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sims["sms"], l.sims["email"] = p.Simulator(), p.Simulator()
	l.router.Route("sms", p.SimulatorURL())
	l.router.Route("email", p.SimulatorURL())
	if l.o.LookupOnly != "" {
		sim2, url2 := p.NewSimulator(simulator.Options{
			Seed: l.seed, Latency: l.o.Latency, Jitter: l.o.Jitter, Callbacks: l.o.Callbacks, IdempotencyDisabled: true,
		})
		l.sims[l.o.LookupOnly] = sim2
		l.router.Route(l.o.LookupOnly, url2)
	}
	l.distinct = nil
	for _, ch := range []string{"sms", "email"} {
		if s := l.sims[ch]; s != nil && !slices.Contains(l.distinct, s) {
			l.distinct = append(l.distinct, s)
		}
	}
	return nil
}

func (l *httpLane) Plan(m localpipeline.Message, slow time.Duration) error {
	sim := l.sims[m.Channel]
	if m.Fault.Kind != "" {
		sim.AddFault(m.Fault)
	} else if slow > 0 {
		sim.AddFault(simulator.Fault{Kind: simulator.FaultLatency, Delay: slow, Reference: m.Key, Count: 1})
	}
	return nil
}

func (l *httpLane) Faults(on bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.faultsOn = on
	for _, s := range l.distinct {
		if on {
			_ = s.SetRandom(l.o.ProviderFaults)
		} else {
			s.ClearFaults()
			s.SetLatency(0, 0)
		}
	}
}

func (l *httpLane) Outage(on bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.distinct {
		switch {
		case on:
			_ = s.SetRandom(simulator.RandomFaults{StatusRate: 1, Statuses: []int{http.StatusTooManyRequests, http.StatusServiceUnavailable}})
		case l.faultsOn:
			_ = s.SetRandom(l.o.ProviderFaults)
		default:
			_ = s.SetRandom(simulator.RandomFaults{})
		}
	}
}

func (l *httpLane) Delivered(context.Context, localpipeline.Workload) (map[string]int, map[string]string, error) {
	return simDelivered(l.distinct...)
}

// simDelivered counts, per key, the messages the simulators accepted, with
// the delivery status of each key's message.
func simDelivered(sims ...*simulator.Simulator) (map[string]int, map[string]string, error) {
	count, status := map[string]int{}, map[string]string{}
	for _, s := range sims {
		for _, m := range s.Messages() {
			count[m.Reference]++
			status[m.Reference] = string(m.Status)
		}
	}
	return count, status, nil
}

func (l *httpLane) Sent() int {
	n := 0
	for _, s := range l.distinct {
		n += len(s.DeliveredAll())
	}
	return n
}

func (l *httpLane) Faulted() map[string]int {
	out := map[string]int{}
	for _, s := range l.distinct {
		st := s.Stats()
		for k, v := range st.Faults {
			out[string(k)] += v
		}
		out["repeats dropped (Idempotency-Key)"] += st.DuplicatesSuppressed
	}
	return out
}

func (l *httpLane) InFlight() int64 { return l.router.InFlight() }

// Quiesce waits (bounded by ctx and a minute each) until the simulators
// have posted every callback.
func (l *httpLane) Quiesce(ctx context.Context) {
	for _, s := range l.distinct {
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		localpipeline.WaitCallbacks(ctx, s, l.o.Callbacks.Duplicates)
		cancel()
	}
}

func (l *httpLane) Close() { l.stop() }
