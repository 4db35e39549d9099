// Package ratelimit is the HTTP API's fixed-window rate limits (package
// api): a Limiter counts one request of a subject in a scope against a
// Rate, in Windows kept in the one table.
//
// A Limiter decides; Windows only count conditionally (package
// dynamoratelimit in the one table, package memratelimit in unit tests,
// both held to package ratelimittest's suite).
package ratelimit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Rate is a fixed-window rate limit: at most Limit requests per Window.
type Rate struct {
	Limit  int
	Window time.Duration
}

// String formats r as ParseRate reads it ("100/1m0s").
func (r Rate) String() string { return strconv.Itoa(r.Limit) + "/" + r.Window.String() }

// ErrInvalidRate is returned by ParseRate for a malformed rate.
var ErrInvalidRate = errors.New("invalid rate")

// ParseRate reads a rate written "LIMIT/WINDOW", e.g. "100/1m" or "5/30s":
// LIMIT a positive integer, WINDOW a Go duration of at least one second in
// whole seconds. It returns an error matching ErrInvalidRate otherwise.
func ParseRate(s string) (Rate, error) {
	ls, ws, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok {
		return Rate{}, fmt.Errorf("%w %q: want LIMIT/WINDOW, e.g. 100/1m", ErrInvalidRate, s)
	}
	n, err := strconv.Atoi(ls)
	if err != nil || n < 1 {
		return Rate{}, fmt.Errorf("%w %q: limit must be a positive integer", ErrInvalidRate, s)
	}
	w, err := time.ParseDuration(ws)
	if err != nil || w < time.Second || w%time.Second != 0 {
		return Rate{}, fmt.Errorf("%w %q: window must be a Go duration of whole seconds, at least 1s (e.g. 1m)", ErrInvalidRate, s)
	}
	return Rate{Limit: n, Window: w}, nil
}

// Windows counts requests in fixed windows. Implementations are safe for
// concurrent use and pass package ratelimittest's suite
// (dynamoratelimit.Windows; memratelimit.Windows in unit tests).
type Windows interface {
	// Add counts one request in window id if it holds fewer than limit,
	// and reports whether it did. The window is kept until at least
	// expires.
	Add(ctx context.Context, id string, limit int, expires time.Time) (bool, error)
}

// Limiter applies fixed-window rate limits: one window per scope, subject
// and window start, "<scope>#<hash of subject>#<window start, Unix
// seconds>", counted in Windows and kept one window after it ends. It is
// safe for concurrent use.
type Limiter struct {
	windows Windows
	now     func() time.Time
}

// Config configures a Limiter. The zero value is the production setting.
type Config struct {
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// New returns a Limiter over windows (dynamoratelimit.New for the
// sendonce table).
func New(windows Windows, cfg Config) *Limiter {
	l := &Limiter{windows: windows, now: cfg.Now}
	if l.now == nil {
		l.now = time.Now
	}
	return l
}

// Allow counts one request of subject in scope against r. When the window
// is full it returns false and how long until the window ends (the
// Retry-After), without counting. subject is hashed into the window's id,
// so it may be any string.
func (l *Limiter) Allow(ctx context.Context, scope, subject string, r Rate) (bool, time.Duration, error) {
	now := l.now()
	w := int64(r.Window / time.Second)
	start := now.Unix() / w * w
	end := time.Unix(start+w, 0)
	sum := sha256.Sum256([]byte(subject))
	id := scope + "#" + hex.EncodeToString(sum[:16]) + "#" + strconv.FormatInt(start, 10)
	ok, err := l.windows.Add(ctx, id, r.Limit, end.Add(r.Window))
	switch {
	case err != nil:
		return false, 0, fmt.Errorf("ratelimit: %s: %w", scope, err)
	case !ok:
		return false, end.Sub(now), nil
	}
	return true, 0, nil
}
