// Package benchreport holds the figures that `make bench` (cmd/bench)
// measures: rows of name, value, unit and how each was measured, and the
// machine they were measured on. It writes them in the Go benchmark format
// (golang.org/x/perf/benchfmt), which benchstat reads, and as the Markdown
// table of docs/benchmarks.md.
//
// The figures are chosen to hold on a small, noisy machine: ratios
// measured in interleaved rounds on the same DynamoDB Local, and counts
// (DynamoDB calls and write units per message), rather than absolute
// speeds of an emulator.
package benchreport

import (
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/perf/benchfmt"
)

// Row is one measured figure.
type Row struct {
	// Section groups rows ("peer", "lambda", ...).
	Section string
	// Name says what was measured.
	Name  string
	Value float64
	// Unit is the value's unit ("calls/msg", "ratio", "ms", "MB", ...).
	Unit string
	// How says how the value was measured, in one sentence.
	How string
	// Samples are the values of each round when Value summarizes rounds
	// (their median); WriteGoBench writes one result line per sample.
	Samples []float64
}

// Machine describes where a report was measured.
type Machine struct {
	// NProc is the number of CPUs the process may use (as `nproc` counts).
	NProc int
	// CPU is the CPU model from /proc/cpuinfo.
	CPU string
	// Go is the Go toolchain version.
	Go, GOOS, GOARCH string
}

// Report is a whole benchmark run.
type Report struct {
	Machine Machine
	// Started is when the run began (UTC).
	Started time.Time
	// Seconds is how long the run took.
	Seconds float64
	Rows    []Row
	// Notes explain caveats of this run (what the emulators report, which
	// rounds another process kept a core busy in).
	Notes []string
}

// Add appends a row.
func (r *Report) Add(section, name string, value float64, unit, how string) {
	r.Rows = append(r.Rows, Row{Section: section, Name: name, Value: value, Unit: unit, How: how})
}

// AddSamples appends a row whose value is the median of per-round samples.
func (r *Report) AddSamples(section, name string, samples []float64, unit, how string) {
	r.Rows = append(r.Rows, Row{Section: section, Name: name, Value: Median(samples), Unit: unit, How: how, Samples: slices.Clone(samples)})
}

// Note appends a note, formatted like fmt.Sprintf.
func (r *Report) Note(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

// Find returns the first row with the section and name.
func (r *Report) Find(section, name string) (Row, bool) {
	i := slices.IndexFunc(r.Rows, func(row Row) bool { return row.Section == section && row.Name == name })
	if i < 0 {
		return Row{}, false
	}
	return r.Rows[i], true
}

// FormatValue prints v with at most three significant decimals, without
// trailing zeros ("2", "0.412", "1530"; "NaN" and "+Inf" as they are).
func FormatValue(v float64) string {
	switch {
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
	cell := strings.NewReplacer("|", `\|`, "\n", " ")
	for _, row := range r.Rows {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", cell.Replace(row.Section), cell.Replace(row.Name), FormatValue(row.Value), cell.Replace(row.Unit), cell.Replace(row.How))
	}
	if len(r.Notes) > 0 {
		b.WriteString("\nNotes:\n\n")
		for _, n := range r.Notes {
			fmt.Fprintf(&b, "- %s\n", cell.Replace(n))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteGoBench writes the rows in the Go benchmark format, which benchstat
// reads: the machine as file configuration, then one result line per row,
// or one per sample for a row that summarizes rounds, named
// Benchmark<Section>/<name>-<nproc> with one iteration and the row's value
// and unit. Units for which higher is better (rates) are declared as such.
// The notes follow as comment lines, which benchstat skips.
func (r *Report) WriteGoBench(w io.Writer) error {
	bw := benchfmt.NewWriter(w)
	declared := map[string]bool{}
	for _, row := range r.Rows {
		if unit := BenchName(row.Unit); strings.HasSuffix(unit, "/s") && !declared[unit] {
			declared[unit] = true
			if err := bw.Write(&benchfmt.UnitMetadata{UnitMetadataKey: benchfmt.UnitMetadataKey{Unit: unit, Key: "better"}, OrigUnit: unit, Value: "higher"}); err != nil {
				return err
			}
		}
	}
	res := &benchfmt.Result{Iters: 1}
	for _, kv := range [][2]string{{"goos", r.Machine.GOOS}, {"goarch", r.Machine.GOARCH}, {"pkg", "github.com/sendonce/sendonce/cmd/bench"}, {"cpu", r.Machine.CPU}} {
		res.Config = append(res.Config, benchfmt.Config{Key: kv[0], Value: []byte(kv[1]), File: true})
	}
	for _, row := range r.Rows {
		sec := BenchName(row.Section)
		if sec != "" {
			sec = strings.ToUpper(sec[:1]) + sec[1:]
		}
		res.Name = benchfmt.Name(fmt.Sprintf("%s/%s-%d", sec, BenchName(row.Name), max(1, r.Machine.NProc)))
		samples := row.Samples
		if len(samples) == 0 {
			samples = []float64{row.Value}
		}
		for _, v := range samples {
			res.Values = []benchfmt.Value{{Value: v, Unit: BenchName(row.Unit)}}
			if err := bw.Write(res); err != nil {
				return err
			}
		}
	}
	for _, n := range r.Notes {
		if _, err := fmt.Fprintf(w, "# note: %s\n", strings.ReplaceAll(n, "\n", " ")); err != nil {
			return err
		}
	}
	return nil
}

// BenchName turns a row's name or unit into a benchmark name part: no
// spaces, no slashes between words (a slash would start a sub-benchmark),
// only letters, digits and _ . = + - / %.
func BenchName(s string) string {
	allowed := func(c rune) bool {
		return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("_.=+-/%", c)
	}
	fields := strings.FieldsFunc(strings.ReplaceAll(s, " / ", " per "), func(c rune) bool { return !allowed(c) })
	return strings.Join(fields, "_")
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
	for _, key := range []string{"model name", "Hardware", "CPU part"} {
		for line := range strings.Lines(string(cpuinfo)) {
			k, v, ok := strings.Cut(line, ":")
			if v = strings.TrimSpace(v); !ok || strings.TrimSpace(k) != key || v == "" {
				continue
			}
			if key == "CPU part" {
				return "CPU part " + v
			}
			return v
		}
	}
	return ""
}
