package main

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sendonce/sendonce/internal/rie"
)

// busyThreshold is the CPU, in cores, that processes outside the
// benchmark may use during a phase before the phase is flagged.
const busyThreshold = 0.5

// cpuWatch tells how many cores processes other than the benchmark's own
// (this process, the Node driver and DynamoDB Local) kept busy during a
// phase, from /proc/stat and /proc/<pid>/stat.
type cpuWatch struct {
	ours  []int
	start cpuSample
}

type cpuSample struct {
	at   time.Time
	busy time.Duration // every CPU's busy time
	ours time.Duration // our processes' CPU time
	ok   bool          // /proc told both
}

// newCPUWatch watches every process but pids (those > 0).
func newCPUWatch(pids ...int) *cpuWatch {
	return &cpuWatch{ours: slices.DeleteFunc(pids, func(p int) bool { return p <= 0 })}
}

func (c *cpuWatch) sample() cpuSample {
	b, err := os.ReadFile("/proc/stat")
	s := cpuSample{at: time.Now(), busy: procStatBusy(b), ok: err == nil}
	for _, pid := range c.ours {
		d, ok := rie.CPUTime(pid)
		s.ok = s.ok && ok
		s.ours += d
	}
	return s
}

// Begin starts a phase.
func (c *cpuWatch) Begin() { c.start = c.sample() }

// End ends the phase and returns the cores that other processes used on
// average during it, and the 1-minute load average at its end. ok is false
// where /proc could not tell.
func (c *cpuWatch) End() (others, load float64, ok bool) {
	e := c.sample()
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		_, _ = fmt.Sscan(string(b), &load)
	}
	wall := e.at.Sub(c.start.at)
	if !e.ok || !c.start.ok || wall <= 0 {
		return 0, load, false
	}
	return max(0, float64(e.busy-c.start.busy-(e.ours-c.start.ours))/float64(wall)), load, true
}

// procStatBusy returns the busy time, summed over every CPU, of the "cpu"
// line of /proc/stat: all but idle and iowait (guest and guest_nice are
// already counted in user).
func procStatBusy(b []byte) time.Duration {
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 5 || f[0] != "cpu" {
		return 0
	}
	var ticks uint64
	for i, x := range f[1:min(len(f), 9)] {
		if v, err := strconv.ParseUint(x, 10, 64); err == nil && i != 3 && i != 4 {
			ticks += v
		}
	}
	return time.Duration(ticks) * time.Second / rie.ClockTicks
}

// ProcCPU returns the CPU time pid has used so far (0 when /proc cannot
// tell).
func ProcCPU(pid int) time.Duration {
	d, _ := rie.CPUTime(pid)
	return d
}

// dynamoLocalPID is DynamoDB Local's process id as scripts/local-aws.sh
// exports it (make bench runs it), or 0.
func dynamoLocalPID() int {
	pid, _ := strconv.Atoi(os.Getenv("SENDONCE_LOCAL_DYNAMODB_PID"))
	return pid
}
