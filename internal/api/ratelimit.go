package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"

	"github.com/sendonce/sendonce/internal/tableschema"
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

// RateWindows counts requests in fixed windows. Implementations are safe
// for concurrent use and pass package ratelimittest's suite
// (DynamoWindows; ratelimittest.Mem in unit tests).
type RateWindows interface {
	// Add counts one request in window id if it holds fewer than limit,
	// and reports whether it did. The window is kept until at least
	// expires.
	Add(ctx context.Context, id string, limit int, expires time.Time) (bool, error)
}

// Limiter applies fixed-window rate limits: one window per scope, subject
// and window start, "<scope>#<hash of subject>#<window start, Unix
// seconds>", counted in RateWindows and kept one window after it ends.
type Limiter struct {
	windows RateWindows
	now     func() time.Time
}

// NewLimiter returns a Limiter over windows; now nil means time.Now.
func NewLimiter(windows RateWindows, now func() time.Time) *Limiter {
	if now == nil {
		now = time.Now
	}
	return &Limiter{windows: windows, now: now}
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
		return false, 0, fmt.Errorf("api: rate limit %s: %w", scope, err)
	case !ok:
		return false, end.Sub(now), nil
	}
	return true, 0, nil
}

// DynamoDB is the part of the DynamoDB client DynamoWindows uses.
type DynamoDB interface {
	tableschema.UpdateAPI
}

// DynamoWindows keeps rate windows in the one sendonce table: one item per
// window, pk "rate#<window id>", incremented with one conditional
// UpdateItem (ADD, allowed while the count is below the limit), with its
// TTL at the window's expiry.
type DynamoWindows struct {
	db    DynamoDB
	table string
}

// NewDynamoWindows returns the RateWindows on table through db.
func NewDynamoWindows(db DynamoDB, table string) *DynamoWindows {
	return &DynamoWindows{db: db, table: table}
}

// Add implements RateWindows.
func (d *DynamoWindows) Add(ctx context.Context, id string, limit int, expires time.Time) (bool, error) {
	count := expression.Name("count")
	err := tableschema.Update(ctx, d.db, d.table, "rate#"+id,
		expression.Add(count, expression.Value(1)).Set(expression.Name(tableschema.TTLAttribute), expression.Value(expires.Unix())),
		expression.AttributeNotExists(count).Or(count.LessThan(expression.Value(limit))))
	if _, ok := tableschema.ConditionFailed(err); ok {
		return false, nil
	}
	return err == nil, err
}
