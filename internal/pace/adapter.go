package pace

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/sendonce/sendonce/provider"
)

// PacedCode is the Code of the error a paced adapter returns when the
// provider's rate is spent: a Transient error, so the attempt is released
// (nothing was sent) and retried later with the same key.
const PacedCode = "paced"

// Adapter is a provider.Adapter whose sends go through a Limiter: each
// waits for a token at most MaxWait (then fails Transient, PacedCode), and
// its outcome adjusts the pace. Lookups are not paced.
//
// The dispatcher takes a send's token before it takes the row over
// (Reserve): a send the rate refuses then costs no ledger write. Send
// spends the token Reserve took for its message's key in the same second,
// and takes one itself otherwise (a first attempt, whose claim tells a new
// message from a redelivery and is written whatever the pace says).
type Adapter struct {
	provider.Adapter
	Limiter *Limiter
	// MaxWait bounds the wait for a token (0: no wait).
	MaxWait time.Duration
	// Sleep waits d or until ctx ends; a timer when nil.
	Sleep func(ctx context.Context, d time.Duration) error

	mu       sync.Mutex
	reserved map[string]int64 // message key → the Unix second its token is for
}

// Wrap returns a paced a, keeping its Looker if it has one; a provider the
// limiter has no rate for is returned as is.
func Wrap(a provider.Adapter, l *Limiter, maxWait time.Duration) provider.Adapter {
	if l == nil {
		return a
	}
	if _, ok := l.Limit(a.Name()); !ok {
		return a
	}
	p := &Adapter{Adapter: a, Limiter: l, MaxWait: maxWait}
	if lk, ok := a.(provider.Looker); ok {
		return looking{p, lk}
	}
	return p
}

type looking struct {
	*Adapter
	lk provider.Looker
}

func (l looking) Lookup(ctx context.Context, m provider.Message) (provider.LookupResult, error) {
	return l.lk.Lookup(ctx, m)
}

// Reserve takes the token of message key's next Send, waiting for it at
// most MaxWait; Send spends it if it comes within the same second (a token
// of a second that has passed is lost, as a block's unspent tokens are).
// It returns a Transient error with Code PacedCode when no token is free:
// the caller leaves the row as it is, nothing written. A key that already
// holds a token for this second takes no other.
func (a *Adapter) Reserve(ctx context.Context, key string) error {
	sec := a.Limiter.now().Unix()
	a.mu.Lock()
	if a.reserved[key] == sec {
		a.mu.Unlock()
		return nil
	}
	a.mu.Unlock()
	if err := a.acquire(ctx); err != nil {
		return err
	}
	sec = a.Limiter.now().Unix()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.reserved == nil {
		a.reserved = map[string]int64{}
	}
	if len(a.reserved) >= 1024 {
		for k, s := range a.reserved {
			if s < sec {
				delete(a.reserved, k)
			}
		}
	}
	a.reserved[key] = sec
	return nil
}

// spendReserved reports whether key holds a token Reserve took for the
// current second, and spends it.
func (a *Adapter) spendReserved(key string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	sec, ok := a.reserved[key]
	if !ok {
		return false
	}
	delete(a.reserved, key)
	return sec == a.Limiter.now().Unix()
}

// Send implements provider.Adapter.
func (a *Adapter) Send(ctx context.Context, m provider.Message) (provider.Receipt, error) {
	name := a.Adapter.Name()
	if !a.spendReserved(m.Key) {
		if err := a.acquire(ctx); err != nil {
			return provider.Receipt{}, err
		}
	}
	rc, err := a.Adapter.Send(ctx, m)
	a.Limiter.observe(ctx, name, err)
	return rc, err
}

// Hold records that the reconcile workers hold h of the provider's rate
// (Limiter.Hold).
func (a *Adapter) Hold(ctx context.Context, h Hold) error {
	return a.Limiter.Hold(ctx, a.Adapter.Name(), h)
}

// Rate returns the provider's configured rate (sends a second).
func (a *Adapter) Rate() int {
	n, _ := a.Limiter.Limit(a.Adapter.Name())
	return n
}

// acquire takes one token of the provider, waiting at most MaxWait; a
// send whose ctx carries an Order (WithOrder) takes it in that order
// (Limiter.AcquireOrdered).
func (a *Adapter) acquire(ctx context.Context) error {
	name := a.Adapter.Name()
	waited := time.Duration(0)
	o, ordered := OrderFrom(ctx)
	for {
		var (
			wait time.Duration
			err  error
		)
		if ordered {
			wait, err = a.Limiter.AcquireOrdered(ctx, name, o)
		} else {
			wait, err = a.Limiter.Acquire(ctx, name)
		}
		if err != nil {
			// The shared counter cannot be read: nothing was sent.
			return &provider.Error{Kind: provider.Transient, Provider: name, Op: "send", Code: PacedCode, Reason: "pace store unavailable", Err: err}
		}
		if wait == 0 {
			return nil
		}
		if waited+wait > a.MaxWait {
			return &provider.Error{Kind: provider.Transient, Provider: name, Op: "send", Code: PacedCode, Reason: "paced: the provider's send rate is spent"}
		}
		if err := a.sleep(ctx, wait); err != nil {
			return &provider.Error{Kind: provider.Transient, Provider: name, Op: "send", Code: PacedCode, Reason: "paced", Err: err}
		}
		waited += wait
	}
}

// IsPaced reports whether err is a paced adapter's refusal (Code
// PacedCode): this side's own rate, which says nothing about the
// provider's health.
func IsPaced(err error) bool {
	var pe *provider.Error
	return errors.As(err, &pe) && pe.Code == PacedCode
}

func (a *Adapter) sleep(ctx context.Context, d time.Duration) error {
	if a.Sleep != nil {
		return a.Sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
