package chaos

import (
	"context"
	"time"

	"github.com/sendonce/sendonce/internal/groundtruth"
	"github.com/sendonce/sendonce/internal/localpipeline"
	"github.com/sendonce/sendonce/notify"
)

// Counterpart is the provider an adapter talks to in a chaos run: real
// (moto_server, an SMTP server) or faithful (the HTTP simulator), with
// its record of what it accepted as ground truth.
type Counterpart interface {
	// Env is the functions' environment selecting and configuring the
	// adapter (it overrides the pipeline's defaults).
	Env() map[string]string
	// Attach is called once the lane's pipeline runs.
	Attach(p *localpipeline.Pipeline)
	// Plan applies a message's planned fault (a permanent rejection, an
	// undeliverable message) and, with slow > 0, a slow first answer.
	Plan(m localpipeline.Message, slow time.Duration)
	// SetFaults sets what the counterpart does to the sends from now on.
	SetFaults(m faultMode)
	// Delivered returns, per workload key, how many times the provider
	// accepted the message, and the delivery status it reports where it
	// has one ("failed" for an undeliverable message).
	Delivered(ctx context.Context, w localpipeline.Workload) (count map[string]int, status map[string]string, err error)
	// Sent is a cheap count of the distinct messages accepted so far,
	// for progress lines (Delivered is the ground truth).
	Sent() int
	// Faulted returns the faults injected so far, by name.
	Faulted() map[string]int
	// Quiesce waits (bounded by ctx) for the counterpart's own
	// asynchronous work (callbacks) to finish.
	Quiesce(ctx context.Context)
	Close()
}

// faultMode is what a counterpart does to the sends: nothing but the
// planned rejections, the plan's random faults, or refuse every send (the
// outage).
type faultMode int32

const (
	faultsOff faultMode = iota
	faultsOn
	outage
)

// Lane is one row of the adapter table: an adapter, the channels it
// serves, its share of the messages, and how to start its counterpart.
type Lane struct {
	// Name names the adapter ("http", "sns", "smtp", "ses").
	Name string
	// Channels the lane's workload draws from.
	Channels []notify.Channel
	// Capability is the adapter's, for every channel it serves: what the
	// verdict demands of it.
	Capability groundtruth.Capability
	// Share is the lane's fraction of Options.N (the shares of the lanes
	// run are normalised).
	Share float64
	// Instances is the number of sender instances.
	Instances int
	// New starts the counterpart.
	New func(ctx context.Context, o Options, seed uint64) (Counterpart, error)
}

// Lanes is the adapter table: every adapter chaos drives, each against
// its counterpart. A new adapter is one more entry with its Counterpart.
var Lanes = []Lane{
	{Name: "http", Channels: []notify.Channel{notify.ChannelSMS, notify.ChannelEmail}, Capability: groundtruth.CanAvoid, Share: 0.4, Instances: 3, New: newHTTPLane},
	{Name: "sns", Channels: []notify.Channel{notify.ChannelSMS}, Capability: groundtruth.Neither, Share: 0.2, Instances: 2, New: newSNSLane},
	{Name: "smtp", Channels: []notify.Channel{notify.ChannelEmail}, Capability: groundtruth.Neither, Share: 0.2, Instances: 2, New: newSMTPLane},
	{Name: "ses", Channels: []notify.Channel{notify.ChannelEmail}, Capability: groundtruth.Neither, Share: 0.15, Instances: 2, New: newSESLane},
}

// LaneNames returns the names of Lanes, in order.
func LaneNames() []string {
	out := make([]string, len(Lanes))
	for i, l := range Lanes {
		out[i] = l.Name
	}
	return out
}

// byAddress turns counts per recipient into counts per workload key (a
// lane's workload gives every message its own recipient). With strays,
// recipients outside the workload are counted under one pseudo-key (a
// counterpart only this run uses must have none); without, they are
// ignored (a counterpart shared with other tests, as moto_server is in
// `make test`).
func byAddress(w localpipeline.Workload, perAddr map[string]int, strays bool) map[string]int {
	out := map[string]int{}
	known := map[string]bool{}
	for _, m := range w.Messages {
		if m.Valid && m.Address != "" {
			known[m.Address] = true
			if n := perAddr[m.Address]; n > 0 {
				out[m.Key] = n
			}
		}
	}
	for a, n := range perAddr {
		if strays && !known[a] {
			out["(recipients outside the workload)"] += n
		}
	}
	return out
}
