package metrics

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// flushLines records with fn, flushes and returns every line, each
// checked with ValidateLine.
func flushLines(t testing.TB, fn func(e *EMF)) []map[string]any {
	t.Helper()
	var buf bytes.Buffer
	e := NewEMF(&buf, Namespace, "reconciler")
	e.now = func() time.Time { return time.UnixMilli(1700000000000) }
	fn(e)
	if err := e.Flush(); err != nil {
		t.Fatal(err)
	}
	var docs []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if l == "" {
			continue
		}
		if err := ValidateLine([]byte(l)); err != nil {
			t.Fatalf("CloudWatch would reject: %v: %.300s", err, l)
		}
		var doc map[string]any
		_ = json.Unmarshal([]byte(l), &doc)
		docs = append(docs, doc)
	}
	return docs
}

// Regression: a channel with no provider recorded "provider": "", which
// CloudWatch rejects (the whole document is dropped).
func TestFlushEmptyDimensionValue(t *testing.T) {
	t.Parallel()
	docs := flushLines(t, func(e *EMF) {
		e.Count(Failed, 1, Dim{"channel", "push"}, Dim{"provider", ""}, Dim{"", "x"}, Dim{"kind", "  "})
	})
	if len(docs) != 1 {
		t.Fatalf("%d documents, want 1", len(docs))
	}
	d := docs[0]
	if d["provider"] != EmptyDimension || d["kind"] != EmptyDimension || d[Failed] != 1.0 {
		t.Errorf("document = %v, want provider and kind %q and Failed 1", d, EmptyDimension)
	}
}

// Regression: a reconciler run resending 1000 rows put 1000 samples of one
// metric in one document; CloudWatch takes at most 100.
func TestFlushSplitsValues(t *testing.T) {
	t.Parallel()
	docs := flushLines(t, func(e *EMF) {
		for i := range 1000 {
			e.Latency(SendLatency, time.Duration(i)*time.Millisecond, Dim{"channel", "sms"})
		}
		e.Latency(ClaimLatency, time.Millisecond, Dim{"channel", "sms"})
		e.Count(Resent, 1000, Dim{"channel", "sms"})
	})
	if len(docs) != 10 {
		t.Fatalf("%d documents, want 10 (1000 samples in chunks of 100)", len(docs))
	}
	var samples, resent, claims int
	for _, d := range docs {
		if v, ok := d[SendLatency].([]any); ok {
			samples += len(v)
		}
		if v, ok := d[ClaimLatency].([]any); ok {
			claims += len(v)
		}
		if v, ok := d[Resent].(float64); ok {
			resent += int(v)
		}
		if d["channel"] != "sms" || d["service"] != "reconciler" {
			t.Errorf("a split document lost its dimensions: %v", d["channel"])
		}
	}
	if samples != 1000 || resent != 1000 || claims != 1 {
		t.Errorf("across the documents: %d SendLatency samples, Resent %d, %d ClaimLatency; want 1000, 1000, 1", samples, resent, claims)
	}
}

func TestFlushSplitsMetrics(t *testing.T) {
	t.Parallel()
	docs := flushLines(t, func(e *EMF) {
		for i := range 150 {
			e.Count(fmt.Sprintf("M%03d", i), 1)
		}
	})
	total := 0
	for _, d := range docs {
		total += len(d["_aws"].(map[string]any)["CloudWatchMetrics"].([]any)[0].(map[string]any)["Metrics"].([]any))
	}
	if len(docs) != 2 || total != 150 {
		t.Errorf("%d documents with %d metrics, want 2 with 150", len(docs), total)
	}
}

func TestFlushDimensionLimit(t *testing.T) {
	t.Parallel()
	docs := flushLines(t, func(e *EMF) {
		var dims []Dim
		for i := range 40 {
			dims = append(dims, Dim{fmt.Sprintf("d%02d", i), "v"})
		}
		e.Count(Sent, 1, dims...)
	})
	set := docs[0]["_aws"].(map[string]any)["CloudWatchMetrics"].([]any)[0].(map[string]any)["Dimensions"].([]any)[0].([]any)
	if len(set) != MaxDimensions || !strings.Contains(fmt.Sprint(set), "service") {
		t.Errorf("dimension set %v: want %d dimensions including service", set, MaxDimensions)
	}
}

