package sendonce

import (
	"io"
	"time"

	"github.com/sendonce/sendonce/internal/metrics"
)

// Metrics receives sendonce's metrics (docs/operations.md names each and
// its dimensions): counters such as "Sent", "DuplicatesPrevented" and
// "ConfigErrors", and latencies such as "SendLatency". EMF, CloudWatch's
// embedded metric format, is one implementation; a program with another
// backend (Prometheus, OpenTelemetry, StatsD) implements it. Its methods
// are called from many goroutines at once and must not block.
type Metrics interface {
	// Count adds n to counter name.
	Count(name string, n int, dims ...Dim)
	// Latency records one duration sample of name.
	Latency(name string, d time.Duration, dims ...Dim)
}

// Dim is one dimension of a metric: "channel" → "sms", "provider" →
// "twilio".
type Dim struct{ Name, Value string }

// EMF records metrics in CloudWatch's embedded metric format: log lines
// that CloudWatch Logs turns into metrics. It is safe for concurrent use.
type EMF struct {
	emf *metrics.EMF
}

// NewEMF returns an EMF written to w (a Lambda function's stdout) in
// namespace sendonce, dimensioned by service (the function's name).
// The stack's own functions write to sendonce/<stack name> instead, the
// namespace its alarms read (docs/operations.md); these metrics are not
// among them.
func NewEMF(w io.Writer, service string) *EMF {
	return &EMF{emf: metrics.NewEMF(w, metrics.Namespace, service)}
}

// Count implements Metrics.
func (m *EMF) Count(name string, n int, dims ...Dim) { m.emf.Count(name, n, internalDims(dims)...) }

// Latency implements Metrics.
func (m *EMF) Latency(name string, d time.Duration, dims ...Dim) {
	m.emf.Latency(name, d, internalDims(dims)...)
}

// Flush writes what was recorded since the last Flush. A Lambda function
// flushes after every invocation; a long-running worker every minute or
// so.
func (m *EMF) Flush() error { return m.emf.Flush() }

func internalDims(dims []Dim) []metrics.Dim {
	out := make([]metrics.Dim, len(dims))
	for i, d := range dims {
		out[i] = metrics.Dim(d)
	}
	return out
}

// recorder presents m to the internal packages; nil records nothing.
func recorder(m Metrics) metrics.Recorder {
	switch m := m.(type) {
	case nil:
		return nil
	case *EMF:
		if m == nil {
			return nil
		}
		return m.emf
	}
	return adapted{m}
}

// adapted is a caller's Metrics as the internal packages record.
type adapted struct{ m Metrics }

func (a adapted) Count(name string, n int, dims ...metrics.Dim) {
	a.m.Count(name, n, publicDims(dims)...)
}

func (a adapted) Latency(name string, d time.Duration, dims ...metrics.Dim) {
	a.m.Latency(name, d, publicDims(dims)...)
}

func publicDims(dims []metrics.Dim) []Dim {
	out := make([]Dim, len(dims))
	for i, d := range dims {
		out[i] = Dim(d)
	}
	return out
}
