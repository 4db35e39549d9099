// Package metrics records counters and latencies as CloudWatch Embedded
// Metric Format (EMF): structured log lines that CloudWatch turns into
// metrics, so the hot path makes no PutMetricData calls.
//
// A Recorder aggregates within one invocation; Flush writes the EMF
// documents and resets. Dimensions must be of low cardinality (service,
// channel, provider, kind), never a tenant or a recipient.
//
// # What CloudWatch accepts
//
// CloudWatch drops a whole document that breaks a rule of the EMF
// specification, and that happens in exactly the cases an outage produces
// (a provider missing, a reconciler run resending a thousand rows). So
// Flush never writes one (Validate checks every rule; tests run every line
// the functions print through it):
//
//   - a dimension with an empty value gets the value "none" (a channel with
//     no provider is still counted, under provider=none); one with an empty
//     name is dropped; names and values are cut to CloudWatch's 255 and
//     1024 characters;
//   - a dimension set keeps at most MaxDimensions dimensions (service and
//     the first others by name; more are dropped);
//   - one document holds at most MaxMetrics metrics and at most MaxValues
//     values per metric: more are split over further documents with the
//     same dimensions and timestamp, which CloudWatch adds up.
//
// # Why hand-written
//
// There is no maintained Go EMF library: AWS ships EMF clients for Node,
// Python, Java, .NET and Rust but not Go, and the Go packages that exist
// are unmaintained or pull in a logging framework. The format is small;
// this package writes it with encoding/json and checks it with Validate.
package metrics

import (
	"encoding/json"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// Namespace is the CloudWatch namespace of sendonce metrics written
// outside a stack (the library's sendonce.NewEMF, local runs). A
// stack's functions write to StackNamespace(stack) instead, so that a
// stack's alarms, which read only their own namespace, never count
// another stack's data points.
const Namespace = "sendonce"

// StackNamespace returns the namespace of the metrics of the
// CloudFormation stack named stack: Namespace + "/" + stack
// ("sendonce/prod"), or Namespace when stack is empty. A stack name (1 to
// 128 letters, digits and hyphens) makes a valid namespace: CloudWatch
// takes up to 255 characters of letters, digits and . - _ / # : and space.
func StackNamespace(stack string) string {
	if stack == "" {
		return Namespace
	}
	return Namespace + "/" + stack
}

// Metric names. Every function emits from this set only.
const (
	Sent                = "Sent"
	DuplicatesPrevented = "DuplicatesPrevented"
	InFlightConflicts   = "InFlightConflicts"
	Reclaims            = "Reclaims"
	FencingLost         = "FencingLost"
	UncertainAttempts   = "UncertainAttempts"
	Failed              = "Failed"
	Released            = "Released"
	// Failovers counts the sends through a provider other than the first
	// of the channel's route: a failover within one delivery after a
	// refusal, a provider skipped while it cools down, a released row
	// sent by a later delivery or the reconciler through the next
	// provider, and any repeat of a message through such a provider
	// (dimensions channel, from, to).
	Failovers = "Failovers"
	// ConfigErrors counts requests for a channel with no configured
	// provider (released and retried, never FAILED).
	ConfigErrors = "ConfigErrors"
	// Expired counts messages that ended final because their validity
	// passed (decide.ReasonExpired): never sent, or an earlier attempt
	// that may have been sent, never repeated (dimensions channel,
	// provider).
	Expired             = "Expired"
	ReconciledSent      = "ReconciledSent"
	ReconciledFailed    = "ReconciledFailed"
	Resent              = "Resent"
	Abandoned           = "Abandoned"
	ReconcileBacklogAge = "ReconcileBacklogAge"
	DuplicateCallbacks  = "DuplicateCallbacks"
	OutOfOrderCallbacks = "OutOfOrderCallbacks"
	CallbacksApplied    = "CallbacksApplied"
	InvalidCallbacks    = "InvalidCallbacks"
	InvalidRequests     = "InvalidRequests"
	ProviderErrors      = "ProviderErrors"
	ClaimLatency        = "ClaimLatency"
	SendLatency         = "SendLatency"
	APIRequests         = "APIRequests"
	APIReplays          = "APIReplays"
	RateLimited         = "RateLimited"
)

// Dim is one dimension of a metric.
type Dim struct{ Name, Value string }

// Recorder is what code records metrics through. The zero value of
// *EMF is not usable; use NewEMF, or Discard in tests that do not care.
type Recorder interface {
	// Count adds n to counter name.
	Count(name string, n int, dims ...Dim)
	// Latency records one duration sample of name, in milliseconds.
	Latency(name string, d time.Duration, dims ...Dim)
}

// Discard records nothing.
var Discard Recorder = discard{}

type discard struct{}

func (discard) Count(string, int, ...Dim)             {}
func (discard) Latency(string, time.Duration, ...Dim) {}

// EMF aggregates metrics and writes them as EMF documents. It is safe for
// concurrent use.
type EMF struct {
	w         io.Writer
	namespace string
	service   string
	now       func() time.Time

	mu   sync.Mutex
	sets map[string]*dimSet
}

type dimSet struct {
	dims    []Dim
	counts  map[string]float64
	samples map[string][]float64
}

// NewEMF returns a Recorder for service (the "service" dimension on every
// metric) writing EMF lines in namespace (StackNamespace, or Namespace) to
// w (os.Stdout in Lambda).
func NewEMF(w io.Writer, namespace, service string) *EMF {
	return &EMF{w: w, namespace: namespace, service: service, now: time.Now, sets: map[string]*dimSet{}}
}

// Namespace returns the CloudWatch namespace e writes its metrics in.
func (e *EMF) Namespace() string { return e.namespace }

// Count implements Recorder.
func (e *EMF) Count(name string, n int, dims ...Dim) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.set(dims).counts[name] += float64(n)
}

