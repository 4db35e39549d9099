package chaos

import (
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/provider/simulator"
)

// TestDemo: make demo's plan is gentle (no crash, no outage of every
// lane, no throttling storm) and leaves the calm phase time.
func TestDemo(t *testing.T) {
	t.Parallel()
	o := Demo(300, 1)
	sim := simulator.New(simulator.Options{})
	defer sim.Close()
	if err := sim.SetRandom(o.ProviderFaults); err != nil {
		t.Errorf("demo provider faults: %v", err)
	}
	if o.CrashEvery != 0 || o.Outage != 0 || o.Storm.BurstRate != 0 || len(o.Storm.Lost) != 0 {
		t.Errorf("the demo's plan is not gentle: %+v", o)
	}
	if o.FaultWindow >= o.Timeout {
		t.Errorf("fault window %s, timeout %s: the calm phase has no time", o.FaultWindow, o.Timeout)
	}
}

// TestWrite: the report names each adapter and the smtp lane's content
// check, and its one verdict line follows the report's violations; the
// demo's short form leaves out the detail and the log lines.
func TestWrite(t *testing.T) {
	t.Parallel()
	r := Report{Seed: 1, N: 3, Elapsed: time.Second, Lanes: []LaneReport{
		{Name: "http", N: 2, DeliveredOnce: 1, States: map[ledger.State]int{ledger.StateSent: 1, ledger.StateFailed: 1}, Failed: map[string]int{"400": 1}},
		{Name: "smtp", N: 1, DeliveredOnce: 1, MIME: &MIMEReport{Checked: 1, HTML: 1, Encoded: 1}},
	}}
	var ok strings.Builder
	r.Write(&ok, false)
	for _, want := range []string{"\nhttp ", "\nsmtp ", "smtp content: 1 messages the server took checked", "\nRESULT: OK"} {
		if !strings.Contains(ok.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, ok.String())
		}
	}
	r.Violations = []Violation{{Lane: "http", Kind: "lost", Key: "v1_k", Detail: "PENDING, never delivered", Events: []string{"sender-1: a log line"}}}
	var failed, verbose strings.Builder
	r.Write(&failed, false)
	if !strings.Contains(failed.String(), "\nRESULT: FAILED: 1 violations (lost 1)\n  - [http] lost v1_k") || strings.Contains(failed.String(), "RESULT: OK") ||
		strings.Contains(failed.String(), "a log line") || strings.Contains(failed.String(), "DETAIL") {
		t.Errorf("a report with a violation:\n%s", failed.String())
	}
	r.Write(&verbose, true)
	if !strings.Contains(verbose.String(), "      sender-1: a log line") || !strings.Contains(verbose.String(), "states: FAILED 1, SENT 1") {
		t.Errorf("the verbose report of a violation:\n%s", verbose.String())
	}
}

// TestAddressBase: each lane's recipients are its own, and a run's start
// at an offset of its own, whatever the seed (runs of one seed on one
// moto_server counted each other's messages twice when it was the
// seed's).
func TestAddressBase(t *testing.T) {
	t.Parallel()
	seen := map[int]bool{}
	for range 20 {
		for idx := range 3 {
			b := addressBase(idx)
			if b < idx*1000000 || b >= idx*1000000+900000 {
				t.Fatalf("addressBase(%d) = %d, outside the lane's range", idx, b)
			}
			seen[b] = true
		}
	}
	if len(seen) < 50 {
		t.Errorf("60 offsets drawn, %d distinct: not random per run", len(seen))
	}
}
