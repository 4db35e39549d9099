// Package metrics records counters and latencies as CloudWatch Embedded
// Metric Format (EMF): structured log lines that CloudWatch turns into
// metrics, so the hot path makes no PutMetricData calls.
//
// A Recorder aggregates within one invocation; Flush writes one EMF
// document per dimension set and resets. Dimensions must be of low
// cardinality (service, channel, provider, kind), never a tenant or a
// recipient.
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

// Namespace is the CloudWatch namespace of every sendonce metric.
const Namespace = "sendonce"

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
	// ConfigErrors counts requests for a channel with no configured
	// provider (released and retried, never FAILED).
	ConfigErrors        = "ConfigErrors"
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
	w       io.Writer
	service string
	now     func() time.Time

	mu   sync.Mutex
	sets map[string]*dimSet
}

type dimSet struct {
	dims    []Dim
	counts  map[string]float64
	samples map[string][]float64
}

// NewEMF returns a Recorder for service (the "service" dimension on every
// metric) writing EMF lines to w (os.Stdout in Lambda).
func NewEMF(w io.Writer, service string) *EMF {
	return &EMF{w: w, service: service, now: time.Now, sets: map[string]*dimSet{}}
}

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
	all := append([]Dim{{"service", e.service}}, dims...)
	slices.SortFunc(all, func(a, b Dim) int { return strings.Compare(a.Name, b.Name) })
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

// Flush writes one EMF document per dimension set recorded since the last
// Flush, then resets. Call it at the end of every invocation.
func (e *EMF) Flush() error {
	e.mu.Lock()
	sets := e.sets
	e.sets = map[string]*dimSet{}
	e.mu.Unlock()
	ts := e.now().UnixMilli()
	for _, id := range slices.Sorted(maps.Keys(sets)) {
		s := sets[id]
		doc := map[string]any{}
		var names []string
		for _, d := range s.dims {
			doc[d.Name] = d.Value
			names = append(names, d.Name)
		}
		dir := emfDirective{Namespace: Namespace, Dimensions: [][]string{names}}
		for _, m := range slices.Sorted(maps.Keys(s.counts)) {
			dir.Metrics = append(dir.Metrics, emfMetric{m, "Count"})
			doc[m] = s.counts[m]
		}
		for _, m := range slices.Sorted(maps.Keys(s.samples)) {
			dir.Metrics = append(dir.Metrics, emfMetric{m, "Milliseconds"})
			doc[m] = s.samples[m]
		}
		doc["_aws"] = emfMeta{Timestamp: ts, CloudWatchMetrics: []emfDirective{dir}}
		b, err := json.Marshal(doc)
		if err != nil {
			return err
		}
		if _, err := e.w.Write(append(b, '\n')); err != nil {
			return err
		}
	}
	return nil
}

// Tally is an in-memory Recorder that sums counters across dimensions; for
// tests and for the local demo's summary. It is safe for concurrent use.
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
