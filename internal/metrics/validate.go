package metrics

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"
)

// MaxDocumentSize is the largest log event CloudWatch Logs accepts, and so
// the largest EMF document.
const MaxDocumentSize = 1 << 20

// units are the values MetricDefinition.Unit may take (CloudWatch's
// StandardUnit).
var units = map[string]bool{
	"Seconds": true, "Microseconds": true, "Milliseconds": true,
	"Bytes": true, "Kilobytes": true, "Megabytes": true, "Gigabytes": true, "Terabytes": true,
	"Bits": true, "Kilobits": true, "Megabits": true, "Gigabits": true, "Terabits": true,
	"Percent": true, "Count": true,
	"Bytes/Second": true, "Kilobytes/Second": true, "Megabytes/Second": true, "Gigabytes/Second": true, "Terabytes/Second": true,
	"Bits/Second": true, "Kilobits/Second": true, "Megabits/Second": true, "Gigabits/Second": true, "Terabits/Second": true,
	"Count/Second": true, "None": true,
}

// ValidateLine checks one log line as CloudWatch Logs would read it: a
// JSON object alone on the line (no data before or after it), at most
// MaxDocumentSize bytes, that Validate accepts.
func ValidateLine(line []byte) error {
	if len(line) > MaxDocumentSize {
		return fmt.Errorf("emf: document of %d bytes, over the %d-byte log event limit", len(line), MaxDocumentSize)
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		return fmt.Errorf("emf: not a JSON object: %w", err)
	}
	if dec.More() {
		return errors.New("emf: data after the JSON object")
	}
	return Validate(normalize(doc).(map[string]any))
}

// normalize turns json.Number into float64 (Validate's input is what
// json.Unmarshal into map[string]any gives).
func normalize(v any) any {
	switch x := v.(type) {
	case json.Number:
		f, err := x.Float64()
		if err != nil {
			return math.Inf(1) // out of range: Validate rejects it
		}
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = normalize(e)
		}
	case []any:
		for i, e := range x {
			x[i] = normalize(e)
		}
	}
	return v
}

// Validate checks that doc, one decoded JSON log line, is an EMF document
// CloudWatch accepts, rule by rule of the EMF specification and the
// CloudWatch limits it refers to:
//
//   - the root has an "_aws" object with "Timestamp" (a non-negative
//     integer number of milliseconds) and "CloudWatchMetrics" (a non-empty
//     array of directives);
//   - a directive is an object with "Namespace" (a string of 1 to 255
//     characters, not starting with "AWS/"), "Dimensions" (an array of
//     dimension sets) and "Metrics" (an array of 1 to MaxMetrics metric
//     definitions);
//   - a dimension set is an array of at most MaxDimensions distinct
//     strings, each naming a root member whose value is a string of 1 to
//     MaxValueLength characters (not blank); a dimension name is 1 to 255
//     characters and does not start with ':';
//   - a metric definition is an object with "Name" (1 to 255 characters,
//     distinct within the directive, not also a dimension), an optional
//     "Unit" (one of CloudWatch's units) and an optional
//     "StorageResolution" (1 or 60);
//   - the root member a metric names is a finite number or an array of 1 to
//     MaxValues finite numbers.
//
// Tests use it to check the functions' log output.
func Validate(doc map[string]any) error {
	meta, ok := doc["_aws"].(map[string]any)
	if !ok {
		return errors.New("emf: no _aws object")
	}
	ts, ok := meta["Timestamp"].(float64)
	if !ok || ts < 0 || ts != math.Trunc(ts) {
		return errors.New("emf: _aws.Timestamp is not a non-negative integer of milliseconds")
	}
	dirs, ok := meta["CloudWatchMetrics"].([]any)
	if !ok || len(dirs) == 0 {
		return errors.New("emf: _aws.CloudWatchMetrics is not a non-empty array")
	}
	for i, d := range dirs {
		if err := validateDirective(doc, d); err != nil {
			return fmt.Errorf("emf: directive %d: %w", i, err)
		}
	}
	return nil
}

