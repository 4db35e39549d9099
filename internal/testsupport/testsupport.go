// Package testsupport holds the small fakes many sendonce tests share: a
// clock that moves only when told to, a log sink safe for concurrent
// writers, AWS SDK errors and a reader of what moto_server recorded, and a
// provider simulator
// served over HTTP for the length of a test. Fakes of a provider adapter live in provider/providertest.
//
// The real components the tests run against (DynamoDB Local, moto_server,
// the Lambda emulator) are reached through internal/testenv and
// internal/rie; nothing here stands in for them.
package testsupport

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/sendonce/sendonce/internal/dispatch"
	"github.com/sendonce/sendonce/internal/provider/simulator"
	"github.com/sendonce/sendonce/internal/testenv"
	"github.com/sendonce/sendonce/provider"
)

// Start is a fixed time for clocks to start at: a whole millisecond, in
// UTC, so that stores keeping milliseconds round-trip it exactly.
var Start = time.Date(2026, time.November, 29, 12, 0, 0, 0, time.UTC)

// Clock is a fake clock that moves only when told to. It is safe for
// concurrent use. Pass its Now method wherever code takes a clock.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock that reads start until it is moved.
func NewClock(start time.Time) *Clock {
	return &Clock{now: start}
}

// Now returns the clock's current time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d (backward if d is negative) and
// returns the new time.
func (c *Clock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// Buffer is a bytes.Buffer safe for concurrent writes and reads: the log
// sink of code whose goroutines write while a test reads. The zero value
// is an empty buffer ready to use.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p to the buffer.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Logger returns a JSON logger at level that writes into b.
func (b *Buffer) Logger(level slog.Level) *slog.Logger {
	return slog.New(slog.NewJSONHandler(b, &slog.HandlerOptions{Level: level}))
}

// AWSError returns the error an AWS SDK client returns for an answer of
// HTTP status carrying error code and message.
func AWSError(status int, code, message string) error {
	return &smithyhttp.ResponseError{
		Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}},
		Err:      &smithy.GenericAPIError{Code: code, Message: message},
	}
}

// MotoData decodes what moto_server at base URL moto has recorded (its
// /moto-api/data.json: sent SMS, emails, ...) into v, and fails t when it
// cannot.
func MotoData(t testing.TB, moto string, v any) {
	t.Helper()
	if err := testenv.MotoData(t.Context(), http.DefaultClient, moto, v); err != nil {
		t.Fatal(err)
	}
}

// Simulator starts the provider simulator with opts behind an httptest
// server and returns it with the server's base URL. Both stop when t
// ends.
func Simulator(t testing.TB, opts simulator.Options) (*simulator.Simulator, string) {
	t.Helper()
	sim := simulator.New(opts)
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(func() {
		sim.Close()
		srv.Close()
	})
	return sim, srv.URL
}

// Dispatcher builds d with dispatch.New, the dispatcher a test's sender
// and reconciler share, and fails t when d is not valid.
func Dispatcher(t testing.TB, d dispatch.Dispatcher) *dispatch.Dispatcher {
	t.Helper()
	built, err := dispatch.New(d)
	if err != nil {
		t.Fatal(err)
	}
	return built
}

// MotoRecords reads moto_server's record of what it sent (its
// /moto-api/data.json, which holds every service's state and grows with
// every test sharing the server) for a conformance harness's Received:
// once after each run of sends, not once per key. Track wraps an adapter
// so that each of its Sends marks the record stale; Read fetches it again
// only then, so it never answers from before a send.
type MotoRecords struct {
	moto string
	mu   sync.Mutex
	gen  uint64 // sends started or finished
	at   uint64 // gen when raw was read
	raw  json.RawMessage
}

// NewMotoRecords reads the records of the moto_server at endpoint moto.
func NewMotoRecords(moto string) *MotoRecords { return &MotoRecords{moto: moto} }

// Track returns a that marks r stale before and after each Send.
func (r *MotoRecords) Track(a provider.Adapter) provider.Adapter {
	return trackedAdapter{Adapter: a, r: r}
}

type trackedAdapter struct {
	provider.Adapter
	r *MotoRecords
}

func (a trackedAdapter) Send(ctx context.Context, m provider.Message) (provider.Receipt, error) {
	a.r.stale()
	defer a.r.stale()
	return a.Adapter.Send(ctx, m)
}

func (r *MotoRecords) stale() {
	r.mu.Lock()
	r.gen++
	r.mu.Unlock()
}

// Read decodes moto's records into v, fetching them when a tracked
// adapter sent since the last fetch.
func (r *MotoRecords) Read(t testing.TB, v any) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.raw == nil || r.at != r.gen {
		var raw json.RawMessage
		MotoData(t, r.moto, &raw)
		r.raw, r.at = raw, r.gen
	}
	if err := json.Unmarshal(r.raw, v); err != nil {
		t.Fatalf("moto records: %v", err)
	}
}
