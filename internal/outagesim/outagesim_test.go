package outagesim

import (
	"context"
	"flag"
	"os"
	"strings"
	"testing"
	"time"
)

var full = flag.Bool("outage.full", false, "run the full simulation of make sim-outage (two hours of virtual time) and print its table")
var (
	scale   = flag.Int("outage.scale", 100, "with -outage.full: divide every rate by this (1 runs 1,000 msg/s)")
	limit   = flag.Int("outage.limit", 1500, "with -outage.full: the provider's rate limit at full scale, sends/s (issue 25: 1,500)")
	pacing  = flag.Int("outage.pace", 0, "with -outage.full: the configured send rate at full scale, sends/s (0: the limit)")
	rate    = flag.Int("outage.rate", 1000, "with -outage.full: the messages arriving each second at full scale (issue 25: 1,000)")
	workers = flag.Int("outage.workers", 2000, "with -outage.full: the rows the reconcile workers examine a second at full scale")
	maxRows = flag.Int("outage.maxrows", 60000, "with -outage.full: the rows one Find hands out at most at full scale (SENDONCE_RECONCILE_MAX_ROWS)")
	channel = flag.Bool("outage.channel", false, "run the one-channel scenario of make sim-outage (the SMS provider down for an hour, email healthy; and the same without the outage) and print its table")
	trace   = flag.Bool("outage.trace", false, "with -outage.full or -outage.channel: write a line a minute to stderr (outagesim.Trace)")
)

// oneChannel is the one-channel scenario at full scale: half the
// messages by email, whose provider refuses 5 % of its calls (transient),
// the SMS provider down for the first hour.
func oneChannel(s, limit, pace int) Config {
	return Config{Rate: *rate / s, Limit: limit / s, Pace: pace / s, Down: time.Hour, Total: 2 * time.Hour,
		AmbiguousPercent: 10, WorkerRows: *workers / s, MaxRows: *maxRows / s, Visibility: 180 * time.Second, MaxReceive: 5, Schedule: time.Minute, Scale: s, Seed: 1,
		EmailPercent: 50, EmailFailPercent: 5}
}

// TestOneChannelFull is make sim-outage's second scenario.
func TestOneChannelFull(t *testing.T) {
	if !*channel {
		t.Skip("make sim-outage (-outage.channel)")
	}
	p := *pacing
	if p == 0 {
		p = *limit
	}
	Trace = *trace
	res, err := RunOneChannel(context.Background(), oneChannel(*scale, *limit, p))
	if err != nil {
		t.Fatal(err)
	}
	res.Table(os.Stdout)
	if !res.OK() {
		t.Fail()
	}
}

// TestOutageSmall is the scaled-down run of make test: 3 minutes down,
// 3 minutes of 10 % ambiguous timeouts, 4 messages a second against a
// provider limited to 6 a second. It fails on a message delivered twice or
// lost, or a second above the provider's limit.
func TestOutageSmall(t *testing.T) {
	t.Parallel()
	res, err := Run(context.Background(), Config{Rate: 4, Limit: 6, Pace: 6, Down: 3 * time.Minute, Total: 6 * time.Minute,
		AmbiguousPercent: 10, WorkerRows: 50, Visibility: 180 * time.Second, MaxReceive: 5, Schedule: time.Minute, Scale: 250, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	res.Table(&b)
	t.Log("\n" + b.String())
	if res.DeliveredTwice != 0 || res.Lost != 0 || res.PeakRate > res.Limit {
		t.Errorf("twice %d, lost %d, peak %d/s over %d/s: %v", res.DeliveredTwice, res.Lost, res.PeakRate, res.Limit, res.Failures())
	}
	if res.DeliveredOnce == 0 || res.Messages != 4*360 {
		t.Errorf("%d messages, %d delivered once: the simulation did not run", res.Messages, res.DeliveredOnce)
	}
}

// TestOutageFull is make sim-outage: issue 25's workload, with the
// provider's limit, the pace, the workers and the hand-out as flags (the
// goal is the same whatever they are).
func TestOutageFull(t *testing.T) {
	if !*full {
		t.Skip("make sim-outage (-outage.full)")
	}
	s := *scale
	p := *pacing
	if p == 0 {
		p = *limit
	}
	Trace = *trace
	res, err := Run(context.Background(), Config{Rate: *rate / s, Limit: *limit / s, Pace: p / s, Down: time.Hour, Total: 2 * time.Hour,
		AmbiguousPercent: 10, WorkerRows: *workers / s, MaxRows: *maxRows / s, Visibility: 180 * time.Second, MaxReceive: 5, Schedule: time.Minute, Scale: s, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	res.Table(os.Stdout)
	if !res.OK() {
		t.Fail()
	}
}

// TestOptimum: the offline earliest-deadline-first schedule over a tiny
// workload, checked by hand: capacity 1 a second from recovery (second
// 2); three messages arrive at second 0 with deadlines at seconds 2, 3
// and 3, one without validity at second 1. Seconds 2 and 3 deliver the
// deadline-2 message and one deadline-3 message; the other deadline-3
// message has passed by second 4, which delivers the one without
// validity: 3 in time.
func TestOptimum(t *testing.T) {
	t.Parallel()
	s := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	at := func(sec int) time.Time { return s.Add(time.Duration(sec) * time.Second) }
	msgs := []*msg{{arrived: at(0), expires: at(3)}, {arrived: at(0), expires: at(2)}, {arrived: at(0), expires: at(3)}, {arrived: at(1)}}
	if got := optimum(msgs, s, at(2), at(10), 1); got != 3 {
		t.Errorf("optimum = %d, want 3", got)
	}
	if got := optimum(msgs, s, at(2), at(4), 1); got != 2 {
		t.Errorf("optimum over 4 s = %d, want 2 (the run ends before the last)", got)
	}
}
