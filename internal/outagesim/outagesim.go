// Package outagesim simulates a provider outage at scale in virtual time
// (make sim-outage, docs/scale.md): messages arrive at a steady rate; the
// provider is down for a while, then answers a share of its calls with an
// ambiguous timeout, under a rate limit it enforces with 429s. The real
// sender (HandleSQS), the real reconciler's hand-out (Find) and workers
// (Work) and the real pacing (package pace) run over the in-memory ledger,
// one virtual second at a time.
//
// Models, not the real thing: SQS (one receive per visible message a
// second, no batching window; visibility timeout, receive count and
// dead-letter queue), Lambda (every visible message is processed in its
// second; the workers' capacity is rows a second), the provider (instant
// answers). A paced send does not wait for its token (pace.Adapter.MaxWait
// 0): a sender's first attempt is released at once and redelivered by SQS,
// the worse case for redeliveries; a reconcile worker whose row finds no
// token leaves it (dispatch.Decide takes the token before the takeover)
// and its unit goes on from that row the next second, as a worker waiting
// up to sendpath.PaceMaxWait for the next second's tokens does.
package outagesim

import (
	"cmp"
	"container/heap"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sendonce/sendonce/internal/dispatch"
	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/ledger/ledgertest"
	"github.com/sendonce/sendonce/internal/ledger/memledger"
	"github.com/sendonce/sendonce/internal/metrics"
	"github.com/sendonce/sendonce/internal/opstate"
	"github.com/sendonce/sendonce/internal/pace"
	"github.com/sendonce/sendonce/internal/reconcile"
	"github.com/sendonce/sendonce/internal/render"
	"github.com/sendonce/sendonce/internal/sender"
	"github.com/sendonce/sendonce/internal/templates/memtemplates"
	"github.com/sendonce/sendonce/notify"
	"github.com/sendonce/sendonce/provider"
)

// Config is one simulated outage. Rates are per virtual second.
type Config struct {
	// Rate is the messages arriving each second.
	Rate int
	// Limit is the provider's rate limit (it answers 429 above it).
	Limit int
	// Pace is the send rate configured for the provider (package pace).
	Pace int
	// Down is how long the provider is down from the start.
	Down time.Duration
	// Total is the simulated time.
	Total time.Duration
	// AmbiguousPercent is the share of calls answered with an ambiguous
	// timeout after Down (the message was accepted, the answer lost).
	AmbiguousPercent int
	// WorkerRows is the rows the reconcile workers examine a second
	// (ReconcileWorkerConcurrency × 4 rows at once ÷ a row's time).
	WorkerRows int
	// MaxRows is the rows one Find hands out at most
	// (SENDONCE_RECONCILE_MAX_ROWS, 60,000 in the template; scaled like
	// the rates). Zero: 60,000 ÷ Scale.
	MaxRows int
	// Visibility and MaxReceive are the notification queue's.
	Visibility time.Duration
	MaxReceive int
	// Schedule is the reconciler's schedule (rate(1 minute)).
	Schedule time.Duration
	// Scale is how much the workload was scaled down (for the report: 100
	// means every rate is 1/100 of the real one).
	Scale int
	Seed  uint64
	// EmailPercent is the share of messages sent by email (through a
	// provider of its own, "mail", paced at Pace and limited to Limit,
	// never down); the rest are SMS (provider "http", down for Down).
	// Zero: every message is SMS (the workload of issue 25).
	EmailPercent int
	// EmailFailPercent is the share of the email provider's calls it
	// refuses with a transient 503 (nothing sent): those messages are
	// retried by an SQS redelivery or the reconciler.
	EmailFailPercent int
}

// paceMaxWait is sendpath.PaceMaxWait (not imported: it would bring the
// AWS clients into this package's build).
const paceMaxWait = 2 * time.Second

// Provider names of the simulation's two channels.
const (
	smsProvider   = "http"
	emailProvider = "mail"
)

// mix is the workload's classes, with their share and their validity
// (zero: none).
var mix = []struct {
	name     notify.Class
	percent  int
	validity time.Duration
}{
	{notify.ClassOTP, 60, 10 * time.Minute},
	{notify.ClassTransactional, 30, time.Hour},
	{notify.ClassMarketing, 10, 0},
}

// Result is what a run measured.
type Result struct {
	Config
	Messages        int
	DeliveredOnce   int
	DeliveredTwice  int // or more
	Lost            int // never delivered, not expired, not pending
	Pending         int // not settled at the end
	ExpiredNotSent  int
	SentAfterExpiry int
	PeakRate        int // calls that reached the provider in one second
	Throttled       int // 429s the provider answered
	// Drain is the time from the provider's recovery until every message
	// that arrived before it was settled; -1 if it never was.
	Drain time.Duration
	// Backlog is the number of messages that arrived before recovery and
	// were not settled (delivered, final, or past their validity) at
	// recovery, 15 minutes after it, and at the end.
	BacklogAtRecovery, BacklogAt15, BacklogAtEnd int
	// Bound is the shortest drain the arithmetic allows, new traffic
	// served as it arrives: the least T at which the provider's spare rate
	// after recovery (min(Limit, Pace) − Rate) could have sent every
	// message of the backlog at recovery that is still valid at recovery +
	// T (a message whose validity passes before T need not be sent, nor
	// can it be); -1 if no T within the run does. No schedule of sends
	// drains the backlog sooner; the drain measured also waits for the
	// provider's ramp, the hand-out and the workers.
	Bound          time.Duration
	Writes         int
	WritesPerMsg   float64
	DLQ            int
	ReconcileFound int
	// InTime is the messages first delivered within their validity (a
	// message without one: delivered at all within the run).
	InTime int
	// Optimum is what a perfect schedule that knows the whole future
	// delivers within validity, from the same arrivals and the same
	// capacity (nothing while the provider is down, then min(Limit, Pace)
	// a second): earliest deadline first, each second, among the messages
	// arrived and still valid (messages without validity last). For unit
	// jobs with release times and deadlines no schedule delivers more
	// within their deadlines.
	Optimum int
	// OrderInTime and OrderDrain are what a perfect schedule in
	// sendonce's own order achieves (productOrder: the urgent messages,
	// then the backlog, then the rest, each earliest deadline first,
	// knowing every arrival, the same capacity): the messages delivered
	// within validity, and the backlog's drain (-1: never). EDFInTime
	// and EDFDrain are the same for earliest deadline first alone (the
	// order before the backlog went first). None is a goal: they show
	// what each order allows at best.
	OrderInTime, EDFInTime int
	OrderDrain, EDFDrain   time.Duration
	// WatchFinds is the hand-outs the scheduled runs' watch made
	// (reconcile.Reconciler.Watch), besides one a run.
	WatchFinds int
	// Utilisation is the provider's calls from recovery until the
	// backlog was empty over min(Limit, Pace) a second for that time
	// (zero when the backlog never emptied or was empty at recovery).
	Utilisation float64
	// Email is what the email messages measured (EmailPercent > 0).
	Email Delays
	// TunedWorkerRows and TunedHandOut are the workers' rows a second
	// and a lane's hand-out after the tuning to the provider's rate
	// (reconcile.Tune), scaled.
	TunedWorkerRows, TunedHandOut int
}

