package benchreport_test

import (
	"errors"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/benchreport"
)

const goBenchOutput = `goos: linux
goarch: amd64
pkg: github.com/sendonce/sendonce/internal/sendkey
cpu: AMD EPYC
BenchmarkDerive-2   	 3045870	       392.1 ns/op	     224 B/op	       3 allocs/op
BenchmarkClaimMark/FirstDelivery-2         	     312	   3859402 ns/op	         2.000 writes/op	         0 reads/op	         2.000 WCU/op
BenchmarkNoProcs 	 10	 5 ns/op
BenchmarkLogLine: something the benchmark logged
PASS
ok  	github.com/sendonce/sendonce/internal/sendkey	1.512s
`

func TestParseGoBench(t *testing.T) {
	t.Parallel()
	got, err := benchreport.ParseGoBench(strings.NewReader(goBenchOutput))
	if err != nil {
		t.Fatalf("ParseGoBench: %v", err)
	}
	if len(got) != 3 {
		t.Fatalf("got %d results, want 3: %+v", len(got), got)
	}
	tests := []struct {
		i      int
		name   string
		procs  int
		n      int64
		metric string
		want   float64
	}{
		{0, "BenchmarkDerive", 2, 3045870, "ns/op", 392.1},
		{0, "BenchmarkDerive", 2, 3045870, "allocs/op", 3},
		{1, "BenchmarkClaimMark/FirstDelivery", 2, 312, "WCU/op", 2},
		{2, "BenchmarkNoProcs", 1, 10, "ns/op", 5},
	}
	for _, tt := range tests {
		b := got[tt.i]
		if b.Name != tt.name || b.Procs != tt.procs || b.N != tt.n {
			t.Errorf("result %d = %s-%d N=%d, want %s-%d N=%d", tt.i, b.Name, b.Procs, b.N, tt.name, tt.procs, tt.n)
		}
		if v, ok := b.Metrics[tt.metric]; !ok || v != tt.want {
			t.Errorf("result %d %s = %v (present %v), want %v", tt.i, tt.metric, v, ok, tt.want)
		}
	}
}

func TestParseGoBenchErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in string
		is       error
	}{
		{"Empty", "", benchreport.ErrNoBenchmarks},
		{"OnlyHeaders", "goos: linux\nPASS\nok x 1s\n", benchreport.ErrNoBenchmarks},
		{"UnpairedUnits", "BenchmarkX-2 10 5 ns/op 7\n", nil},
		{"BadValue", "BenchmarkX-2 10 five ns/op\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := benchreport.ParseGoBench(strings.NewReader(tt.in))
			if err == nil {
				t.Fatalf("ParseGoBench(%q) = nil error, want one", tt.in)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("err = %v, want %v", err, tt.is)
			}
		})
	}
}

func FuzzParseGoBench(f *testing.F) {
	f.Add(goBenchOutput)
	f.Add("BenchmarkX-2 10 5 ns/op 7\n")
	f.Add("Benchmark-0 1 NaN x\n")
	f.Fuzz(func(t *testing.T, in string) {
		got, err := benchreport.ParseGoBench(strings.NewReader(in))
		if err != nil {
			if len(got) != 0 {
				t.Errorf("results %v returned with error %v", got, err)
			}
			return
		}
		for _, b := range got {
			if !strings.HasPrefix(b.Name, "Benchmark") || b.N <= 0 || b.Procs <= 0 {
				t.Errorf("bad result %+v", b)
			}
		}
	})
}

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

func TestReportRoundTripAndTables(t *testing.T) {
	t.Parallel()
	r := benchreport.Report{
		Machine: benchreport.Machine{NProc: 2, CPU: "AMD EPYC", Go: "go1.26.8", GOOS: "linux", GOARCH: "amd64"},
		Started: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC),
		Seconds: 90,
	}
	r.Add("dynamodb", "first send: calls", 2, "calls/msg", "a | pipe")
	r.Note("DynamoDB Local says %s", "nothing")
	path := filepath.Join(t.TempDir(), "sub", "report.json")
	if err := r.WriteFile(path); err != nil {
		t.Fatalf("WriteFile: %v", err)
	}
	got, err := benchreport.ReadFile(path)
	if err != nil {
		t.Fatalf("ReadFile: %v", err)
	}
	row, ok := got.Find("dynamodb", "first send: calls")
	if !ok || row.Value != 2 || row.Unit != "calls/msg" || got.Machine != r.Machine || len(got.Notes) != 1 {
		t.Errorf("round trip = %+v, want the report written", got)
	}
	if _, ok := got.Find("dynamodb", "missing"); ok {
		t.Errorf("Find found a row that does not exist")
	}

	var md strings.Builder
	if err := r.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"2 CPUs (`nproc`), AMD EPYC, go1.26.8", "| dynamodb | first send: calls | 2 | calls/msg | a \\| pipe |", "- DynamoDB Local says nothing"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("Markdown lacks %q:\n%s", want, md.String())
		}
	}
	var txt strings.Builder
	if err := r.WriteText(&txt); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(txt.String(), "first send: calls") || !strings.Contains(txt.String(), "calls/msg") {
		t.Errorf("text table lacks the row:\n%s", txt.String())
	}
}

func TestWriteGoBench(t *testing.T) {
	t.Parallel()
	r := &benchreport.Report{Machine: benchreport.Machine{NProc: 2, CPU: "AMD EPYC", GOOS: "linux", GOARCH: "amd64"}}
	r.Add("peer", "sendonce / Powertools, first send (median of rounds)", 1.25, "ratio", "how")
	r.Rows[0].Samples = []float64{1.2, 1.25, 1.3}
	r.Add("peer", "sendonce first send (median)", 812.5, "msgs/s", "how")
	r.Add("dynamodb", "first send: DynamoDB calls", 2, "calls/msg", "how")
	var b strings.Builder
	if err := r.WriteGoBench(&b); err != nil {
		t.Fatal(err)
	}
	want := `goos: linux
goarch: amd64
pkg: github.com/sendonce/sendonce/cmd/bench
cpu: AMD EPYC
Unit msgs/s better=higher
BenchmarkPeer/sendonce_per_Powertools_first_send_median_of_rounds-2	1	1.2 ratio
BenchmarkPeer/sendonce_per_Powertools_first_send_median_of_rounds-2	1	1.25 ratio
BenchmarkPeer/sendonce_per_Powertools_first_send_median_of_rounds-2	1	1.3 ratio
BenchmarkPeer/sendonce_first_send_median-2	1	812.5 msgs/s
BenchmarkDynamodb/first_send_DynamoDB_calls-2	1	2 calls/msg
`
	if b.String() != want {
		t.Errorf("WriteGoBench =\n%s\nwant\n%s", b.String(), want)
	}
	// The result lines read back as benchmark results.
	got, err := benchreport.ParseGoBench(strings.NewReader(b.String()))
	if err != nil || len(got) != 5 || got[3].Metrics["msgs/s"] != 812.5 || got[3].Procs != 2 {
		t.Errorf("ParseGoBench of the output = %+v, %v", got, err)
	}
}
