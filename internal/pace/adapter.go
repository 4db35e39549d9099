package pace

import (
	"context"
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
type Adapter struct {
	provider.Adapter
	Limiter *Limiter
	// MaxWait bounds the wait for a token (0: no wait).
	MaxWait time.Duration
	// Sleep waits d or until ctx ends; a timer when nil.
	Sleep func(ctx context.Context, d time.Duration) error
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

// Send implements provider.Adapter.
func (a *Adapter) Send(ctx context.Context, m provider.Message) (provider.Receipt, error) {
	name := a.Adapter.Name()
	waited := time.Duration(0)
	for {
		wait, err := a.Limiter.Acquire(ctx, name)
		if err != nil {
			// The shared counter cannot be read: nothing was sent.
			return provider.Receipt{}, &provider.Error{Kind: provider.Transient, Provider: name, Op: "send", Code: PacedCode, Reason: "pace store unavailable", Err: err}
		}
		if wait == 0 {
			break
		}
		if waited+wait > a.MaxWait {
			return provider.Receipt{}, &provider.Error{Kind: provider.Transient, Provider: name, Op: "send", Code: PacedCode, Reason: "paced: the provider's send rate is spent"}
		}
		if err := a.sleep(ctx, wait); err != nil {
			return provider.Receipt{}, &provider.Error{Kind: provider.Transient, Provider: name, Op: "send", Code: PacedCode, Reason: "paced", Err: err}
		}
		waited += wait
	}
	rc, err := a.Adapter.Send(ctx, m)
	a.Limiter.Observe(name, err)
	return rc, err
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