// Delays sums up the delivery times of one channel's messages: from
// arrival to the first delivery.
type Delays struct {
	Messages  int
	Delivered int
	InTime    int // first delivered within validity
	// Mean, P99 and Max are over the messages delivered.
	Mean, P99, Max time.Duration
}

func delaysOf(msgs []*msg, channel string) Delays {
	var d Delays
	var all []time.Duration
	var sum time.Duration
	for _, m := range msgs {
		if m.channel != channel {
			continue
		}
		d.Messages++
		if len(m.delivered) == 0 {
			continue
		}
		d.Delivered++
		if m.expires.IsZero() || !m.delivered[0].After(m.expires) {
			d.InTime++
		}
		x := m.delivered[0].Sub(m.arrived)
		all = append(all, x)
		sum += x
	}
	if len(all) > 0 {
		slices.Sort(all)
		d.Mean = sum / time.Duration(len(all))
		d.P99 = all[(len(all)*99)/100]
		d.Max = all[len(all)-1]
	}
	return d
}

func (d Delays) String() string {
	return fmt.Sprintf("%d of %d delivered, %d within validity; delay mean %s, p99 %s, max %s",
		d.Delivered, d.Messages, d.InTime, d.Mean.Round(10*time.Millisecond), d.P99, d.Max)
}

// ChannelResult is the one-channel outage (make sim-outage's second
// scenario): the SMS provider down while email stays healthy, and the
// same arrivals without the SMS outage.
type ChannelResult struct {
	Outage, Baseline Result
}

// within reports whether got is within 5 % of want, or within the
// simulation's resolution (a second) of it.
func within(got, want time.Duration) bool {
	diff := got - want
	if diff < 0 {
		diff = -diff
	}
	return diff <= time.Second || diff*20 <= want
}

// Failures lists the goals the one-channel run missed: the safety goals
// of both runs, and the email messages' delivery (within validity, and
// the mean and 99th percentile delay) within 5 % of the run without the
// SMS outage.
func (c ChannelResult) Failures() []string {
	var f []string
	for _, r := range []struct {
		name string
		r    Result
	}{{"with the SMS outage", c.Outage}, {"without", c.Baseline}} {
		if r.r.DeliveredTwice > 0 || r.r.Lost > 0 || r.r.SentAfterExpiry > 0 || r.r.PeakRate > r.r.Limit {
			f = append(f, fmt.Sprintf("%s: %d twice, %d lost, %d sent after expiry, peak %d/s (limit %d/s)",
				r.name, r.r.DeliveredTwice, r.r.Lost, r.r.SentAfterExpiry, r.r.PeakRate, r.r.Limit))
		}
	}
	o, b := c.Outage.Email, c.Baseline.Email
	if d := o.InTime - b.InTime; d*20 < -b.InTime || d*20 > b.InTime {
		f = append(f, fmt.Sprintf("email delivered within validity %d, without the SMS outage %d: more than 5 %% apart", o.InTime, b.InTime))
	}
	if !within(o.Mean, b.Mean) || !within(o.P99, b.P99) {
		f = append(f, fmt.Sprintf("email delay mean %s / p99 %s, without the SMS outage %s / %s: more than 5 %% (and a second) apart",
			o.Mean.Round(10*time.Millisecond), o.P99, b.Mean.Round(10*time.Millisecond), b.P99))
	}
	return f
}

// OK reports whether the one-channel run met its goals (Failures).
func (c ChannelResult) OK() bool { return len(c.Failures()) == 0 }

// Table writes the one-channel result as make sim-outage prints it.
func (c ChannelResult) Table(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	r := c.Outage
	s := max(r.Scale, 1)
	fmt.Fprintf(tw, "workload\t%d msg/s for %s (1/%d of %d msg/s), %d %% email (its provider refuses %d %% of calls, transient), the rest SMS; each provider limited to %d/s (paced at %d/s)\n",
		r.Rate, r.Total, s, r.Rate*s, r.EmailPercent, r.EmailFailPercent, r.Limit, r.Pace)
	fmt.Fprintf(tw, "SMS provider\tdown %s, then %d %% ambiguous timeouts (without the outage: %d %% ambiguous from the start)\n", r.Down, r.AmbiguousPercent, r.AmbiguousPercent)
	fmt.Fprintf(tw, "reconciler\t%d rows/s examined by the workers, %d rows handed out a run, a run every %s\n",
		r.WorkerRows, cmp.Or(r.MaxRows, 60000/s), r.Schedule)
	for _, x := range []struct {
		name string
		r    Result
	}{{"with the SMS outage", c.Outage}, {"without the SMS outage", c.Baseline}} {
		fmt.Fprintf(tw, "%s: email\t%s\n", x.name, x.r.Email)
		fmt.Fprintf(tw, "%s: all\t%d messages, %d delivered once, %d twice or more, %d lost, %d sent after expiry, %d not settled; peak %d/s (limit %d/s)\n",
			x.name, x.r.Messages, x.r.DeliveredOnce, x.r.DeliveredTwice, x.r.Lost, x.r.SentAfterExpiry, x.r.Pending, x.r.PeakRate, x.r.Limit)
	}
	tw.Flush()
	if c.OK() {
		fmt.Fprintln(w, "RESULT: OK")
	} else {
		fmt.Fprintf(w, "RESULT: FAIL (%s)\n", strings.Join(c.Failures(), "; "))
	}
}