func TestValidateRules(t *testing.T) {
	t.Parallel()
	const ok = `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"n","Dimensions":[["service"]],"Metrics":[{"Name":"Sent","Unit":"Count"}]}]},"service":"s","Sent":1}`
	if err := ValidateLine([]byte(ok)); err != nil {
		t.Fatalf("a valid document: %v", err)
	}
	many := func(n int, f func(i int) string) string {
		var parts []string
		for i := range n {
			parts = append(parts, f(i))
		}
		return strings.Join(parts, ",")
	}
	for name, doc := range map[string]string{
		"NotJSON":            `{"_aws":`,
		"Trailing":           ok + ` x`,
		"NoAWS":              `{"Sent":1}`,
		"NoTimestamp":        `{"_aws":{"CloudWatchMetrics":[{"Namespace":"n","Dimensions":[],"Metrics":[{"Name":"Sent"}]}]},"Sent":1}`,
		"FractionalTime":     `{"_aws":{"Timestamp":1.5,"CloudWatchMetrics":[{"Namespace":"n","Dimensions":[],"Metrics":[{"Name":"Sent"}]}]},"Sent":1}`,
		"NoDirectives":       `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[]},"Sent":1}`,
		"NoNamespace":        `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Dimensions":[],"Metrics":[{"Name":"Sent"}]}]},"Sent":1}`,
		"AWSNamespace":       `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"AWS/Lambda","Dimensions":[],"Metrics":[{"Name":"Sent"}]}]},"Sent":1}`,
		"LongNamespace":      `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"` + strings.Repeat("n", 256) + `","Dimensions":[],"Metrics":[{"Name":"Sent"}]}]},"Sent":1}`,
		"NoDimensions":       `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"n","Metrics":[{"Name":"Sent"}]}]},"Sent":1}`,
		"DimensionMissing":   `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"n","Dimensions":[["service"]],"Metrics":[{"Name":"Sent"}]}]},"Sent":1}`,
		"DimensionEmpty":     `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"n","Dimensions":[["provider"]],"Metrics":[{"Name":"Sent"}]}]},"Sent":1,"provider":""}`,
		"DimensionNumber":    `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"n","Dimensions":[["p"]],"Metrics":[{"Name":"Sent"}]}]},"Sent":1,"p":3}`,
		"DimensionColon":     `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"n","Dimensions":[[":p"]],"Metrics":[{"Name":"Sent"}]}]},"Sent":1,":p":"v"}`,
		"DimensionTwice":     `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"n","Dimensions":[["p","p"]],"Metrics":[{"Name":"Sent"}]}]},"Sent":1,"p":"v"}`,
		"DimensionLongValue": `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"n","Dimensions":[["p"]],"Metrics":[{"Name":"Sent"}]}]},"Sent":1,"p":"` + strings.Repeat("v", 1025) + `"}`,
		"TooManyDimensions": `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"n","Dimensions":[[` + many(31, func(i int) string { return fmt.Sprintf(`"d%d"`, i) }) +
			`]],"Metrics":[{"Name":"Sent"}]}]},"Sent":1,` + many(31, func(i int) string { return fmt.Sprintf(`"d%d":"v"`, i) }) + `}`,
		"NoMetrics":       `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"n","Dimensions":[],"Metrics":[]}]}}`,
		"MetricMissing":   `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"n","Dimensions":[],"Metrics":[{"Name":"Sent"}]}]}}`,
		"MetricString":    `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"n","Dimensions":[],"Metrics":[{"Name":"Sent"}]}]},"Sent":"1"}`,
		"MetricTwice":     `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"n","Dimensions":[],"Metrics":[{"Name":"Sent"},{"Name":"Sent"}]}]},"Sent":1}`,
		"MetricIsDim":     `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"n","Dimensions":[["Sent"]],"Metrics":[{"Name":"Sent"}]}]},"Sent":"1"}`,
		"BadUnit":         `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"n","Dimensions":[],"Metrics":[{"Name":"Sent","Unit":"Widgets"}]}]},"Sent":1}`,
		"BadResolution":   `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"n","Dimensions":[],"Metrics":[{"Name":"Sent","StorageResolution":5}]}]},"Sent":1}`,
		"EmptyArray":      `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"n","Dimensions":[],"Metrics":[{"Name":"L"}]}]},"L":[]}`,
		"TooManyValues":   `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"n","Dimensions":[],"Metrics":[{"Name":"L"}]}]},"L":[` + many(101, func(int) string { return "1" }) + `]}`,
		"NonNumberSample": `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"n","Dimensions":[],"Metrics":[{"Name":"L"}]}]},"L":[1,"2"]}`,
		"HugeNumber":      `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"n","Dimensions":[],"Metrics":[{"Name":"Sent"}]}]},"Sent":1e400}`,
		"TooManyMetrics": `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"n","Dimensions":[],"Metrics":[` + many(101, func(i int) string { return fmt.Sprintf(`{"Name":"M%d"}`, i) }) +
			`]}]},` + many(101, func(i int) string { return fmt.Sprintf(`"M%d":1`, i) }) + `}`,
		"TooLarge": `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"n","Dimensions":[],"Metrics":[{"Name":"Sent"}]}]},"Sent":1,"pad":"` + strings.Repeat("x", MaxDocumentSize) + `"}`,
	} {
		if err := ValidateLine([]byte(doc)); err == nil {
			t.Errorf("%s: accepted %.200s", name, doc)
		}
	}
}

