// Package benchreport holds the report that `make bench` (cmd/bench)
// produces: rows of name, value, unit and how each was measured, the
// machine they were measured on, a Markdown table of them, and a parser
// for `go test -bench` output.
//
// The figures are chosen to hold on a small, noisy machine: ratios (the
// sender's throughput over raw conditional writes on the same DynamoDB
// Local) and counts (DynamoDB calls per message), rather than absolute
// speeds of an emulator.
package benchreport

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Row is one measured figure.
type Row struct {
	// Section groups rows in the table ("dynamodb", "throughput", ...).
	Section string `json:"section"`
	// Name says what was measured.
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	// Unit is the value's unit ("calls/msg", "ratio", "ms", "MB", ...).
	Unit string `json:"unit"`
	// How says how the value was measured, in one sentence.
	How string `json:"how"`
	// Samples are the values of each round when Value summarizes rounds
	// (their median); WriteGoBench writes one result line per sample.
	Samples []float64 `json:"samples,omitempty"`
}

// Machine describes where a report was measured.
type Machine struct {
	// NProc is the number of CPUs the process may use (as `nproc` counts).
	NProc int `json:"nproc"`
	// CPU is the CPU model from /proc/cpuinfo.
	CPU string `json:"cpu"`
	// Go is the Go toolchain version.
	Go     string `json:"go"`
	GOOS   string `json:"goos"`
	GOARCH string `json:"goarch"`
}

// Report is a whole benchmark run.
type Report struct {
	Machine Machine `json:"machine"`
	// Started is when the run began (UTC).
	Started time.Time `json:"started"`
	// Seconds is how long the run took.
	Seconds float64 `json:"seconds"`
	Rows    []Row   `json:"rows"`
	// Notes explain caveats of this run (what the emulators report, what
	// was skipped and why).
	Notes []string `json:"notes,omitempty"`
}

// Add appends a row.
func (r *Report) Add(section, name string, value float64, unit, how string) {
	r.Rows = append(r.Rows, Row{Section: section, Name: name, Value: value, Unit: unit, How: how})
}

// Note appends a note, formatted like fmt.Sprintf.
func (r *Report) Note(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

// Find returns the first row with the section and name.
func (r *Report) Find(section, name string) (Row, bool) {
	for _, row := range r.Rows {
		if row.Section == section && row.Name == name {
			return row, true
		}
	}
	return Row{}, false
}

// WriteFile writes r as indented JSON to path, creating its directory,
// through a temporary file renamed into place. It returns the error of
// the first step that failed.
func (r *Report) WriteFile(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("benchreport: encode: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("benchreport: write %s: %w", path, err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("benchreport: write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("benchreport: write %s: %w", path, err)
	}
	return nil
}

// ReadFile reads a report that WriteFile wrote.
func ReadFile(path string) (Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Report{}, fmt.Errorf("benchreport: read: %w", err)
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return Report{}, fmt.Errorf("benchreport: read %s: %w", path, err)
	}
	return r, nil
}

// FormatValue prints v with at most three significant decimals, without
// trailing zeros ("2", "0.412", "1530").
func FormatValue(v float64) string {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return strconv.FormatFloat(v, 'f', -1, 64)
	case v == math.Trunc(v) && math.Abs(v) < 1e15:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case math.Abs(v) >= 100:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 3, 64)
	}
}