// RunOneChannel runs cfg (the SMS provider down for cfg.Down, email
// healthy; cfg.EmailPercent must be set) and the same arrivals without
// the SMS outage.
func RunOneChannel(ctx context.Context, cfg Config) (ChannelResult, error) {
	if cfg.EmailPercent <= 0 {
		return ChannelResult{}, errors.New("outagesim: the one-channel scenario needs EmailPercent")
	}
	out, err := Run(ctx, cfg)
	if err != nil {
		return ChannelResult{}, err
	}
	base := cfg
	base.Down = 0
	bl, err := Run(ctx, base)
	return ChannelResult{Outage: out, Baseline: bl}, err
}

// OK reports whether the run met the goal (issue 34): none twice, none
// lost, none sent after expiry, never above the provider's limit; at
// least 98 % of the offline optimum delivered within validity; the
// backlog drained within 1.1 × the arithmetic bound; the provider at 95 %
// of its rate from recovery until the backlog was empty.
func (r Result) OK() bool { return len(r.Failures()) == 0 }

// Failures lists the goals the run missed.
func (r Result) Failures() []string {
	var f []string
	if r.DeliveredTwice > 0 {
		f = append(f, fmt.Sprintf("%d delivered twice", r.DeliveredTwice))
	}
	if r.Lost > 0 {
		f = append(f, fmt.Sprintf("%d lost", r.Lost))
	}
	if r.SentAfterExpiry > 0 {
		f = append(f, fmt.Sprintf("%d sent after their validity", r.SentAfterExpiry))
	}
	if r.Drain < 0 || r.Bound >= 0 && r.Drain > r.Bound+r.Bound/10 {
		f = append(f, fmt.Sprintf("backlog drained %s after recovery, want within 1.1 × the arithmetic bound %s (%s)",
			fmtDrain(r.Drain), fmtDrain(r.Bound), r.boundWhy()))
	}
	if r.Optimum > 0 && r.InTime*100 < r.Optimum*98 {
		f = append(f, fmt.Sprintf("%d delivered within validity, %.1f %% of the offline optimum %d, want at least 98 %%",
			r.InTime, 100*float64(r.InTime)/float64(r.Optimum), r.Optimum))
	}
	if r.Drain > 0 && r.Utilisation < 0.95 {
		f = append(f, fmt.Sprintf("provider at %.1f %% of its rate from recovery until the backlog was empty, want at least 95 %%", 100*r.Utilisation))
	}
	if r.PeakRate > r.Limit {
		f = append(f, fmt.Sprintf("provider peak %d/s above its limit %d/s", r.PeakRate, r.Limit))
	}
	return f
}

// boundWhy explains Bound: the backlog at recovery over the spare rate,
// less what expires meanwhile.
func (r Result) boundWhy() string {
	plain := "never"
	if sp := r.spare(); sp > 0 {
		plain = (time.Duration(r.BacklogAtRecovery) * time.Second / time.Duration(sp)).Round(time.Second).String()
	}
	return fmt.Sprintf("backlog %d at recovery ÷ spare %d/s (limit %d/s − traffic %d/s) = %s, less the messages whose validity passes meanwhile",
		r.BacklogAtRecovery, r.spare(), min(r.Limit, r.Pace), r.Rate, plain)
}

// spare is the provider's rate left for the backlog after recovery, new
// traffic served first.
func (r Result) spare() int { return min(r.Limit, r.Pace) - r.Rate }

// drainBound computes Result.Bound from the expiries of the backlog at
// recovery (zero: no validity), the spare rate and the time left in the
// run.
func drainBound(expiries []time.Time, recovery time.Time, spare int, left time.Duration) time.Duration {
	var timed []time.Time
	valid := 0 // still valid at recovery + t
	for _, e := range expiries {
		if e.IsZero() {
			valid++
		} else {
			timed = append(timed, e)
		}
	}
	slices.SortFunc(timed, time.Time.Compare)
	valid += len(timed)
	i := 0
	for t := time.Duration(0); t <= left; t += time.Second {
		at := recovery.Add(t)
		for ; i < len(timed) && !at.Before(timed[i]); i++ {
			valid--
		}
		if valid == 0 || spare > 0 && int64(spare)*int64(t/time.Second) >= int64(valid) {
			return t
		}
	}
	return -1
}

func fmtDrain(d time.Duration) string {
	if d < 0 {
		return "never"
	}
	return d.String()
}

