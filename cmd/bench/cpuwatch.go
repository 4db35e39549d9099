package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sendonce/sendonce/internal/rie"
)

// busyThreshold is the CPU, in cores, that processes outside the
// benchmark may use during a phase before the phase is flagged.
const busyThreshold = 0.5

// cpuWatch tells how much CPU processes other than the benchmark's own
// (this process, the Node driver and DynamoDB Local) used during a phase,
// from /proc/stat and /proc/<pid>/stat.
type cpuWatch struct {
	ours  []int
	ncpu  int
	start cpuSample
}

type cpuSample struct {
	busy, all  uint64        // every CPU, in clock ticks
	ours       time.Duration // our processes' CPU time
	loadavg1   float64
	procsKnown bool
}

// newCPUWatch watches every process but pids.
func newCPUWatch(pids ...int) *cpuWatch {
	n := 0
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "cpu") && len(l) > 3 && l[3] >= '0' && l[3] <= '9' {
				n++
			}
		}
	}
	var ours []int
	for _, p := range pids {
		if p > 0 {
			ours = append(ours, p)
		}
	}
	return &cpuWatch{ours: ours, ncpu: max(n, 1)}
}

func (c *cpuWatch) sample() cpuSample {
	s := cpuSample{procsKnown: true}
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		s.busy, s.all = parseProcStat(b)
	}
	for _, pid := range c.ours {
		d, ok := rie.CPUTime(pid)
		s.procsKnown = s.procsKnown && ok
		s.ours += d
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 0 {
			s.loadavg1, _ = strconv.ParseFloat(f[0], 64)
		}
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
	all := float64(e.all - c.start.all)
	if all <= 0 || !e.procsKnown || !c.start.procsKnown {
		return 0, e.loadavg1, false
	}
	busy := float64(e.busy-c.start.busy) - (e.ours-c.start.ours).Seconds()*rie.ClockTicks
	// all is ticks summed over ncpu CPUs: all/ncpu ticks of wall time.
	return max(0, busy/(all/float64(c.ncpu))), e.loadavg1, true
}

// parseProcStat returns the busy and total ticks of the "cpu" line of
// /proc/stat (idle and iowait are not busy).
func parseProcStat(b []byte) (busy, all uint64) {
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 5 || f[0] != "cpu" {
		return 0, 0
	}
	for i, x := range f[1:] {
		v, err := strconv.ParseUint(x, 10, 64)
		if err != nil {
			continue
		}
		if i >= 8 { // guest and guest_nice are already counted in user
			break
		}
		all += v
		if i != 3 && i != 4 { // idle, iowait
			busy += v
		}
	}
	return busy, all
}

// ProcCPU returns the CPU time pid has used so far (0 when /proc cannot
// tell).
func ProcCPU(pid int) time.Duration {
	d, _ := rie.CPUTime(pid)
	return d
}

// dynamoLocalPID finds the DynamoDB Local process that listens on port.
func dynamoLocalPID(port string) int {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err != nil || !bytes.Contains(b, []byte("DynamoDBLocal")) {
			continue
		}
		args := strings.Split(string(b), "\x00")
		for i, a := range args {
			if a == "-port" && i+1 < len(args) && args[i+1] == port {
				pid, _ := strconv.Atoi(filepath.Base(d))
				return pid
			}
		}
	}
	return 0
}
