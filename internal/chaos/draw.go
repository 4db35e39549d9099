package chaos

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sendonce/sendonce/internal/localpipeline"
)

// SendFaults are the rates at which a counterpart other than the HTTP
// simulator answers one send: each counterpart maps a fault onto its own
// wire (an HTTP status, an SMTP reply, a stalled connection).
type SendFaults struct {
	// Transient: refused before accepting (429/throttling, SMTP 451).
	Transient float64
	// Before: no answer and nothing accepted (a hang until the adapter's
	// timeout).
	Before float64
	// After: accepted, then no answer (for SMTP: a stall after DATA).
	After float64
	// AfterError: accepted, then an error answer (a 5xx, an SMTP 451 to
	// the data): the provider took a message it says it did not.
	AfterError float64
}

// The fault kinds a drawer hands out.
type faultKind int

const (
	fkNone faultKind = iota
	fkTransient
	fkBefore
	fkAfter
	fkAfterError
	fkSlow
	fkReject
	fkOutage
)

var faultNames = map[faultKind]string{
	fkTransient: "refused before accepting (429/throttled/451)", fkBefore: "no answer, nothing accepted",
	fkAfter: "accepted, no answer", fkAfterError: "accepted, then an error answer", fkSlow: "slow answer (0.7-1.3x timeout)",
	fkReject: "permanent rejection", fkOutage: "outage: refused (429/5xx)",
}

// drawer decides each send's fault for one counterpart: planned
// rejections and slow answers per address, an outage switch, and random
// faults while enabled. Counts are what it handed out. A counterpart
// other than the HTTP simulator embeds one: it brings the Counterpart
// methods about faults (Plan, Faults, Outage, Faulted), InFlight (the
// counterpart counts its calls in inFlight), and no-op Attach and
// Quiesce.
type drawer struct {
	rates SendFaults

	enabled, outage atomic.Bool
	inFlight        atomic.Int64

	mu     sync.Mutex
	rng    *rand.Rand
	reject map[string]bool
	slow   map[string]time.Duration
	counts map[faultKind]int
}

func newDrawer(rates SendFaults, seed uint64) *drawer {
	return &drawer{rates: rates, rng: rand.New(rand.NewPCG(seed, seed^0xd7a3)), reject: map[string]bool{}, slow: map[string]time.Duration{}, counts: map[faultKind]int{}}
}

// Reject makes every send to addr a permanent rejection.
func (d *drawer) Reject(addr string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.reject[addr] = true
}

// Slow makes the first send to addr (while enabled) answer after delay.
func (d *drawer) Slow(addr string, delay time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.slow[addr] = delay
}

// draw returns the fault for one send to addr.
func (d *drawer) draw(addr string) (faultKind, time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	k, delay := d.pick(addr)
	if k != fkNone {
		d.counts[k]++
	}
	return k, delay
}

func (d *drawer) pick(addr string) (faultKind, time.Duration) {
	if d.reject[addr] {
		return fkReject, 0
	}
	if d.outage.Load() {
		return fkOutage, 0
	}
	if !d.enabled.Load() {
		return fkNone, 0
	}
	if delay, ok := d.slow[addr]; ok {
		delete(d.slow, addr)
		return fkSlow, delay
	}
	x := d.rng.Float64()
	for _, c := range []struct {
		k    faultKind
		rate float64
	}{{fkTransient, d.rates.Transient}, {fkBefore, d.rates.Before}, {fkAfter, d.rates.After}, {fkAfterError, d.rates.AfterError}} {
		if x < c.rate {
			return c.k, 0
		}
		x -= c.rate
	}
	return fkNone, 0
}

// Counts returns how many of each fault were handed out.
func (d *drawer) Counts() map[faultKind]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[faultKind]int, len(d.counts))
	for k, v := range d.counts {
		out[k] = v
	}
	return out
}

// Intn draws from the drawer's RNG (for counterparts that pick among
// variants of a fault).
func (d *drawer) Intn(n int) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.rng.IntN(n)
}

// Plan applies a message's plan: a planned permanent rejection rejects
// its address; a slow first answer is delayed.
func (d *drawer) Plan(m localpipeline.Message, slow time.Duration) error {
	switch {
	case m.WantFailed:
		d.Reject(m.Address)
	case slow > 0:
		d.Slow(m.Address, slow)
	}
	return nil
}

// Faults turns the random faults on or off.
func (d *drawer) Faults(on bool) { d.enabled.Store(on) }

// Outage turns the outage on or off.
func (d *drawer) Outage(on bool) { d.outage.Store(on) }

// Faulted returns Counts by name.
func (d *drawer) Faulted() map[string]int {
	out := map[string]int{}
	for k, v := range d.Counts() {
		out[faultNames[k]] = v
	}
	return out
}

// InFlight returns the calls being served now.
func (d *drawer) InFlight() int64 { return d.inFlight.Load() }

func (d *drawer) Attach(*localpipeline.Pipeline) error { return nil }
func (d *drawer) Quiesce(context.Context)              {}