// Table writes the result as the table make sim-outage prints.
func (r Result) Table(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	s := max(r.Scale, 1)
	fmt.Fprintf(tw, "workload\t%d msg/s for %s (1/%d of %d msg/s), provider limit %d/s (paced at %d/s), down %s, then %d %% ambiguous timeouts\n",
		r.Rate, r.Total, s, r.Rate*s, r.Limit, r.Pace, r.Down, r.AmbiguousPercent)
	fmt.Fprintf(tw, "reconciler\t%d rows/s examined by the workers, %d rows handed out a run, a run every %s (the defaults); tuned to the provider's rate: %d rows/s, %d rows a run\n",
		r.WorkerRows, cmp.Or(r.MaxRows, 60000/s), r.Schedule, r.TunedWorkerRows, r.TunedHandOut)
	fmt.Fprintf(tw, "messages\t%d\n", r.Messages)
	fmt.Fprintf(tw, "delivered once\t%d\n", r.DeliveredOnce)
	fmt.Fprintf(tw, "delivered twice or more\t%d\n", r.DeliveredTwice)
	fmt.Fprintf(tw, "lost\t%d\n", r.Lost)
	fmt.Fprintf(tw, "not settled at the end\t%d\n", r.Pending)
	fmt.Fprintf(tw, "expired, never sent\t%d\n", r.ExpiredNotSent)
	fmt.Fprintf(tw, "sent after expiry\t%d\n", r.SentAfterExpiry)
	fmt.Fprintf(tw, "delivered within validity / optimum\t%d / %d (%.1f %%; the optimum: earliest deadline first knowing every arrival, same capacity)\n",
		r.InTime, r.Optimum, 100*float64(r.InTime)/float64(max(1, r.Optimum)))
	fmt.Fprintf(tw, "the same in sendonce's order\t%d (%.1f %% of the optimum) and the backlog empty after %s (offline: the messages within %s of their deadline, then the backlog, then the rest, each earliest deadline first, no validity ranked %s after arrival)\n",
		r.OrderInTime, 100*float64(r.OrderInTime)/float64(max(1, r.Optimum)), fmtDrain(r.OrderDrain), pace.Urgent, pace.Horizon)
	fmt.Fprintf(tw, "the same earliest deadline first\t%d (%.1f %% of the optimum) and the backlog empty after %s (offline: the order before the backlog went first)\n",
		r.EDFInTime, 100*float64(r.EDFInTime)/float64(max(1, r.Optimum)), fmtDrain(r.EDFDrain))
	fmt.Fprintf(tw, "provider rate, recovery until empty\t%.1f %% of %d/s\n", 100*r.Utilisation, min(r.Limit, r.Pace))
	fmt.Fprintf(tw, "provider peak rate / limit\t%d/s / %d/s (429s: %d)\n", r.PeakRate, r.Limit, r.Throttled)
	fmt.Fprintf(tw, "recovery until backlog empty\t%s\n", fmtDrain(r.Drain))
	fmt.Fprintf(tw, "arithmetic lower bound on that\t%s (%s)\n", fmtDrain(r.Bound), r.boundWhy())
	fmt.Fprintf(tw, "backlog at recovery / +15m / end\t%d / %d / %d (arrived before recovery, not settled, still valid)\n", r.BacklogAtRecovery, r.BacklogAt15, r.BacklogAtEnd)
	fmt.Fprintf(tw, "DynamoDB writes per message\t%.2f (%d; ledger writes and pace counter writes)\n", r.WritesPerMsg, r.Writes)
	fmt.Fprintf(tw, "dead-lettered by SQS\t%d (their rows are settled by the reconciler)\n", r.DLQ)
	fmt.Fprintf(tw, "rows handed out by the reconciler\t%d (%d hand-outs by the runs' watch, besides one a run)\n", r.ReconcileFound, r.WatchFinds)
	tw.Flush()
	if r.OK() {
		fmt.Fprintln(w, "RESULT: OK")
	} else {
		fmt.Fprintf(w, "RESULT: FAIL (%s)\n", strings.Join(r.Failures(), "; "))
	}
}

// world is the state of one run.
type world struct {
	cfg   Config
	now   time.Time
	rng   *rand.Rand
	prov  *model // the SMS provider
	mail  *model // the email provider
	queue []*sqsMsg
	msgs  map[string]*msg
	order []*msg
	dlq   int
	// watchFinds counts the hand-outs the recovery watch made.
	watchFinds int
}

type msg struct {
	key       string
	channel   string
	arrived   time.Time
	expires   time.Time // zero: no validity
	delivered []time.Time
}

type sqsMsg struct {
	id       string
	body     string
	visible  time.Time
	receives int
}

// model is a provider: down until recovery, then a share of ambiguous
// timeouts (and of transient refusals); a rate limit answered with 429;
// it records every delivery.
type model struct {
	mu        sync.Mutex
	w         *world
	rng       *rand.Rand
	name      string
	recovery  time.Time
	ambiguous int // percent of calls
	refused   int // percent of calls
	perSec    map[int64]int
	peak      int
	throttled int
}

func (p *model) Name() string { return p.name }
func (p *model) Capabilities() provider.Capabilities {
	return provider.Capabilities{LookupByReference: true}
}

func (p *model) Send(_ context.Context, m provider.Message) (provider.Receipt, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.w.now
	if now.Before(p.recovery) {
		return provider.Receipt{}, &provider.Error{Kind: provider.Transient, Provider: p.name, Op: "send", Code: "503", Reason: "unavailable"}
	}
	sec := now.Unix()
	p.perSec[sec]++
	p.peak = max(p.peak, p.perSec[sec])
	if p.perSec[sec] > p.w.cfg.Limit {
		p.throttled++
		return provider.Receipt{}, &provider.Error{Kind: provider.Transient, Provider: p.name, Op: "send", Code: "429", Reason: "too many requests"}
	}
	if p.refused > 0 && p.rng.IntN(100) < p.refused {
		return provider.Receipt{}, &provider.Error{Kind: provider.Transient, Provider: p.name, Op: "send", Code: "503", Reason: "unavailable"}
	}
	mm := p.w.msgs[m.Key]
	mm.delivered = append(mm.delivered, now)
	if p.rng.IntN(100) < p.ambiguous {
		return provider.Receipt{}, &provider.Error{Kind: provider.Ambiguous, Provider: p.name, Op: "send", Reason: "timeout"}
	}
	return provider.Receipt{MessageID: "pm_" + m.Key[:12]}, nil
}