// Latency implements Recorder.
func (e *EMF) Latency(name string, d time.Duration, dims ...Dim) {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.set(dims)
	s.samples[name] = append(s.samples[name], float64(d.Microseconds())/1000)
}

func (e *EMF) set(dims []Dim) *dimSet {
	all := cleanDims(append([]Dim{{"service", e.service}}, dims...))
	var id strings.Builder
	for _, d := range all {
		id.WriteString(d.Name + "=" + d.Value + ";")
	}
	s, ok := e.sets[id.String()]
	if !ok {
		s = &dimSet{dims: all, counts: map[string]float64{}, samples: map[string][]float64{}}
		e.sets[id.String()] = s
	}
	return s
}

type emfMetric struct {
	Name string `json:"Name"`
	Unit string `json:"Unit"`
}

type emfDirective struct {
	Namespace  string      `json:"Namespace"`
	Dimensions [][]string  `json:"Dimensions"`
	Metrics    []emfMetric `json:"Metrics"`
}

type emfMeta struct {
	Timestamp         int64          `json:"Timestamp"`
	CloudWatchMetrics []emfDirective `json:"CloudWatchMetrics"`
}

// Limits of one EMF document (the EMF specification and CloudWatch).
const (
	// MaxValues is the most values one metric may carry in one document.
	MaxValues = 100
	// MaxMetrics is the most metrics one directive may define.
	MaxMetrics = 100
	// MaxDimensions is the most dimensions one dimension set may hold.
	MaxDimensions = 30
	// MaxNameLength and MaxValueLength bound dimension names and values
	// (and metric names and namespaces) as CloudWatch does.
	MaxNameLength  = 255
	MaxValueLength = 1024
)

// EmptyDimension replaces an empty dimension value, which CloudWatch
// rejects.
const EmptyDimension = "none"

// cleanDims makes dims acceptable to CloudWatch: no empty names, no empty
// or over-long values, no repeated names (the last wins), at most
// MaxDimensions with "service" kept, sorted by name.
func cleanDims(dims []Dim) []Dim {
	byName := map[string]string{}
	for _, d := range dims {
		name := cut(strings.TrimSpace(d.Name), MaxNameLength)
		if name == "" || strings.HasPrefix(name, ":") {
			continue
		}
		v := cut(d.Value, MaxValueLength)
		if strings.TrimSpace(v) == "" {
			v = EmptyDimension
		}
		byName[name] = v
	}
	names := slices.Sorted(maps.Keys(byName))
	if len(names) > MaxDimensions {
		kept := []string{"service"}
		for _, n := range names {
			if n != "service" && len(kept) < MaxDimensions {
				kept = append(kept, n)
			}
		}
		names = slices.Sorted(slices.Values(kept))
	}
	out := make([]Dim, len(names))
	for i, n := range names {
		out[i] = Dim{n, byName[n]}
	}
	return out
}

