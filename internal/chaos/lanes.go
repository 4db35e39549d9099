package chaos

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/sendonce/sendonce/internal/groundtruth"
	"github.com/sendonce/sendonce/internal/localpipeline"
	"github.com/sendonce/sendonce/notify"
)

// Capability is what an adapter lets the pipeline do about a repeat, and
// so what the verdict demands of it (groundtruth.Capability).
type Capability = groundtruth.Capability

// The capabilities (groundtruth's).
const (
	CanAvoid  = groundtruth.CanAvoid
	ByContent = groundtruth.ByContent
	Neither   = groundtruth.Neither
)

// Counterpart is the provider an adapter talks to in a chaos run: real
// (moto_server, an SMTP server) or faithful (the HTTP simulator,
// twiliotest), with its record of what it accepted as ground truth.
type Counterpart interface {
	// Env is the functions' environment selecting and configuring the
	// adapter (it overrides the pipeline's defaults).
	Env() map[string]string
	// Attach is called once the lane's pipeline runs.
	Attach(p *localpipeline.Pipeline) error
	// Plan applies a message's planned fault (a permanent rejection, an
	// undeliverable message) and, with slow > 0, a slow first answer.
	Plan(m localpipeline.Message, slow time.Duration) error
	// Faults turns the random send faults on or off; Outage makes every
	// send fail as refused (429/5xx) while on.
	Faults(on bool)
	Outage(on bool)
	// Delivered returns, per workload key, how many times the provider
	// accepted the message, and the delivery status it reports where it
	// has one ("failed" for an undeliverable message).
	Delivered(ctx context.Context, w localpipeline.Workload) (count map[string]int, status map[string]string, err error)
	// Sent is a cheap count of the distinct messages accepted so far,
	// for progress lines (Delivered is the ground truth).
	Sent() int
	// Capability is the adapter's, for channel.
	Capability(channel string) Capability
	// Faulted returns the faults injected so far, by name.
	Faulted() map[string]int
	// InFlight returns the provider calls being served now.
	InFlight() int64
	// Quiesce waits (bounded by ctx) for the counterpart's own
	// asynchronous work (callbacks) to finish.
	Quiesce(ctx context.Context)
	Close()
}

// Lane is one row of the adapter table: an adapter, the channels it
// serves, its share of the messages, and how to start its counterpart.
type Lane struct {
	// Name names the adapter ("http", "twilio", "sns", "smtp", "ses").
	Name string
	// About names the adapter and its counterpart for a person
	// (Report.WriteSummary).
	About string
	// Channels the lane's workload draws from.
	Channels []notify.Channel
	// Share is the lane's fraction of Options.N (the shares of the lanes
	// run are normalised).
	Share float64
	// Instances is the number of sender instances.
	Instances int
	// LongClaim, when Options.LongClaims is set, is the lane's claim
	// timeout, visibility timeout and reconciler schedule: a takeover
	// then comes more than a minute after the dead worker's send, as in
	// production, which a provider looked up by time must survive.
	LongClaim *Timings
	// Workload, if set, reshapes the lane's generated workload (the
	// twilio lane: identical texts to shared recipients); rng is the
	// lane's.
	Workload func(w localpipeline.Workload, rng *rand.Rand) localpipeline.Workload
	// TemplateChange, if set, is the tenant's template change during the
	// run (new versions put as the lane is fed).
	TemplateChange *TemplateChange
	// Spread, if set, is how long the lane's first wave is fed over,
	// evenly from the start of the faults (the failover lane: its
	// messages meet every phase of its provider's schedule).
	Spread func(o Options) time.Duration
	// New starts the counterpart.
	New func(ctx context.Context, o Options, seed uint64) (Counterpart, error)
}

// Timings are a lane's claim and queue timings.
type Timings struct {
	Claim, Visibility, ReconcileEvery time.Duration
}

// Lanes is the adapter table: every adapter chaos drives, each against
// its counterpart. A new adapter is one more entry with its Counterpart.
var Lanes = []Lane{
	{Name: "http", About: "the generic HTTP adapter to the provider simulator (sms drops repeats, email is looked up)", Channels: []notify.Channel{notify.ChannelSMS, notify.ChannelEmail}, Share: 0.4, Instances: 3, New: newHTTPLane},
	{Name: "twilio", About: "the Twilio adapter to twiliotest (looked up by content)", Channels: []notify.Channel{notify.ChannelSMS}, Share: 0.2, Instances: 2, New: newTwilioLane,
		LongClaim: &Timings{Claim: 65 * time.Second, Visibility: 20 * time.Second, ReconcileEvery: 90 * time.Second},
		Workload:  shareTexts, TemplateChange: orderShippedChange},
	{Name: "sns", About: "Amazon SNS on moto_server", Channels: []notify.Channel{notify.ChannelSMS}, Share: 0.2, Instances: 2, New: newSNSLane},
	{Name: "smtp", About: "SMTP to a go-smtp server", Channels: []notify.Channel{notify.ChannelEmail}, Share: 0.2, Instances: 2, New: newSMTPLane},
	{Name: "ses", About: "Amazon SES on moto_server", Channels: []notify.Channel{notify.ChannelEmail}, Share: 0.15, Instances: 2, New: newSESLane},
	{Name: "failover", About: "the route http,lambda (the provider simulator, then a Lambda provider)", Channels: []notify.Channel{notify.ChannelSMS}, Share: 0.15, Instances: 2, New: newFailoverLane, Spread: failoverSpread},
}

// LaneNames returns the names of Lanes, in order.
func LaneNames() []string {
	out := make([]string, len(Lanes))
	for i, l := range Lanes {
		out[i] = l.Name
	}
	return out
}
