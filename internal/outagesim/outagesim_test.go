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
var scale = flag.Int("outage.scale", 100, "with -outage.full: divide every rate by this (1 runs 1,000 msg/s)")

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

// TestOutageFull is make sim-outage.
func TestOutageFull(t *testing.T) {
	if !*full {
		t.Skip("make sim-outage (-outage.full)")
	}
	s := *scale
	res, err := Run(context.Background(), Config{Rate: 1000 / s, Limit: 1500 / s, Pace: 1500 / s, Down: time.Hour, Total: 2 * time.Hour,
		AmbiguousPercent: 10, WorkerRows: 2000 / s, Visibility: 180 * time.Second, MaxReceive: 5, Schedule: time.Minute, Scale: s, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	res.Table(os.Stdout)
	if !res.OK() {
		t.Fail()
	}
}
