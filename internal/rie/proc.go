package rie

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// procID names one process: the start time guards against a pid that the
// kernel has handed to a new process.
type procID struct {
	pid   int
	start uint64
}

func (p procID) String() string { return strconv.Itoa(p.pid) }

type procStat struct {
	state byte
	ppid  int
	pgid  int
	start uint64
	ticks uint64 // utime + stime, in clock ticks
}

// readStat reads /proc/<pid>/stat.
func readStat(pid int) (procStat, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, false
	}
	return parseStat(b)
}

// parseStat parses a /proc/<pid>/stat line; ok is false when it is not
// one.
func parseStat(b []byte) (procStat, bool) {
	// The command name (field 2) may hold spaces and parentheses: the
	// fields that follow start after its last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return procStat{}, false
	}
	f := strings.Fields(string(b[i+2:]))
	if len(f) < 20 || len(f[0]) != 1 {
		return procStat{}, false
	}
	// f[0] is field 3 (state): ppid and pgrp are fields 4 and 5, utime
	// and stime 14 and 15, starttime 22.
	var n [5]uint64
	for j, k := range []int{1, 2, 11, 12, 19} {
		v, err := strconv.ParseUint(f[k], 10, 64)
		if err != nil {
			return procStat{}, false
		}
		n[j] = v
	}
	return procStat{state: f[0][0], ppid: int(n[0]), pgid: int(n[1]), ticks: n[2] + n[3], start: n[4]}, true
}

// ClockTicks is the kernel's USER_HZ, the unit of /proc's CPU times (100
// on every Linux architecture Go supports).
const ClockTicks = 100

// CPUTime returns the CPU time (user and system) process pid has used so
// far; ok is false when /proc cannot tell.
func CPUTime(pid int) (time.Duration, bool) {
	st, ok := readStat(pid)
	return time.Duration(st.ticks) * time.Second / ClockTicks, ok
}

// running reports whether st is a process that still runs (not a zombie).
func (st procStat) running() bool { return st.state != 'Z' && st.state != 'X' }

// alive reports whether p still runs.
func alive(p procID) bool {
	st, ok := readStat(p.pid)
	return ok && st.start == p.start && st.running()
}

// descendants returns every running process below root.
func descendants(root int) []procID {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]procID{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, ok := readStat(pid)
		if !ok || !st.running() {
			continue
		}
		children[st.ppid] = append(children[st.ppid], procID{pid: pid, start: st.start})
	}
	var out []procID
	queue := []int{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c.pid)
		}
	}
	return out
}

// killTree sends SIGKILL to p and, when p leads a process group other than
// ours, to that whole group.
func killTree(p procID) {
	st, ok := readStat(p.pid)
	if !ok || st.start != p.start {
		return
	}
	if st.pgid == p.pid && st.pgid != syscall.Getpgrp() {
		_ = syscall.Kill(-st.pgid, syscall.SIGKILL)
	}
	_ = syscall.Kill(p.pid, syscall.SIGKILL)
}

// waitGone waits up to d for every process in ps to stop running and
// returns those still running.
func waitGone(ps []procID, d time.Duration) []procID {
	deadline := time.Now().Add(d)
	for {
		var left []procID
		for _, p := range ps {
			if alive(p) {
				left = append(left, p)
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// listening reports whether process pid holds a TCP socket listening on
// port: proof that the emulator, not some other process, serves it.
func listening(pid, port int) bool {
	inodes := map[string]bool{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(table)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			// sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
			if len(f) < 10 || f[3] != "0A" {
				continue
			}
			_, hexPort, ok := strings.Cut(f[1], ":")
			if !ok {
				continue
			}
			if p, err := strconv.ParseUint(hexPort, 16, 16); err == nil && int(p) == port {
				inodes["socket:["+f[9]+"]"] = true
			}
		}
	}
	if len(inodes) == 0 {
		return false
	}
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	fds, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, fd := range fds {
		if target, err := os.Readlink(dir + "/" + fd.Name()); err == nil && inodes[target] {
			return true
		}
	}
	return false
}