func (p *model) Lookup(_ context.Context, m provider.Message) (provider.LookupResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.w.now.Before(p.recovery) {
		return provider.LookupResult{}, &provider.Error{Kind: provider.Transient, Provider: p.name, Op: "lookup", Code: "503", Reason: "unavailable"}
	}
	if len(p.w.msgs[m.Key].delivered) > 0 {
		return provider.LookupResult{Status: provider.LookupAccepted, MessageID: "pm_" + m.Key[:12]}, nil
	}
	return provider.LookupResult{Status: provider.LookupNotFound}, nil
}

type units struct{ q []reconcile.Unit }

func (u *units) Waiting(context.Context) (int, error) { return len(u.q), nil }
func (u *units) Put(_ context.Context, us []reconcile.Unit) (int, error) {
	u.q = append(u.q, us...)
	return len(us), nil
}

type noDLQ struct{}

func (noDLQ) Put(context.Context, events.SQSMessage, *notify.InvalidError) error { return nil }

// Run simulates cfg and returns what it measured.
func Run(ctx context.Context, cfg Config) (Result, error) {
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	w := &world{cfg: cfg, now: start, rng: rand.New(rand.NewPCG(cfg.Seed, 25)), msgs: map[string]*msg{}}
	clock := func() time.Time { return w.now }
	// With email, each provider draws from a generator of its own, so that
	// the arrivals and the email provider's draws do not depend on the
	// SMS provider's calls: the one-channel scenario's two runs get the
	// same arrivals. Without, the SMS provider shares the arrivals'
	// generator, as it always did.
	smsRng := w.rng
	if cfg.EmailPercent > 0 {
		smsRng = rand.New(rand.NewPCG(cfg.Seed, 27))
	}
	w.prov = &model{w: w, rng: smsRng, name: smsProvider, recovery: start.Add(cfg.Down), ambiguous: cfg.AmbiguousPercent, perSec: map[int64]int{}}
	w.mail = &model{w: w, rng: rand.New(rand.NewPCG(cfg.Seed, 26)), name: emailProvider, recovery: start, refused: cfg.EmailFailPercent, perSec: map[int64]int{}}
	// Lossy, told no faults, counts the ledger's writes (each one
	// conditional write of a row under 1 KB: one write unit, whether it
	// applies or not).
	led := ledgertest.NewLossy(memledger.New(memledger.Config{Now: clock}))
	store := &pace.MemStore{}
	limiter, err := pace.New(store, map[string]int{smsProvider: cfg.Pace, emailProvider: cfg.Pace}, pace.Options{Now: clock})
	if err != nil {
		return Result{}, err
	}
	providers := map[string]provider.Adapter{"sms": pace.Wrap(w.prov, limiter, 0), "email": pace.Wrap(w.mail, limiter, 0)}
	tally := metrics.NewTally()
	// The providers' recorded states (opstate's ops#providers item).
	status := &opstate.Memory{}
	renderer := render.New(memtemplates.New(memtemplates.Config{}), render.Config{})
	dispatcher := func() (*dispatch.Dispatcher, error) {
		return dispatch.New(dispatch.Dispatcher{Ledger: led, Providers: providers, Renderer: renderer, Metrics: tally, Logger: slog.New(slog.DiscardHandler),
			ProviderTimeout: 5 * time.Second, ClaimTimeout: time.Minute, Now: clock, Status: status})
	}
	sd, err1 := dispatcher()
	rd, err2 := dispatcher()
	if err := errors.Join(err1, err2); err != nil {
		return Result{}, err
	}
	snd, err1 := sender.New(sender.Config{Dispatcher: sd, DeadLetters: noDLQ{}, Concurrency: 1})
	// One page per shard: memledger sorts the rows on every query (the
	// table's 1,000-row pages would make the run quadratic).
	maxRows := cmp.Or(cfg.MaxRows, 60000/max(1, cfg.Scale))
	// The workers' reach (reconcile.Tune), scaled like every rate.
	maxRate := max(1, reconcile.DefaultWorkers*reconcile.MaxConcurrency*int(time.Second/reconcile.RowTime)/max(1, cfg.Scale))
	rc, err2 := reconcile.New(reconcile.Config{Dispatcher: rd, MaxRows: maxRows, PageSize: 1 << 20, Concurrency: 1, Schedule: cfg.Schedule, MaxRate: maxRate, Status: status})
	if err := errors.Join(err1, err2); err != nil {
		return Result{}, err
	}
	uq := &units{}
	var (
		n       int
		carried []reconcile.Unit // units the workers are on, or that wait their turn
		// starvedSince is when each lane's workers got no token, after
		// they last did (none: they are getting tokens).
		starvedSince = map[string]time.Time{}
		budget       float64
		// The workers' rows a second (see the loop below).
		tuned      = reconcile.Tune(reconcile.Config{Concurrency: reconcile.DefaultConcurrency, UnitSize: reconcile.DefaultUnitSize, Schedule: cfg.Schedule, Workers: reconcile.DefaultWorkers}, min(cfg.Limit, cfg.Pace)*max(1, cfg.Scale))
		indexRows  = float64(reconcile.DefaultWorkers*reconcile.MaxConcurrency*int(time.Second/reconcile.RowTime)) / float64(max(1, cfg.Scale))
		workerRows = min(float64(cfg.WorkerRows)*float64(tuned.Concurrency)/reconcile.DefaultConcurrency, max(indexRows, float64(cfg.WorkerRows)))
		found      int
		runAt      time.Time
		watcher    *reconcile.Watcher
	)
	recovery := start.Add(cfg.Down)
	drain := time.Duration(-1)
	bound := time.Duration(-1)
	backlog := [2]int{-1, -1} // -1: the run ended before
	end := start.Add(cfg.Total)
	for ; w.now.Before(end); w.now = w.now.Add(time.Second) {
		if err := ctx.Err(); err != nil {
			return Result{}, err
		}
		for range cfg.Rate {
			n++
			w.arrive(n)
		}
		w.sendVisible(ctx, snd)
		if el := w.now.Sub(start); el%cfg.Schedule == 0 {
			rep, err := rc.Find(ctx, uq)
			if err != nil {
				return Result{}, err
			}
			found += rep.Found
			runAt, watcher = w.now, rc.NewWatcher(uq, w.now, rep)
		}
		// The scheduled run's watch after its Find (reconcile.Reconciler.
		// Watch): a Step every WatchPoll until WatchMargin before the
		// next run, while there is something to watch for; it hands out
		// at a provider's recovery, and when the backlog's last
		// hand-out has no unit left waiting.
		if el := w.now.Sub(runAt); watcher != nil && el > 0 && el%reconcile.WatchPoll == 0 {
			before := watcher.Report.Found
			more, err := watcher.Step(ctx)
			if err != nil {
				return Result{}, err
			}
			found += watcher.Report.Found - before
			if !more || el+reconcile.WatchPoll > cfg.Schedule-reconcile.WatchMargin {
				w.watchFinds += watcher.Finds
				watcher = nil
			}
		}
		// The workers, unit by unit: WorkerRows rows a second at the
		// default concurrency (reconcile.DefaultConcurrency rows at once
		// in each worker), times the concurrency Find tunes the units
		// to (reconcile.Tune, at the provider's full-scale rate: the
		// scaled rate would tune a scaled concurrency), at most
		// reconcile.MaxConcurrency × DefaultWorkers ÷ RowTime rows a
		// second (DynamoDB's limits, reconcile.Tune), scaled. Work runs a
		// unit's rows one at a time here (the model counts the
		// concurrency), so that a row that found the pace spent is the
		// last examined: its unit is offered again the next second from
		// that row on (a worker's send waits for its token, up to
		// sendpath.PaceMaxWait, and the next second's come in one), and
		// the lane's other units wait meanwhile; other lanes' units go
		// on. A unit whose row found the provider down is done: Work
		// left the rest of it in the attention index (deferred).
		//
		// A lane whose workers got no token for sendpath.PaceMaxWait
		// (starved: the senders took the rate, or the provider's factor
		// is at its floor) has its units given up as the workers give
		// them up: each waits that long for a token, then Work defers
		// the rest of the unit (still due in the attention index) and
		// the unit is acknowledged. Its queue empties, and the next Find
		// runs (it hands out nothing while units wait).
		budget = min(budget, 0) + workerRows
		paced := map[string]bool{}
		progress := map[string]bool{}
		var started, waiting []reconcile.Unit
		work := func(u reconcile.Unit, wasStarted bool) {
			// A unit of expired rows (Unit.Expired) sends nothing: it
			// waits for no token, nor behind a unit that does.
			lanePaced := paced[u.Lane] && !u.Expired
			if budget > 0 && lanePaced && !starvedSince[u.Lane].IsZero() && w.now.Sub(starvedSince[u.Lane]) >= paceMaxWait {
				// Given up: its first row examined (paced), the rest
				// deferred.
				wu := u
				wu.Keys, wu.Concurrency = u.Keys[:1], 0
				wrep, _ := rc.Work(ctx, wu)
				budget -= float64(wrep.Examined)
				return
			}
			if budget <= 0 || lanePaced {
				if wasStarted {
					started = append(started, u)
				} else {
					waiting = append(waiting, u)
				}
				return
			}
			n := min(len(u.Keys), int(math.Ceil(budget)))
			wu := u
			wu.Keys, wu.Concurrency = u.Keys[:n], 0
			wrep, _ := rc.Work(ctx, wu)
			budget -= float64(wrep.Examined)
			rest := u.Keys[n:]
			if wrep.Actions[reconcile.ActionPaced] > 0 {
				rest = u.Keys[wrep.Examined-1:]
				paced[u.Lane] = true
				if wrep.Examined > 1 {
					progress[u.Lane] = true
				}
			} else {
				progress[u.Lane] = true
				if wrep.Actions[reconcile.ActionProviderDown] > 0 {
					rest = nil
				}
			}
			if len(rest) > 0 {
				u.Keys = rest
				started = append(started, u)
			}
		}
		for _, u := range carried {
			work(u, true)
		}
		for _, u := range uq.q {
			work(u, false)
		}
		// Units not started stay on the queue (Find sees them waiting);
		// units started go on first the next second.
		carried, uq.q = started, waiting
		if len(carried) == 0 && len(uq.q) == 0 {
			budget = 0
		}
		for lane := range paced {
			if !progress[lane] && starvedSince[lane].IsZero() {
				starvedSince[lane] = w.now
			}
		}
		for lane := range progress {
			delete(starvedSince, lane)
		}
		switch w.now {
		case recovery:
			var exp []time.Time
			backlog[0], exp = w.backlog(ctx, led, recovery)
			bound = drainBound(exp, recovery, min(cfg.Limit, cfg.Pace)-cfg.Rate, end.Sub(recovery))
		case recovery.Add(15 * time.Minute):
			backlog[1], _ = w.backlog(ctx, led, recovery)
		}
		if Trace && w.now.Sub(start)%time.Minute == 59*time.Second {
			w.trace(ctx, led, recovery, found)
		}
		if drain < 0 && !w.now.Before(recovery) && w.now.Sub(start)%(10*time.Second) == 0 {
			if left, _ := w.backlog(ctx, led, recovery); left == 0 {
				drain = w.now.Sub(recovery)
			}
		}
	}
	atEnd, _ := w.backlog(ctx, led, recovery)
	res := Result{Config: cfg, Messages: n, PeakRate: max(w.prov.peak, w.mail.peak), Throttled: w.prov.throttled + w.mail.throttled, Drain: drain, Bound: bound, DLQ: w.dlq, ReconcileFound: found,
		BacklogAtRecovery: backlog[0], BacklogAt15: backlog[1], BacklogAtEnd: atEnd,
		TunedWorkerRows: int(workerRows), TunedHandOut: max(maxRows, reconcile.Tune(rc.Config(), min(cfg.Limit, cfg.Pace)).Rows)}
	res.Optimum = optimum(w.order, start, recovery, end, min(cfg.Limit, cfg.Pace))
	res.OrderInTime, res.OrderDrain = productOrder(w.order, start, recovery, end, min(cfg.Limit, cfg.Pace), true)
	res.EDFInTime, res.EDFDrain = productOrder(w.order, start, recovery, end, min(cfg.Limit, cfg.Pace), false)
	res.WatchFinds = w.watchFinds
	if cfg.EmailPercent > 0 {
		res.Email = delaysOf(w.order, "email")
	}
	if drain > 0 {
		calls := 0
		for t := recovery; t.Before(recovery.Add(drain)); t = t.Add(time.Second) {
			calls += w.prov.perSec[t.Unix()]
		}
		res.Utilisation = float64(calls) / (drain.Seconds() * float64(min(cfg.Limit, cfg.Pace)))
	}
	for _, m := range w.order {
		if len(m.delivered) > 0 && (m.expires.IsZero() || !m.delivered[0].After(m.expires)) {
			res.InTime++
		}
		switch d := len(m.delivered); {
		case d == 1:
			res.DeliveredOnce++
		case d > 1:
			res.DeliveredTwice++
		}
		for _, t := range m.delivered {
			if !m.expires.IsZero() && t.After(m.expires) {
				res.SentAfterExpiry++
				break
			}
		}
		if len(m.delivered) > 0 {
			continue
		}
		if !m.expires.IsZero() && m.expires.Before(end) {
			res.ExpiredNotSent++
			continue
		}
		if r, err := led.Get(ctx, m.key); err == nil && !r.State.Final() {
			res.Pending++
			continue
		}
		res.Lost++
	}
	for _, op := range []string{ledgertest.OpClaim, ledgertest.OpTakeOver, ledgertest.OpMark, ledgertest.OpRelease} {
		res.Writes += led.Calls(op)
	}
	res.Writes += store.Writes()
	res.WritesPerMsg = float64(res.Writes) / float64(max(1, n))
	return res, nil
}

