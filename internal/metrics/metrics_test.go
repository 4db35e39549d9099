package metrics

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestEMFFlushIsValidEMF(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	e := NewEMF(&buf, StackNamespace("prod"), "sender")
	e.now = func() time.Time { return time.UnixMilli(1700000000000) }
	e.Count(Sent, 1, Dim{"channel", "sms"})
	e.Count(Sent, 2, Dim{"channel", "sms"})
	e.Count(DuplicatesPrevented, 1)
	e.Latency(SendLatency, 1500*time.Microsecond, Dim{"channel", "sms"})
	if err := e.Flush(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %d EMF documents, want 2 (one per dimension set):\n%s", len(lines), buf.String())
	}
	var docs []map[string]any
	for _, l := range lines {
		var doc map[string]any
		if err := json.Unmarshal([]byte(l), &doc); err != nil {
			t.Fatalf("not JSON: %v: %s", err, l)
		}
		if err := Validate(doc); err != nil {
			t.Fatalf("invalid EMF: %v: %s", err, l)
		}
		docs = append(docs, doc)
	}
	sms := docs[0]
	if sms["channel"] != "sms" {
		sms = docs[1]
	}
	if got := sms[Sent]; got != 3.0 {
		t.Errorf("Sent = %v, want 3", got)
	}
	if got := sms[SendLatency]; !slices.Equal(toFloats(got), []float64{1.5}) {
		t.Errorf("SendLatency = %v, want [1.5]", got)
	}
	buf.Reset()
	if err := e.Flush(); err != nil || buf.Len() != 0 {
		t.Errorf("second Flush wrote %q (err %v), want nothing", buf.String(), err)
	}
}

func toFloats(v any) []float64 {
	var out []float64
	for _, x := range v.([]any) {
		out = append(out, x.(float64))
	}
	return out
}

func TestValidateRejects(t *testing.T) {
	t.Parallel()
	for name, doc := range map[string]string{
		"NoAWS":            `{"Sent":1}`,
		"MetricMissing":    `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"n","Dimensions":[["service"]],"Metrics":[{"Name":"Sent"}]}]},"service":"s"}`,
		"DimensionMissing": `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"n","Dimensions":[["service"]],"Metrics":[{"Name":"Sent"}]}]},"Sent":1}`,
		"NoNamespace":      `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Dimensions":[["service"]],"Metrics":[{"Name":"Sent"}]}]},"Sent":1,"service":"s"}`,
	} {
		var m map[string]any
		if err := json.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatal(err)
		}
		if Validate(m) == nil {
			t.Errorf("%s: Validate accepted %s", name, doc)
		}
	}
}
