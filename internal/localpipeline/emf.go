package localpipeline

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/sendonce/sendonce/internal/metrics"
)

// MetricTotals sums the counters of the EMF documents in one or more
// functions' log output.
type MetricTotals struct {
	// Counts sums each Count metric across documents and dimensions.
	Counts map[string]float64
	// ByDim sums each Count metric per value of each of its dimensions
	// other than service, keyed "Metric/dimension=value" (e.g.
	// "ProviderErrors/kind=ambiguous").
	ByDim map[string]float64
	// Documents is the number of EMF documents read.
	Documents int
	// Namespaces counts the documents' directives per CloudWatch
	// namespace (a stack's functions write in metrics.StackNamespace).
	Namespaces map[string]int
	// Invalid lists the EMF documents that metrics.ValidateLine
	// rejected, with the reason.
	Invalid []string
}

// Get returns the sum of counter name.
func (t MetricTotals) Get(name string) int { return int(t.Counts[name]) }

// ParseEMF reads the EMF documents (log lines holding an "_aws" block)
// out of logs, validates each as CloudWatch Logs would read it
// (metrics.ValidateLine: the size limit, nothing after the object, then
// metrics.Validate), and sums their
// counters. Lines that are not JSON objects (the emulator's START/END/
// REPORT lines) and JSON log lines without "_aws" are skipped.
func ParseEMF(logs ...string) MetricTotals {
	t := MetricTotals{Counts: map[string]float64{}, ByDim: map[string]float64{}, Namespaces: map[string]int{}}
	for _, l := range logs {
		sc := bufio.NewScanner(strings.NewReader(l))
		sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if !strings.HasPrefix(line, "{") || !strings.Contains(line, `"_aws"`) {
				continue
			}
			var doc map[string]any
			if err := json.Unmarshal([]byte(line), &doc); err != nil {
				t.Invalid = append(t.Invalid, fmt.Sprintf("%v: %.300s", err, line))
				continue
			}
			if _, ok := doc["_aws"]; !ok {
				continue
			}
			if err := metrics.ValidateLine([]byte(line)); err != nil {
				t.Invalid = append(t.Invalid, fmt.Sprintf("%v: %.300s", err, line))
				continue
			}
			t.Documents++
			// The names of the document's Count metrics and of its
			// dimensions (ValidateLine checked the directives' shape).
			var d emfDirectives
			_ = json.Unmarshal([]byte(line), &d)
			var counts, dims []string
			for _, dir := range d.AWS.CloudWatchMetrics {
				t.Namespaces[dir.Namespace]++
				for _, k := range slices.Concat(dir.Dimensions...) {
					if !slices.Contains(dims, k) {
						dims = append(dims, k)
					}
				}
				for _, m := range dir.Metrics {
					if m.Name != "" && m.Unit == "Count" {
						counts = append(counts, m.Name)
					}
				}
			}
			for _, name := range counts {
				v, ok := doc[name].(float64)
				if !ok {
					continue
				}
				t.Counts[name] += v
				for _, dim := range dims {
					if val, ok := doc[dim].(string); ok && dim != "service" {
						t.ByDim[name+"/"+dim+"="+val] += v
					}
				}
			}
		}
	}
	return t
}

// emfDirectives is the part of an EMF document that names its metrics
// and their dimensions.
type emfDirectives struct {
	AWS struct {
		CloudWatchMetrics []struct {
			Namespace  string
			Dimensions [][]string
			Metrics    []struct{ Name, Unit string }
		}
	} `json:"_aws"`
}

// Dim returns the sum of counter name for one dimension value.
func (t MetricTotals) Dim(name, dim, value string) int { return int(t.ByDim[name+"/"+dim+"="+value]) }

// Add adds o's counters to t's (a sum over several pipelines).
func (t *MetricTotals) Add(o MetricTotals) {
	if t.Counts == nil {
		t.Counts, t.ByDim = map[string]float64{}, map[string]float64{}
	}
	for k, v := range o.Counts {
		t.Counts[k] += v
	}
	for k, v := range o.ByDim {
		t.ByDim[k] += v
	}
	if t.Namespaces == nil {
		t.Namespaces = map[string]int{}
	}
	for k, v := range o.Namespaces {
		t.Namespaces[k] += v
	}
}

// Counts formats m for a summary line: "key<kv>count" in key order,
// joined by sep; "none" when m is empty.
func Counts[K cmp.Ordered](m map[K]int, kv, sep string) string {
	if len(m) == 0 {
		return "none"
	}
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprint(k)+kv+strconv.Itoa(m[k]))
	}
	return strings.Join(parts, sep)
}
