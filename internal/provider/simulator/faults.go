package simulator

import (
	"errors"
	"fmt"
	"time"
)

// FaultKind is what an injected fault does to one request.
type FaultKind string

// The fault kinds.
const (
	// FaultStatus answers Fault.Status with an error body and records
	// nothing.
	FaultStatus FaultKind = "status"
	// FaultLatency waits Fault.Delay, then serves the request normally.
	FaultLatency FaultKind = "latency"
	// FaultTimeoutBeforeAccept hangs without recording anything, until the
	// client gives up, Fault.Hang passes (then 504) or the simulator
	// closes.
	FaultTimeoutBeforeAccept FaultKind = "timeout_before_accept"
	// FaultTimeoutAfterAccept accepts and records the message (it is
	// delivered), then hangs like FaultTimeoutBeforeAccept; if the client
	// is still there after Fault.Hang it gets the normal answer, late.
	FaultTimeoutAfterAccept FaultKind = "timeout_after_accept"
	// FaultResetBeforeAccept drops the connection (TCP reset) without
	// recording anything.
	FaultResetBeforeAccept FaultKind = "reset_before_accept"
	// FaultResetAfterAccept accepts and records the message, then drops
	// the connection (TCP reset) instead of answering.
	FaultResetAfterAccept FaultKind = "reset_after_accept"
	// FaultUndeliverable accepts the message normally, but its delivery
	// fails: its status becomes "failed" and its callbacks say so.
	FaultUndeliverable FaultKind = "undeliverable"
)

// FaultOp is which requests a fault applies to.
type FaultOp string

// The operations a fault can target.
const (
	// OpSend: POST /messages (the default).
	OpSend FaultOp = "send"
	// OpLookup: GET /messages?reference=. Only status, latency,
	// timeout_before_accept and reset_before_accept make sense there.
	OpLookup FaultOp = "lookup"
)

// Fault is one planned fault. A request gets the first planned fault that
// matches it (in the order they were added); a fault with Count left is
// used up by one request.
type Fault struct {
	Kind FaultKind `json:"kind"`
	// Op is which requests it applies to; empty means OpSend.
	Op FaultOp `json:"op,omitempty"`
	// Status is the HTTP status of FaultStatus (400..599).
	Status int `json:"status,omitempty"`
	// Count is how many matching requests the fault applies to; 0 means
	// every matching request until ClearFaults.
	Count int `json:"count,omitempty"`
	// Reference, if set, restricts the fault to requests with this
	// reference (or Idempotency-Key).
	Reference string `json:"reference,omitempty"`
	// Hang bounds the hang of the timeout kinds; 0 means until the client
	// gives up or the simulator closes.
	Hang time.Duration `json:"-"`
	// Delay is FaultLatency's wait.
	Delay time.Duration `json:"-"`
}

// ErrInvalidFault is wrapped by SetRandom's errors.
var ErrInvalidFault = errors.New("simulator: invalid fault")

func (f Fault) matches(op FaultOp, reference, key string) bool {
	return f.Op == op && (f.Reference == "" || f.Reference == reference || f.Reference == key)
}

// RandomFaults injects faults into sends at random, from the simulator's
// seeded RNG, when no planned fault matches. Each rate is a probability
// per send; their sum must not exceed 1.
type RandomFaults struct {
	// StatusRate answers one of Statuses (default 500, 503, 429).
	StatusRate float64 `json:"status_rate,omitempty"`
	Statuses   []int   `json:"statuses,omitempty"`
	// The other kinds, as their Fault counterparts; the timeouts hang
	// until the client gives up.
	TimeoutBeforeRate float64 `json:"timeout_before_rate,omitempty"`
	TimeoutAfterRate  float64 `json:"timeout_after_rate,omitempty"`
	ResetBeforeRate   float64 `json:"reset_before_rate,omitempty"`
	ResetAfterRate    float64 `json:"reset_after_rate,omitempty"`
}

func (r RandomFaults) validate() error {
	sum := 0.0
	for _, x := range []float64{r.StatusRate, r.TimeoutBeforeRate, r.TimeoutAfterRate, r.ResetBeforeRate, r.ResetAfterRate} {
		if x < 0 || x > 1 || x != x {
			return fmt.Errorf("%w: rate %v is not in [0,1]", ErrInvalidFault, x)
		}
		sum += x
	}
	if sum > 1+1e-9 {
		return fmt.Errorf("%w: rates sum to %v, more than 1", ErrInvalidFault, sum)
	}
	for _, s := range r.Statuses {
		if s < 400 || s > 599 {
			return fmt.Errorf("%w: status %d is not 400..599", ErrInvalidFault, s)
		}
	}
	return nil
}

// pick draws a fault for one send from u, uniform in [0,1), and v for the
// status choice; ok is false when none is drawn.
func (r RandomFaults) pick(u float64, v int) (Fault, bool) {
	steps := []struct {
		rate float64
		kind FaultKind
	}{
		{r.StatusRate, FaultStatus},
		{r.TimeoutBeforeRate, FaultTimeoutBeforeAccept},
		{r.TimeoutAfterRate, FaultTimeoutAfterAccept},
		{r.ResetBeforeRate, FaultResetBeforeAccept},
		{r.ResetAfterRate, FaultResetAfterAccept},
	}
	acc := 0.0
	for _, s := range steps {
		acc += s.rate
		if u < acc {
			f := Fault{Kind: s.kind}
			if s.kind == FaultStatus {
				statuses := r.Statuses
				if len(statuses) == 0 {
					statuses = []int{500, 503, 429}
				}
				f.Status = statuses[v%len(statuses)]
			}
			return f, true
		}
	}
	return Fault{}, false
}
