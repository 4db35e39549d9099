// Package retryafter reads a provider's Retry-After answer (RFC 9110,
// section 10.2.3: a number of seconds, or an HTTP-date) and carries it in
// the chain of the adapter's *provider.Error, where the pacer finds it
// (package pace: an error whose chain holds a RetryAfter method pauses
// the provider until then, for every container).
package retryafter

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Max bounds a Retry-After taken from a provider: a longer one is cut to
// it (a provider's mistake, or an hour of maintenance, must not pause
// sends for longer than the outage handling already covers).
const Max = 5 * time.Minute

// Error is a provider's Retry-After, kept as the Err of the adapter's
// *provider.Error.
type Error struct {
	// After is how long the provider asked not to be sent to.
	After time.Duration
}

// Error returns "retry after 2s".
func (e *Error) Error() string { return "retry after " + e.After.String() }

// RetryAfter returns e.After: what package pace reads (pace.RetryAfterer).
func (e *Error) RetryAfter() time.Duration { return e.After }

// Parse reads a Retry-After value at now: delay-seconds or an HTTP-date.
// It reports false for an empty, malformed or past value; a value above
// Max is cut to Max.
func Parse(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	var d time.Duration
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n <= 0 {
			return 0, false
		}
		d = time.Duration(min(n, int64(Max/time.Second))) * time.Second
	} else {
		t, err := http.ParseTime(v)
		if err != nil {
			return 0, false
		}
		if d = t.Sub(now); d <= 0 {
			return 0, false
		}
	}
	return min(d, Max), true
}

// From returns the *Error of h's Retry-After at now, or nil when h has
// none that Parse accepts.
func From(h http.Header, now time.Time) error {
	d, ok := Parse(h.Get("Retry-After"), now)
	if !ok {
		return nil
	}
	return &Error{After: d}
}