// optimum is Result.Optimum: msgs in arrival order, no capacity before
// recovery, capacity a second from then until end.
func optimum(msgs []*msg, start, recovery, end time.Time, capacity int) int {
	h := &deadlines{}
	i, n := 0, 0
	for t := start; t.Before(end); t = t.Add(time.Second) {
		for ; i < len(msgs) && !msgs[i].arrived.After(t); i++ {
			d := msgs[i].expires
			if d.IsZero() {
				d = end
			}
			heap.Push(h, d)
		}
		if t.Before(recovery) {
			continue
		}
		for c := capacity; c > 0 && h.Len() > 0; {
			if d := heap.Pop(h).(time.Time); !d.Before(t) {
				n++
				c--
			}
		}
	}
	return n
}

// productOrder is the offline schedule in the product's order, knowing
// every arrival, with the same capacity as optimum: each second, first
// the messages whose validity is within pace.Urgent (earliest deadline
// first), then the backlog (the messages arrived before recovery), then
// the rest, each in pace.Order (earliest deadline first, a message
// without validity ranked pace.Horizon after its arrival); with
// backlogFirst false, every message in pace.Order alone (earliest
// deadline first, the product's order before the backlog went first).
// It returns the messages delivered within validity, and how long after
// recovery the backlog (the messages arrived before recovery and still
// valid) was empty (-1: never): what the order allows at best.
func productOrder(msgs []*msg, start, recovery, end time.Time, capacity int, backlogFirst bool) (inTime int, drain time.Duration) {
	// The queues: [backlog, new] × [with a deadline, without].
	var q [2][2]ranked
	i := 0
	drain = -1
	valid := func(m *msg, t time.Time) bool { return m.expires.IsZero() || !m.expires.Before(t) }
	// pop takes the first of the queues qs in pace.Order, dropping the
	// messages whose validity passed (they need not be sent, nor can
	// they be); urgent: only a message within pace.Urgent of its deadline.
	pop := func(t time.Time, urgent bool, qs ...*ranked) bool {
		for {
			var best *ranked
			for _, h := range qs {
				if h.Len() > 0 && (best == nil || rankOf((*best)[0]).After(rankOf((*h)[0]))) {
					best = h
				}
			}
			if best == nil {
				return false
			}
			m := (*best)[0]
			if !valid(m, t) {
				heap.Pop(best)
				continue
			}
			if urgent && !rankOf(m).Urgent(t, pace.Urgent) {
				return false
			}
			heap.Pop(best)
			return true
		}
	}
	for t := start; t.Before(end); t = t.Add(time.Second) {
		for ; i < len(msgs) && !msgs[i].arrived.After(t); i++ {
			m := msgs[i]
			b, d := 1, 0
			if m.arrived.Before(recovery) && backlogFirst {
				b = 0
			}
			if m.expires.IsZero() {
				d = 1
			}
			heap.Push(&q[b][d], m)
		}
		if t.Before(recovery) {
			continue
		}
		for c := capacity; c > 0; c-- {
			if !pop(t, true, &q[0][0], &q[1][0]) && !pop(t, false, &q[0][0], &q[0][1]) && !pop(t, false, &q[1][0], &q[1][1]) {
				break
			}
			inTime++
		}
		if drain < 0 {
			// The backlog's messages not sent and still valid.
			left := 0
			for _, h := range []ranked{q[0][0], q[0][1], q[1][0], q[1][1]} {
				for _, m := range h {
					if m.arrived.Before(recovery) && valid(m, t) {
						left++
					}
				}
			}
			if left == 0 {
				drain = t.Sub(recovery)
			}
		}
	}
	return inTime, drain
}