// FuzzValidateLine: whatever the input, an accepted line is one JSON
// object within the size limit that has an _aws block.
func FuzzValidateLine(f *testing.F) {
	f.Add([]byte(`{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"n","Dimensions":[["service"]],"Metrics":[{"Name":"Sent","Unit":"Count"}]}]},"service":"s","Sent":1}`))
	f.Add([]byte(`{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"n","Dimensions":[],"Metrics":[{"Name":"L"}]}]},"L":[1,2]}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		if ValidateLine(line) != nil {
			return
		}
		var doc map[string]any
		if !json.Valid(line) || json.Unmarshal(line, &doc) != nil || len(line) > MaxDocumentSize {
			t.Fatalf("accepted %q: not one JSON object within the limit", line)
		}
		if _, ok := doc["_aws"].(map[string]any); !ok {
			t.Fatalf("accepted %q without an _aws object", line)
		}
	})
}

// FuzzFlush: whatever is recorded, every document Flush writes is one
// CloudWatch accepts, and no count is lost.
func FuzzFlush(f *testing.F) {
	f.Add("provider", "", "Sent", 3, 150)
	f.Add("", "x", "M", 1, 0)
	f.Add(":bad", strings.Repeat("v", 2000), "Sent", 0, 1000)
	f.Fuzz(func(t *testing.T, dim, val, name string, n, samples int) {
		if n < 0 || n > 1000 || samples < 0 || samples > 2000 || name == "" || utf8Invalid(name) || len(name) > MaxNameLength ||
			name == strings.TrimSpace(dim) || name == "service" || name == "_aws" || name == SendLatency {
			return // metric names are the package's constants: never a dimension's name
		}
		docs := flushLines(t, func(e *EMF) {
			e.Count(name, n, Dim{dim, val})
			for i := range samples {
				e.Latency(SendLatency, time.Duration(i), Dim{dim, val})
			}
		})
		got := 0.0
		for _, d := range docs {
			if v, ok := d[name].(float64); ok {
				got += v
			}
		}
		if got != float64(n) {
			t.Fatalf("count %q: %v across documents, want %d", name, got, n)
		}
	})
}

func utf8Invalid(s string) bool {
	return !json.Valid([]byte(fmt.Sprintf("%q", s))) || strings.ContainsAny(s, "\x00")
}
