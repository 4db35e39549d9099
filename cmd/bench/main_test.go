package main

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/dispatch"
	"github.com/sendonce/sendonce/internal/ledger/memledger"
	"github.com/sendonce/sendonce/internal/testenv"
	"github.com/sendonce/sendonce/provider/providertest"
)

func TestRunWithoutEmulators(t *testing.T) {
	t.Parallel()
	var stdout, stderr strings.Builder
	code := run(context.Background(), nil, func(string) string { return "" }, &stdout, &stderr)
	if code != 1 {
		t.Errorf("exit code = %d, want 1", code)
	}
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], "SENDONCE_TEST_DYNAMODB_ENDPOINT") || !strings.Contains(lines[0], "make bench") {
		t.Errorf("stderr = %q, want one line naming the variables and `make bench`", stderr.String())
	}
}

func TestRunUsage(t *testing.T) {
	t.Parallel()
	var stdout, stderr strings.Builder
	if code := run(context.Background(), []string{"-only", "nosuch"}, func(string) string { return "x" }, &stdout, &stderr); code != 2 {
		t.Errorf("exit code = %d, want 2 for an unknown section", code)
	}
}

func TestLoadEndpoints(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		env     map[string]string
		missing string
	}{
		{"All", map[string]string{"SENDONCE_TEST_DYNAMODB_ENDPOINT": "d", "SENDONCE_TEST_MOTO_ENDPOINT": "m", "SENDONCE_TEST_RIE": "r"}, ""},
		{"NoRIE", map[string]string{"SENDONCE_TEST_DYNAMODB_ENDPOINT": "d", "SENDONCE_TEST_MOTO_ENDPOINT": "m"}, "SENDONCE_TEST_RIE"},
		{"NoMoto", map[string]string{"SENDONCE_TEST_DYNAMODB_ENDPOINT": "d", "SENDONCE_TEST_RIE": "r"}, "SENDONCE_TEST_MOTO_ENDPOINT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e, err := loadEndpoints(func(k string) string { return tt.env[k] })
			if tt.missing == "" {
				if err != nil || e.dynamo != "d" || e.moto != "m" || e.rie != "r" {
					t.Errorf("loadEndpoints = %+v, %v; want all three", e, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.missing) {
				t.Errorf("err = %v, want one naming %s", err, tt.missing)
			}
		})
	}
}

func TestParseVmHWM(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in string
		want     int64
		wantErr  bool
	}{
		{"OK", "Name:\tbootstrap\nVmPeak:\t  800000 kB\nVmHWM:\t   22156 kB\nVmRSS:\t   20000 kB\n", 22156, false},
		{"Missing", "Name:\tbootstrap\n", 0, true},
		{"BadUnit", "VmHWM:\t 12 MB\n", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := parseVmHWM([]byte(tt.in))
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("parseVmHWM = %d, %v; want %d (error %v)", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestOwnVmHWM(t *testing.T) {
	t.Parallel()
	kb, err := vmHWM(os.Getpid())
	if err != nil || kb <= 0 {
		t.Errorf("vmHWM(self) = %d, %v; want a positive size", kb, err)
	}
}

func TestParseInitDuration(t *testing.T) {
	t.Parallel()
	log := "29 Nov 2026 14:06:47,909 [INFO] (rapid) INIT START(type: on-demand, phase: init)\n" +
		"29 Nov 2026 14:06:47,920 [INFO] (rapid) INIT REPORT(durationMs: 10.719000)\n"
	if got, ok := parseInitDuration(log); !ok || got != 10.719 {
		t.Errorf("parseInitDuration = %v, %v; want 10.719", got, ok)
	}
	if _, ok := parseInitDuration("REPORT RequestId: x\tInit Duration: 0.02 ms"); ok {
		t.Errorf("parseInitDuration took the REPORT line's Init Duration")
	}
}

func TestDrive(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	l, err := driveLat(context.Background(), 4, 50*time.Millisecond, func(context.Context) error {
		calls.Add(1)
		time.Sleep(time.Millisecond)
		return nil
	})
	if err != nil || l.rate() <= 0 || calls.Load() == 0 || len(l.lat) != l.n {
		t.Errorf("driveLat = %d calls, %d latencies, rate %v, %v after %d calls; want a positive rate and one latency per call", l.n, len(l.lat), l.rate(), err, calls.Load())
	}
	boom := errors.New("boom")
	if _, err := driveLat(context.Background(), 4, time.Second, func(context.Context) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("driveLat error = %v, want %v", err, boom)
	}
}

func TestSenderMemLedgerPath(t *testing.T) {
	t.Parallel()
	fake := &providertest.Fake{ProviderName: "http"}
	s, err := newSender(memledger.New(memledger.Config{}), fake)
	if err != nil {
		t.Fatal(err)
	}
	run := testenv.RandomID()
	ctx := context.Background()
	for i := range 3 {
		if res := s.Process(ctx, request(run, i)); res.Disposition != dispatch.Sent {
			t.Fatalf("Process = %s (%s), want sent", res.Disposition, res.Reason)
		}
	}
	if res := s.Process(ctx, request(run, 0)); res.Disposition != dispatch.Duplicate {
		t.Errorf("redelivery = %s, want duplicate", res.Disposition)
	}
	if got := fake.Calls(); got != 3 {
		t.Errorf("provider calls = %d, want 3", got)
	}
}

func TestCallList(t *testing.T) {
	t.Parallel()
	if got, want := callList(map[string]int{"UpdateItem": 20, "PutItem": 20}), "PutItem 20, UpdateItem 20"; got != want {
		t.Errorf("callList = %q, want %q", got, want)
	}
	if got := callList(map[string]int{}); got != "none" {
		t.Errorf("callList(empty) = %q, want none", got)
	}
}