// WriteMarkdown writes the machine line and one Markdown table of the rows
// (section, name, value, unit, how), then the notes as a list.
func (r *Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Machine: %d CPUs (`nproc`), %s, %s %s/%s; run of %s, %.0f s.\n\n",
		r.Machine.NProc, r.Machine.CPU, r.Machine.Go, r.Machine.GOOS, r.Machine.GOARCH,
		r.Started.UTC().Format("2006-01-02 15:04 UTC"), r.Seconds)
	b.WriteString("| section | name | value | unit | how measured |\n|---|---|---:|---|---|\n")
	for _, row := range r.Rows {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", cell(row.Section), cell(row.Name), FormatValue(row.Value), cell(row.Unit), cell(row.How))
	}
	if len(r.Notes) > 0 {
		b.WriteString("\nNotes:\n\n")
		for _, n := range r.Notes {
			fmt.Fprintf(&b, "- %s\n", strings.ReplaceAll(n, "\n", " "))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// cell escapes what would break a Markdown table cell.
func cell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(s, "\n", " ")
}

// WriteText writes the rows as an aligned plain-text table (section,
// name, value, unit), for a terminal.
func (r *Report) WriteText(w io.Writer) error {
	wName, wSec := len("name"), len("section")
	for _, row := range r.Rows {
		wName = max(wName, len(row.Name))
		wSec = max(wSec, len(row.Section))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-*s  %-*s  %12s  %s\n", wSec, "section", wName, "name", "value", "unit")
	for _, row := range r.Rows {
		fmt.Fprintf(&b, "%-*s  %-*s  %12s  %s\n", wSec, row.Section, wName, row.Name, FormatValue(row.Value), row.Unit)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Median returns the median of xs (the mean of the middle two for an even
// count), or NaN for none. xs is not modified.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// CurrentMachine describes the machine this process runs on: the CPUs it
// may use, the CPU model from /proc/cpuinfo ("unknown" where there is
// none) and the Go version it was built with.
func CurrentMachine() Machine {
	cpu := "unknown"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		if m := CPUModel(b); m != "" {
			cpu = m
		}
	}
	return Machine{NProc: runtime.NumCPU(), CPU: cpu, Go: runtime.Version(), GOOS: runtime.GOOS, GOARCH: runtime.GOARCH}
}

// CPUModel returns the CPU model named in the text of /proc/cpuinfo: the
// first "model name" (x86), else "Hardware" or "CPU part" (some arm64
// kernels), or "" when none is there.
func CPUModel(cpuinfo []byte) string {
	found := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(cpuinfo))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if _, seen := found[k]; !seen && v != "" {
			found[k] = v
		}
	}
	for _, k := range []string{"model name", "Hardware", "CPU part"} {
		if v := found[k]; v != "" {
			if k == "CPU part" {
				return "CPU part " + v
			}
			return v
		}
	}
	return ""
}

// GoBench is one result line of `go test -bench` output.
type GoBench struct {
	// Name is the benchmark's name without the -GOMAXPROCS suffix.
	Name string
	// Procs is GOMAXPROCS (the suffix), 1 when absent.
	Procs int
	// N is the number of iterations.
	N int64
	// Metrics maps a unit ("ns/op", "B/op", "allocs/op", custom units) to
	// its value.
	Metrics map[string]float64
}

// ErrNoBenchmarks is returned by ParseGoBench when the output holds no
// result line.
var ErrNoBenchmarks = errors.New("benchreport: no benchmark results in the output")

// ParseGoBench parses the result lines of `go test -bench` output and
// skips every other line (goos:, pkg:, PASS, ok ...). A line that starts
// like a result ("Benchmark" name, then an iteration count) but whose
// value/unit pairs do not parse is an error naming the line. It returns
// ErrNoBenchmarks when there is no result line.
func ParseGoBench(r io.Reader) ([]GoBench, error) {
	var out []GoBench
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		f := strings.Fields(sc.Text())
		if len(f) < 2 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		n, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil || n <= 0 {
			continue // a benchmark's own log line, or its name alone
		}
		b := GoBench{Name: f[0], Procs: 1, N: n, Metrics: map[string]float64{}}
		if i := strings.LastIndexByte(f[0], '-'); i > 0 {
			if p, err := strconv.Atoi(f[0][i+1:]); err == nil && p > 0 {
				b.Name, b.Procs = f[0][:i], p
			}
		}
		rest := f[2:]
		if len(rest)%2 != 0 {
			return nil, fmt.Errorf("benchreport: line %d: %q: values and units do not pair up", line, sc.Text())
		}
		for i := 0; i < len(rest); i += 2 {
			v, err := strconv.ParseFloat(rest[i], 64)
			if err != nil {
				return nil, fmt.Errorf("benchreport: line %d: %q: value %q is not a number", line, sc.Text(), rest[i])
			}
			b.Metrics[rest[i+1]] = v
		}
		out = append(out, b)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("benchreport: read benchmark output: %w", err)
	}
	if len(out) == 0 {
		return nil, ErrNoBenchmarks
	}
	return out, nil
}

// WriteGoBench writes the rows in the Go benchmark result format
// (golang.org/x/perf/benchfmt), which benchstat reads: a configuration
// header, then one line per row, or one per sample for a row that
// summarizes rounds, named Benchmark<Section>/<name>-<nproc> with one
// iteration and the row's value and unit. Units for which higher is better
// (rates) are declared as such.
func (r *Report) WriteGoBench(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "goos: %s\ngoarch: %s\npkg: github.com/sendonce/sendonce/cmd/bench\ncpu: %s\n",
		r.Machine.GOOS, r.Machine.GOARCH, r.Machine.CPU)
	declared := map[string]bool{}
	for _, row := range r.Rows {
		unit := BenchName(row.Unit)
		if strings.HasSuffix(unit, "/s") && !declared[unit] {
			declared[unit] = true
			fmt.Fprintf(&b, "Unit %s better=higher\n", unit)
		}
	}
	for _, row := range r.Rows {
		name := "Benchmark" + BenchName(strings.ToUpper(row.Section[:min(1, len(row.Section))])+row.Section[min(1, len(row.Section)):]) +
			"/" + BenchName(row.Name) + fmt.Sprintf("-%d", max(1, r.Machine.NProc))
		samples := row.Samples
		if len(samples) == 0 {
			samples = []float64{row.Value}
		}
		for _, v := range samples {
			fmt.Fprintf(&b, "%s\t1\t%s %s\n", name, strconv.FormatFloat(v, 'g', -1, 64), BenchName(row.Unit))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// BenchName turns a row's name or unit into a benchmark name part: no
// spaces, no slashes between words (a slash would start a sub-benchmark),
// only letters, digits and _ . = + - / %.
func BenchName(s string) string {
	s = strings.ReplaceAll(s, " / ", " per ")
	var b strings.Builder
	under := false
	for _, c := range s {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("_.=+-/%", c)
		if !ok {
			if b.Len() > 0 && !under {
				b.WriteByte('_')
				under = true
			}
			continue
		}
		b.WriteRune(c)
		under = false
	}
	return strings.TrimRight(b.String(), "_")
}
