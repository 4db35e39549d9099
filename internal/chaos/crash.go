package chaos

import (
	"context"
	"math/rand/v2"
	"sync"
	"syscall"
	"time"

	"github.com/sendonce/sendonce/internal/localpipeline"
	"github.com/sendonce/sendonce/internal/rie"
)

// reconcilerShare is the fraction of a Crasher's kills aimed at a
// reconciler.
const reconcilerShare = 0.15

// CrashStats are a Crasher's totals.
type CrashStats struct {
	// SenderKills and ReconcilerKills count bootstraps killed with
	// SIGKILL at random moments; AfterLostAnswer the workers killed on
	// purpose right after a lost DynamoDB answer (Kill).
	SenderKills, ReconcilerKills, AfterLostAnswer int
}

// Crasher kills function bootstraps with SIGKILL at random moments, as a
// Lambda sandbox can die at any instruction. The emulator starts a new
// bootstrap at the instance's next invoke.
type Crasher struct {
	senders     []*rie.Instance
	reconcilers []*rie.Instance
	mean        time.Duration

	mu    sync.Mutex
	rng   *rand.Rand
	stats CrashStats

	// OnKill, if set, is told of every random kill (with c's lock held).
	OnKill func(inst *rie.Instance)
}

// NewCrasher returns a Crasher that kills, on average every mean, the
// bootstrap of a random sender, or of a random reconciler with
// probability reconcilerShare.
func NewCrasher(senders, reconcilers []*rie.Instance, mean time.Duration, seed uint64) *Crasher {
	return &Crasher{senders: senders, reconcilers: reconcilers, mean: mean, rng: rand.New(rand.NewPCG(seed, seed^0xc4a5))}
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
		localpipeline.Sleep(ctx, d)
		if ctx.Err() != nil {
			return
		}
		c.killOne()
	}
}

func (c *Crasher) killOne() {
	c.mu.Lock()
	defer c.mu.Unlock()
	reconciler := c.rng.Float64() < reconcilerShare
	inst := c.senders[c.rng.IntN(len(c.senders))]
	if reconciler {
		inst = c.reconcilers[c.rng.IntN(len(c.reconcilers))]
	}
	if !kill(inst) {
		return // no bootstrap running: the emulator starts one at its next invoke
	}
	if reconciler {
		c.stats.ReconcilerKills++
	} else {
		c.stats.SenderKills++
	}
	if c.OnKill != nil {
		c.OnKill(inst)
	}
}

// kill SIGKILLs inst's running bootstrap and reports whether one was
// running.
func kill(inst *rie.Instance) bool {
	pids := inst.FunctionPIDs()
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	return len(pids) > 0
}

// Kill SIGKILLs inst's bootstrap now (a worker dying right after a lost
// DynamoDB answer) and reports whether one was running.
func (c *Crasher) Kill(inst *rie.Instance) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !kill(inst) {
		return false
	}
	c.stats.AfterLostAnswer++
	return true
}

// Stats returns the totals so far.
func (c *Crasher) Stats() CrashStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}