// ranked is a min-heap of messages by the product's order
// (pace.Order.Rank, then arrival).
type ranked []*msg

func rankOf(m *msg) pace.Order { return pace.Order{Deadline: m.expires, Since: m.arrived} }

func (h ranked) Len() int           { return len(h) }
func (h ranked) Less(i, j int) bool { return rankOf(h[j]).After(rankOf(h[i])) }
func (h ranked) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *ranked) Push(x any)        { *h = append(*h, x.(*msg)) }
func (h *ranked) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// deadlines is a min-heap of deadlines.
type deadlines []time.Time

func (h deadlines) Len() int           { return len(h) }
func (h deadlines) Less(i, j int) bool { return h[i].Before(h[j]) }
func (h deadlines) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *deadlines) Push(x any)        { *h = append(*h, x.(time.Time)) }
func (h *deadlines) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func (w *world) arrive(n int) {
	c := mix[len(mix)-1]
	r := w.rng.IntN(100)
	for _, cl := range mix {
		if r < cl.percent {
			c = cl
			break
		}
		r -= cl.percent
	}
	req := notify.Request{TenantID: "acme", EventID: fmt.Sprintf("e%d", n), Channel: "sms", Class: c.name,
		Recipient: notify.Recipient{ID: fmt.Sprintf("user-%d", n), Phone: fmt.Sprintf("+1555%07d", n%10000000)},
		Template:  "code", Content: &notify.Content{Text: "your code is 123456"}}
	if w.cfg.EmailPercent > 0 && w.rng.IntN(100) < w.cfg.EmailPercent {
		req.Channel = "email"
		req.Recipient.Phone, req.Recipient.Email = "", fmt.Sprintf("u%d@example.com", n)
		req.Content.Subject = "your code"
	}
	m := &msg{key: req.Key(), channel: string(req.Channel), arrived: w.now}
	if c.validity > 0 {
		// The request carries it (expires_at), as a producer sets it.
		m.expires = w.now.Add(c.validity)
		req.ExpiresAt = m.expires.UTC().Format(time.RFC3339)
	}
	b, _ := json.Marshal(req)
	w.msgs[m.key] = m
	w.order = append(w.order, m)
	w.queue = append(w.queue, &sqsMsg{id: fmt.Sprintf("m%d", n), body: string(b), visible: w.now})
}

