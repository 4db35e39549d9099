package ledgertest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sendonce/sendonce/internal/ledger"
)

// ErrAnswerLost is the error Lossy returns for a write whose answer it
// lost (LoseNext) or that it refused (FailNext).
var ErrAnswerLost = errors.New("ledgertest: answer lost")

// The write operations Lossy can fault.
const (
	OpClaim    = "claim"
	OpTakeOver = "takeover"
	OpMark     = "mark"
	OpRelease  = "release"
)

// Lossy wraps a ledger.Ledger and injects the faults of an unreliable
// network between a worker and its store, for tests of the code that uses
// the ledger:
//
//   - LoseNext(op, n): the next n writes of op apply, then the caller gets
//     ErrAnswerLost; Claim and TakeOver return the claim they took beside
//     it, as the ledger.Ledger contract demands of a lost answer.
//   - FailNext(op, n): the next n writes of op fail with ErrAnswerLost
//     without applying (Claim and TakeOver still return the claim they
//     would have taken).
//
// It is safe for concurrent use.
type Lossy struct {
	ledger.Ledger

	mu    sync.Mutex
	lose  map[string]int
	fail  map[string]int
	calls map[string]int
}

// NewLossy returns a Lossy over l that injects nothing until told to.
func NewLossy(l ledger.Ledger) *Lossy {
	return &Lossy{Ledger: l, lose: map[string]int{}, fail: map[string]int{}, calls: map[string]int{}}
}

// LoseNext makes the next n writes of op apply and lose their answer.
func (l *Lossy) LoseNext(op string, n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lose[op] += n
}

// FailNext makes the next n writes of op fail without applying.
func (l *Lossy) FailNext(op string, n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fail[op] += n
}

// Calls returns how many times op was called.
func (l *Lossy) Calls(op string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.calls[op]
}

// take reports what to do with this call of op: fail before applying, or
// lose the answer after.
func (l *Lossy) take(op string) (failBefore, loseAfter bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls[op]++
	if l.fail[op] > 0 {
		l.fail[op]--
		return true, false
	}
	if l.lose[op] > 0 {
		l.lose[op]--
		return false, true
	}
	return false, false
}

func lost(op, key string, applied bool) error {
	if applied {
		return fmt.Errorf("ledgertest: %s %s: write applied: %w", op, key, ErrAnswerLost)
	}
	return fmt.Errorf("ledgertest: %s %s: write not applied: %w", op, key, ErrAnswerLost)
}

// Claim implements ledger.Ledger.
func (l *Lossy) Claim(ctx context.Context, e ledger.Entry, lease time.Duration) (ledger.Claim, error) {
	failBefore, loseAfter := l.take(OpClaim)
	if failBefore {
		return ledger.Claim{Key: e.Key, ClaimID: "never-written-" + e.Key, Attempt: 1}, lost(OpClaim, e.Key, false)
	}
	c, err := l.Ledger.Claim(ctx, e, lease)
	if err == nil && loseAfter {
		return c, lost(OpClaim, e.Key, true)
	}
	return c, err
}

// TakeOver implements ledger.Ledger.
func (l *Lossy) TakeOver(ctx context.Context, cur ledger.Record, provider string, lease time.Duration) (ledger.Claim, error) {
	failBefore, loseAfter := l.take(OpTakeOver)
	if failBefore {
		return ledger.Claim{Key: cur.Key, ClaimID: "never-written-" + cur.Key, Attempt: cur.Attempts + 1}, lost(OpTakeOver, cur.Key, false)
	}
	c, err := l.Ledger.TakeOver(ctx, cur, provider, lease)
	if err == nil && loseAfter {
		return c, lost(OpTakeOver, cur.Key, true)
	}
	return c, err
}

// Mark implements ledger.Ledger.
func (l *Lossy) Mark(ctx context.Context, c ledger.Claim, o ledger.Outcome) error {
	failBefore, loseAfter := l.take(OpMark)
	if failBefore {
		return lost(OpMark, c.Key, false)
	}
	err := l.Ledger.Mark(ctx, c, o)
	if err == nil && loseAfter {
		return lost(OpMark, c.Key, true)
	}
	return err
}

// Release implements ledger.Ledger.
func (l *Lossy) Release(ctx context.Context, c ledger.Claim, reason string, retryAt time.Time) error {
	failBefore, loseAfter := l.take(OpRelease)
	if failBefore {
		return lost(OpRelease, c.Key, false)
	}
	err := l.Ledger.Release(ctx, c, reason, retryAt)
	if err == nil && loseAfter {
		return lost(OpRelease, c.Key, true)
	}
	return err
}
