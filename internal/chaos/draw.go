package chaos

import (
	"context"
	"maps"
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

// drawer decides each send's fault for one counterpart other than the
// HTTP simulator, which embeds it for the Counterpart methods about
// faults (Plan, SetFaults, Faulted) and Sent: planned rejections and
// slow answers per address, the fault mode, and random faults while
// they are on. It counts what it handed out, and the recipients the
// counterpart reported it took (took).
type drawer struct {
	rates SendFaults
	mode  atomic.Int32 // a faultMode

	mu       sync.Mutex
	rng      *rand.Rand
	reject   map[string]bool
	slow     map[string]time.Duration
	counts   map[string]int // by faultNames
	accepted map[string]bool
}

func newDrawer(rates SendFaults, seed uint64) *drawer {
	return &drawer{rates: rates, rng: rand.New(rand.NewPCG(seed, seed^0xd7a3)), reject: map[string]bool{},
		slow: map[string]time.Duration{}, counts: map[string]int{}, accepted: map[string]bool{}}
}

// draw returns the fault for one send to addr.
func (d *drawer) draw(addr string) (faultKind, time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	k, delay := d.pick(addr)
	if k != fkNone {
		d.counts[faultNames[k]]++
	}
	return k, delay
}

func (d *drawer) pick(addr string) (faultKind, time.Duration) {
	switch mode := faultMode(d.mode.Load()); {
	case d.reject[addr]:
		return fkReject, 0
	case mode == outage:
		return fkOutage, 0
	case mode == faultsOff:
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

// Intn draws from the drawer's RNG (for counterparts that pick among
// variants of a fault).
func (d *drawer) Intn(n int) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.rng.IntN(n)
}

// took records that the counterpart accepted a send to addr.
func (d *drawer) took(addr string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.accepted[addr] = true
}

// Plan makes every send of a planned permanent rejection rejected, and a
// slow message's first send (while faults are on) answered after slow.
func (d *drawer) Plan(m localpipeline.Message, slow time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case m.WantFailed:
		d.reject[m.Address] = true
	case slow > 0:
		d.slow[m.Address] = slow
	}
}

func (d *drawer) SetFaults(m faultMode) { d.mode.Store(int32(m)) }

// Faulted returns how many of each fault were handed out, by name.
func (d *drawer) Faulted() map[string]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return maps.Clone(d.counts)
}

// Sent counts the recipients the counterpart took a send to, as it saw
// it (its own record, read by Delivered, is the ground truth).
func (d *drawer) Sent() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.accepted)
}

func (d *drawer) Attach(*localpipeline.Pipeline) {}
func (d *drawer) Quiesce(context.Context)        {}
