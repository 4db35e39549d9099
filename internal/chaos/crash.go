package chaos

import (
	"context"
	"math/rand/v2"
	"sync"
	"syscall"
	"time"

	"github.com/sendonce/sendonce/internal/rie"
)

// CrashStats are a Crasher's totals.
type CrashStats struct {
	// SenderKills and ReconcilerKills count bootstraps killed with
	// SIGKILL; InFlightKills those killed while the provider front had a
	// call in flight; Misses the attempts that found no bootstrap running
	// (the emulator starts one at its next invoke).
	SenderKills, ReconcilerKills, InFlightKills, Misses int
	// Restarts counts bootstraps seen running with a new process id after
	// one of their instance's bootstraps was killed: the emulator
	// restarted the function at its next invoke.
	Restarts int
	// AfterLostAnswer counts the workers killed on purpose right after a
	// lost DynamoDB answer (Kill).
	AfterLostAnswer int
}

// Crasher kills function bootstraps with SIGKILL at random moments, as a
// Lambda sandbox can die at any instruction.
type Crasher struct {
	senders        []*rie.Instance
	reconcilers    []*rie.Instance
	mean           time.Duration
	reconcileShare float64
	inFlight       func() int64
	rng            *rand.Rand

	mu     sync.Mutex
	stats  CrashStats
	killed map[int]bool          // pids killed
	last   map[*rie.Instance]int // the bootstrap pid last seen per instance

	// OnKill, if set, is told of every random kill (with c's lock held).
	OnKill func(inst *rie.Instance)
}

// NewCrasher returns a Crasher that kills, on average every mean, the
// bootstrap of a random sender, or of a random reconciler with
// probability reconcileShare. inFlight reports provider calls in flight
// (may be nil).
func NewCrasher(senders, reconcilers []*rie.Instance, mean time.Duration, reconcileShare float64, inFlight func() int64, seed uint64) *Crasher {
	return &Crasher{
		senders: senders, reconcilers: reconcilers, mean: mean, reconcileShare: reconcileShare, inFlight: inFlight,
		rng: rand.New(rand.NewPCG(seed, seed^0xc4a5)), killed: map[int]bool{}, last: map[*rie.Instance]int{},
	}
}

// Run kills until ctx ends.
func (c *Crasher) Run(ctx context.Context) {
	if c.mean <= 0 {
		return
	}
	for {
		c.mu.Lock()
		d := time.Duration(c.rng.ExpFloat64() * float64(c.mean))
		c.mu.Unlock()
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		c.Observe()
		c.killOne()
	}
}

func (c *Crasher) killOne() {
	c.mu.Lock()
	defer c.mu.Unlock()
	var inst *rie.Instance
	reconciler := len(c.reconcilers) > 0 && c.rng.Float64() < c.reconcileShare
	if reconciler {
		inst = c.reconcilers[c.rng.IntN(len(c.reconcilers))]
	} else {
		inst = c.senders[c.rng.IntN(len(c.senders))]
	}
	inFlight := c.inFlight != nil && c.inFlight() > 0
	if !c.kill(inst) {
		c.stats.Misses++
		return
	}
	if reconciler {
		c.stats.ReconcilerKills++
	} else {
		c.stats.SenderKills++
	}
	if c.OnKill != nil {
		c.OnKill(inst)
	}
	if inFlight {
		c.stats.InFlightKills++
	}
}

// kill SIGKILLs inst's running bootstrap; callers hold c.mu.
func (c *Crasher) kill(inst *rie.Instance) bool {
	pids := inst.FunctionPIDs()
	for _, pid := range pids {
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			c.killed[pid] = true
		}
	}
	return len(pids) > 0
}

// Kill SIGKILLs inst's bootstrap now (a worker dying right after a lost
// DynamoDB answer) and reports whether one was running.
func (c *Crasher) Kill(inst *rie.Instance) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.kill(inst) {
		return false
	}
	c.stats.AfterLostAnswer++
	return true
}

// Observe samples every instance's bootstrap and counts restarts.
func (c *Crasher) Observe() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, inst := range append(append([]*rie.Instance{}, c.senders...), c.reconcilers...) {
		if inst == nil {
			continue
		}
		for _, pid := range inst.FunctionPIDs() {
			if prev, ok := c.last[inst]; ok && prev != pid && c.killed[prev] {
				c.stats.Restarts++
			}
			c.last[inst] = pid
		}
	}
}

// Stats returns the totals so far.
func (c *Crasher) Stats() CrashStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}