func validateDirective(doc map[string]any, d any) error {
	dir, ok := d.(map[string]any)
	if !ok {
		return errors.New("not an object")
	}
	ns, _ := dir["Namespace"].(string)
	if n := utf8.RuneCountInString(ns); n == 0 || n > MaxNameLength {
		return fmt.Errorf("Namespace %q: want a string of 1 to %d characters", ns, MaxNameLength)
	}
	if strings.HasPrefix(ns, "AWS/") {
		return fmt.Errorf("Namespace %q: the AWS/ prefix is reserved", ns)
	}
	sets, ok := dir["Dimensions"].([]any)
	if !ok {
		return errors.New("Dimensions is not an array")
	}
	dims := map[string]bool{}
	for j, s := range sets {
		keys, ok := s.([]any)
		if !ok {
			return fmt.Errorf("dimension set %d is not an array", j)
		}
		if len(keys) > MaxDimensions {
			return fmt.Errorf("dimension set %d has %d dimensions, over %d", j, len(keys), MaxDimensions)
		}
		inSet := map[string]bool{}
		for _, k := range keys {
			name, ok := k.(string)
			if !ok {
				return fmt.Errorf("dimension set %d holds a %T, want strings", j, k)
			}
			if n := utf8.RuneCountInString(name); n == 0 || n > MaxNameLength || strings.HasPrefix(name, ":") {
				return fmt.Errorf("dimension name %q: want 1 to %d characters, not starting with ':'", name, MaxNameLength)
			}
			if inSet[name] {
				return fmt.Errorf("dimension set %d names %q twice", j, name)
			}
			inSet[name], dims[name] = true, true
			v, ok := doc[name].(string)
			if !ok {
				return fmt.Errorf("dimension %q has no string value", name)
			}
			if strings.TrimSpace(v) == "" || utf8.RuneCountInString(v) > MaxValueLength {
				return fmt.Errorf("dimension %q value %q: want 1 to %d characters, not blank", name, v, MaxValueLength)
			}
		}
	}
	ms, ok := dir["Metrics"].([]any)
	if !ok || len(ms) == 0 {
		return errors.New("Metrics is not a non-empty array")
	}
	if len(ms) > MaxMetrics {
		return fmt.Errorf("%d metrics, over %d", len(ms), MaxMetrics)
	}
	seen := map[string]bool{}
	for _, m := range ms {
		if err := validateMetric(doc, m, seen, dims); err != nil {
			return err
		}
	}
	return nil
}

func validateMetric(doc map[string]any, m any, seen, dims map[string]bool) error {
	mm, ok := m.(map[string]any)
	if !ok {
		return errors.New("a metric definition is not an object")
	}
	name, _ := mm["Name"].(string)
	if n := utf8.RuneCountInString(name); n == 0 || n > MaxNameLength {
		return fmt.Errorf("metric name %q: want 1 to %d characters", name, MaxNameLength)
	}
	if seen[name] {
		return fmt.Errorf("metric %q defined twice", name)
	}
	if dims[name] {
		return fmt.Errorf("metric %q is also a dimension", name)
	}
	seen[name] = true
	if u, ok := mm["Unit"]; ok {
		if us, _ := u.(string); !units[us] {
			return fmt.Errorf("metric %q: unit %v is not a CloudWatch unit", name, u)
		}
	}
	if r, ok := mm["StorageResolution"]; ok {
		if rf, _ := r.(float64); rf != 1 && rf != 60 {
			return fmt.Errorf("metric %q: StorageResolution %v, want 1 or 60", name, r)
		}
	}
	switch v := doc[name].(type) {
	case float64:
		if math.IsInf(v, 0) || math.IsNaN(v) {
			return fmt.Errorf("metric %q: value out of range", name)
		}
	case []any:
		if len(v) == 0 || len(v) > MaxValues {
			return fmt.Errorf("metric %q has %d values, want 1 to %d", name, len(v), MaxValues)
		}
		for _, x := range v {
			f, ok := x.(float64)
			if !ok || math.IsInf(f, 0) || math.IsNaN(f) {
				return fmt.Errorf("metric %q has a sample that is not a finite number", name)
			}
		}
	default:
		return fmt.Errorf("metric %q has no numeric value", name)
	}
	return nil
}