// sendVisible hands every visible message to the sender in batches of 10;
// a failed record is visible again after the visibility timeout, and
// dead-lettered after MaxReceive receives.
func (w *world) sendVisible(ctx context.Context, snd *sender.Sender) {
	var due, keep, later []*sqsMsg
	for _, m := range w.queue {
		if m.visible.After(w.now) {
			later = append(later, m)
		} else {
			due = append(due, m)
		}
	}
	for batch := range slices.Chunk(due, 10) {
		ev := events.SQSEvent{}
		for _, m := range batch {
			m.receives++
			ev.Records = append(ev.Records, events.SQSMessage{MessageId: m.id, Body: m.body,
				Attributes: map[string]string{"ApproximateReceiveCount": fmt.Sprint(m.receives)}})
		}
		resp, _ := snd.HandleSQS(ctx, ev)
		failed := map[string]bool{}
		for _, f := range resp.BatchItemFailures {
			failed[f.ItemIdentifier] = true
		}
		for _, m := range batch {
			switch {
			case !failed[m.id]:
			case m.receives >= w.cfg.MaxReceive:
				w.dlq++
			default:
				m.visible = w.now.Add(w.cfg.Visibility)
				keep = append(keep, m)
			}
		}
	}
	w.queue = append(keep, later...)
}

// Trace, when set, makes Run write a line a minute to stderr: the
// backlog, the messages first delivered in the minute by class (old:
// arrived before recovery) and those expired unsent since recovery, the
// notification queue's depth and the rows handed out so far. For
// diagnosis (make sim-outage TRACE=1).
var Trace bool

// trace writes Trace's line.
func (w *world) trace(ctx context.Context, led ledger.Ledger, recovery time.Time, found int) {
	from := w.now.Add(-59 * time.Second)
	sent := map[string]int{}
	expired := map[string]int{}
	for _, m := range w.order {
		cls := "mkt"
		switch {
		case m.expires.IsZero():
		case m.expires.Sub(m.arrived) == 10*time.Minute:
			cls = "otp"
		default:
			cls = "trn"
		}
		age := "new"
		if m.arrived.Before(recovery) {
			age = "old"
		}
		if len(m.delivered) > 0 && !m.delivered[0].Before(from) {
			sent[age+cls]++
		}
		if len(m.delivered) == 0 && !m.expires.IsZero() && !m.expires.After(w.now) && !m.expires.Before(recovery) {
			expired[age+cls]++
		}
	}
	bl, _ := w.backlog(ctx, led, recovery)
	fmt.Fprintf(os.Stderr, "t=%s backlog=%d sent=%v expired(since recovery, cum)=%v sqs=%d found=%d\n", w.now.Sub(recovery).Round(time.Second), bl, sent, expired, len(w.queue), found)
}

// backlog counts the messages that arrived before recovery and are not
// settled now (not delivered, not final in the ledger, not past their
// validity), with their expiries (zero: no validity).
func (w *world) backlog(ctx context.Context, led ledger.Ledger, recovery time.Time) (int, []time.Time) {
	n := 0
	var exp []time.Time
	for _, m := range w.order {
		if !m.arrived.Before(recovery) {
			break
		}
		if len(m.delivered) > 0 || !m.expires.IsZero() && !w.now.Before(m.expires) {
			continue
		}
		if r, err := led.Get(ctx, m.key); err == nil && r.State.Final() {
			continue
		}
		n++
		exp = append(exp, m.expires)
	}
	return n, exp
}
