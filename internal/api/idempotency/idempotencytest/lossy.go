package idempotencytest

import (
	"context"
	"sync"
	"time"

	"github.com/sendonce/sendonce/internal/api/idempotency"
)

// Lossy wraps idempotency.Records and, when told to, loses the answer of
// a write the way a reset connection does under the SDK: the write
// applies, its answer is lost, and the SDK sends the same request again;
// the caller gets the answer of that second try. It is safe for
// concurrent use.
type Lossy struct {
	idempotency.Records

	mu   sync.Mutex
	lose int
	lost int
}

// NewLossy returns a Lossy over r that loses nothing until told to.
func NewLossy(r idempotency.Records) *Lossy { return &Lossy{Records: r} }

// LoseNext makes the next n writes (of any kind) that apply lose their
// first answer.
func (l *Lossy) LoseNext(n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lose += n
}

// Lost returns how many answers were lost.
func (l *Lossy) Lost() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

// take reports whether this applied write's answer is to be lost.
func (l *Lossy) take() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lose == 0 {
		return false
	}
	l.lose--
	l.lost++
	return true
}

// twice runs write, and once more if its answer is to be lost.
func (l *Lossy) twice(write func() (idempotency.Record, error)) (idempotency.Record, error) {
	cur, err := write()
	if err == nil && l.take() {
		return write()
	}
	return cur, err
}

// Create implements idempotency.Records.
func (l *Lossy) Create(ctx context.Context, r idempotency.Record, now time.Time) (idempotency.Record, error) {
	return l.twice(func() (idempotency.Record, error) { return l.Records.Create(ctx, r, now) })
}

// Replace implements idempotency.Records.
func (l *Lossy) Replace(ctx context.Context, r idempotency.Record, token string) (idempotency.Record, error) {
	return l.twice(func() (idempotency.Record, error) { return l.Records.Replace(ctx, r, token) })
}

// Complete implements idempotency.Records.
func (l *Lossy) Complete(ctx context.Context, id, token string, status int, body string) (idempotency.Record, error) {
	return l.twice(func() (idempotency.Record, error) { return l.Records.Complete(ctx, id, token, status, body) })
}
