package benchreport_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"golang.org/x/perf/benchfmt"

	"github.com/sendonce/sendonce/internal/benchreport"
)

func TestMedian(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   []float64
		want float64
	}{
		{"Odd", []float64{3, 1, 2}, 2},
		{"Even", []float64{4, 1, 3, 2}, 2.5},
		{"One", []float64{7}, 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := append([]float64(nil), tt.in...)
			if got := benchreport.Median(in); got != tt.want {
				t.Errorf("Median(%v) = %v, want %v", tt.in, got, tt.want)
			}
			for i := range in {
				if in[i] != tt.in[i] {
					t.Fatalf("Median reordered its input: %v", in)
				}
			}
		})
	}
	if got := benchreport.Median(nil); !math.IsNaN(got) {
		t.Errorf("Median(nil) = %v, want NaN", got)
	}
}

func TestCPUModel(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, in, want string }{
		{"X86", "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\n\nprocessor\t: 1\nmodel name\t: AMD EPYC 7B13\n", "AMD EPYC 7B13"},
		{"ArmHardware", "processor : 0\nCPU part : 0xd0c\nHardware : Graviton\n", "Graviton"},
		{"ArmPartOnly", "processor : 0\nCPU part : 0xd0c\n", "CPU part 0xd0c"},
		{"None", "processor : 0\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := benchreport.CPUModel([]byte(tt.in)); got != tt.want {
				t.Errorf("CPUModel = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestFormatValue(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   float64
		want string
	}{{2, "2"}, {0.41234, "0.412"}, {1530.26, "1530.3"}, {12.5, "12.500"}}
	for _, tt := range tests {
		if got := benchreport.FormatValue(tt.in); got != tt.want {
			t.Errorf("FormatValue(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestWriteMarkdown(t *testing.T) {
	t.Parallel()
	r := benchreport.Report{
		Machine: benchreport.Machine{NProc: 2, CPU: "AMD EPYC", Go: "go1.26.8", GOOS: "linux", GOARCH: "amd64"},
		Started: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC),
		Seconds: 90,
	}
	r.Add("peer", "first send: calls", 2, "calls/msg", "a | pipe")
	r.Note("DynamoDB Local says %s", "nothing")
	if row, ok := r.Find("peer", "first send: calls"); !ok || row.Value != 2 {
		t.Errorf("Find = %+v, %v; want the row added", row, ok)
	}
	if _, ok := r.Find("peer", "missing"); ok {
		t.Errorf("Find found a row that does not exist")
	}
	var md strings.Builder
	if err := r.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"2 CPUs (`nproc`), AMD EPYC, go1.26.8", "| peer | first send: calls | 2 | calls/msg | a \\| pipe |", "- DynamoDB Local says nothing"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("Markdown lacks %q:\n%s", want, md.String())
		}
	}
}

func TestWriteGoBench(t *testing.T) {
	t.Parallel()
	r := &benchreport.Report{Machine: benchreport.Machine{NProc: 2, CPU: "AMD EPYC", GOOS: "linux", GOARCH: "amd64"}}
	r.AddSamples("peer", "sendonce / Powertools, first send (median of rounds)", []float64{1.2, 1.3, 1.25}, "ratio", "how")
	r.Add("peer", "sendonce first send (median)", 812.5, "msgs/s", "how")
	r.Add("lambda", "sender: cold invoke", 2, "ms", "how")
	r.Note("round 2 flagged")
	if got := r.Rows[0].Value; got != 1.25 {
		t.Errorf("AddSamples value = %v, want the median 1.25", got)
	}
	var b strings.Builder
	if err := r.WriteGoBench(&b); err != nil {
		t.Fatal(err)
	}
	want := `Unit msgs/s better=higher
goos: linux
goarch: amd64
pkg: github.com/sendonce/sendonce/cmd/bench
cpu: AMD EPYC

BenchmarkPeer/sendonce_per_Powertools_first_send_median_of_rounds-2 1 1.2 ratio
BenchmarkPeer/sendonce_per_Powertools_first_send_median_of_rounds-2 1 1.3 ratio
BenchmarkPeer/sendonce_per_Powertools_first_send_median_of_rounds-2 1 1.25 ratio
BenchmarkPeer/sendonce_first_send_median-2 1 812.5 msgs/s
BenchmarkLambda/sender_cold_invoke-2 1 2 ms
# note: round 2 flagged
`
	if b.String() != want {
		t.Errorf("WriteGoBench =\n%s\nwant\n%s", b.String(), want)
	}

	// benchstat's reader takes every line: five results, their units and
	// configuration, the rate declared higher-is-better, no syntax error.
	rd := benchfmt.NewReader(strings.NewReader(b.String()), "report.bench.txt")
	var results []*benchfmt.Result
	for rd.Scan() {
		switch rec := rd.Result().(type) {
		case *benchfmt.SyntaxError:
			t.Errorf("benchfmt: %v", rec)
		case *benchfmt.Result:
			results = append(results, rec.Clone())
		}
	}
	if err := rd.Err(); err != nil {
		t.Fatal(err)
	}
	if len(results) != 5 {
		t.Fatalf("benchfmt read %d results, want 5", len(results))
	}
	if v, ok := results[3].Value("msgs/s"); !ok || v != 812.5 || results[3].GetConfig("cpu") != "AMD EPYC" || results[3].Name.String() != "Peer/sendonce_first_send_median-2" {
		t.Errorf("result 3 = %s %v %v cpu %q, want Peer/sendonce_first_send_median-2 812.5 msgs/s on AMD EPYC", results[3].Name, v, ok, results[3].GetConfig("cpu"))
	}
	if m := rd.Units().Get("msgs/s", "better"); m == nil || m.Value != "higher" {
		t.Errorf("msgs/s better = %+v, want higher", m)
	}
}