// cut shortens s to at most n runes.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n])
}

// Flush writes the metrics recorded since the last Flush as EMF documents,
// one or more per dimension set (see the package doc for the limits that
// split them), then resets. Call it at the end of every invocation.
func (e *EMF) Flush() error {
	e.mu.Lock()
	sets := e.sets
	e.sets = map[string]*dimSet{}
	e.mu.Unlock()
	ts := e.now().UnixMilli()
	for _, id := range slices.Sorted(maps.Keys(sets)) {
		for _, doc := range documents(e.namespace, sets[id], ts) {
			b, err := json.Marshal(doc)
			if err != nil {
				return err
			}
			if _, err := e.w.Write(append(b, '\n')); err != nil {
				return err
			}
		}
	}
	return nil
}

// documents lays one dimension set's metrics out in documents within the
// limits, in namespace: counters first, then latencies, by name; at most MaxMetrics
// metrics per document; a latency's samples in chunks of MaxValues, chunk
// i of every latency in the i-th round of documents.
func documents(namespace string, s *dimSet, ts int64) []map[string]any {
	type value struct {
		name, unit string
		v          any
	}
	var rounds [][]value
	add := func(round int, v value) {
		for len(rounds) <= round {
			rounds = append(rounds, nil)
		}
		rounds[round] = append(rounds[round], v)
	}
	for _, m := range slices.Sorted(maps.Keys(s.counts)) {
		add(0, value{m, "Count", s.counts[m]})
	}
	for _, m := range slices.Sorted(maps.Keys(s.samples)) {
		for i, chunk := range chunks(s.samples[m], MaxValues) {
			add(i, value{m, "Milliseconds", chunk})
		}
	}
	var names []string
	for _, d := range s.dims {
		names = append(names, d.Name)
	}
	var docs []map[string]any
	for _, round := range rounds {
		for _, part := range chunks(round, MaxMetrics) {
			doc := make(map[string]any, len(s.dims)+len(part)+1)
			for _, d := range s.dims {
				doc[d.Name] = d.Value
			}
			dir := emfDirective{Namespace: namespace, Dimensions: [][]string{names}}
			for _, v := range part {
				dir.Metrics = append(dir.Metrics, emfMetric{v.name, v.unit})
				doc[v.name] = v.v
			}
			doc["_aws"] = emfMeta{Timestamp: ts, CloudWatchMetrics: []emfDirective{dir}}
			docs = append(docs, doc)
		}
	}
	return docs
}

// chunks splits s into pieces of at most n.
func chunks[T any](s []T, n int) [][]T {
	var out [][]T
	for len(s) > n {
		out = append(out, s[:n:n])
		s = s[n:]
	}
	if len(s) > 0 {
		out = append(out, s)
	}
	return out
}

// Tally is an in-memory Recorder that sums counters across dimensions, for
// tests and the deterministic simulator (package simtest). It is safe for
// concurrent use.
type Tally struct {
	mu     sync.Mutex
	counts map[string]int
}

// NewTally returns an empty Tally.
func NewTally() *Tally { return &Tally{counts: map[string]int{}} }

// Count implements Recorder.
func (t *Tally) Count(name string, n int, _ ...Dim) {
	t.mu.Lock()
	t.counts[name] += n
	t.mu.Unlock()
}

// Latency implements Recorder; samples are not kept.
func (t *Tally) Latency(string, time.Duration, ...Dim) {}

// Get returns the sum of counter name.
func (t *Tally) Get(name string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.counts[name]
}

// Snapshot returns a copy of every counter.
func (t *Tally) Snapshot() map[string]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.counts)
}
