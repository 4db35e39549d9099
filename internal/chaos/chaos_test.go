package chaos

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/localpipeline"
	"github.com/sendonce/sendonce/internal/provider/simulator"
	"github.com/sendonce/sendonce/internal/rie"
	"github.com/sendonce/sendonce/internal/testenv"
	"github.com/sendonce/sendonce/internal/testsupport"
)

func TestDefaults(t *testing.T) {
	t.Parallel()
	o := Defaults(2000, 1)
	sim := simulator.New(simulator.Options{})
	defer sim.Close()
	if err := sim.SetRandom(o.ProviderFaults); err != nil {
		t.Errorf("default provider faults: %v", err)
	}
	if o.FaultWindow >= o.Timeout {
		t.Errorf("fault window %s, timeout %s: the calm phase has no time", o.FaultWindow, o.Timeout)
	}
}

// TestChaosSmall runs a small chaos run through every adapter's lane:
// each lane's sender, webhook and reconciler bootstraps under the
// emulator, DynamoDB Local behind the storm proxy, SQS on moto_server,
// each adapter against its counterpart (the HTTP simulators,
// moto_server's SNS and SES, an SMTP server), with an outage and lost
// DynamoDB answers. Any violation fails it.
func TestChaosSmall(t *testing.T) {
	t.Parallel()
	ddb, moto := testenv.DynamoDBEndpoint(t), testenv.MotoEndpoint(t)
	bin := os.Getenv(rie.BinaryEnv)
	if bin == "" {
		t.Fatal(rie.ErrNoBinary)
	}
	o := Defaults(100, 7)
	o.DynamoDBEndpoint, o.MotoEndpoint, o.RIE = ddb, moto, bin
	// Built (or found, under make test) before the run's deadline starts:
	// a cold build on a busy machine can take minutes of its own.
	o.Bootstraps = localpipeline.Bootstraps{SenderBootstrap: rie.Build(t, "sender"), WebhookBootstrap: rie.Build(t, "webhook"), ReconcilerBootstrap: rie.Build(t, "reconciler")}
	o.CrashEvery = 2 * time.Second
	o.Outage, o.OutageAt = 10*time.Second, 2*time.Second
	o.FaultWindow = 15 * time.Second
	o.Timeout = 100 * time.Second // alone it drains in about a minute; a loaded machine needs slack
	var progress testsupport.Buffer
	o.Progress = &progress
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	rep, err := Run(ctx, o)
	var out strings.Builder
	rep.Write(&out, true)
	if err != nil {
		t.Fatalf("run: %v\n%s\nprogress:\n%s", err, out.String(), progress.String())
	}
	for _, name := range LaneNames() {
		l, ok := rep.Lane(name)
		// Accepted by the provider at all: on a loaded machine every call
		// of a small lane may pass the provider timeout after moto took it
		// (ambiguous: resent or abandoned by class, both counted).
		if !ok || l.N == 0 || l.DeliveredOnce+l.DeliveredTwice+l.AbandonedDelivered == 0 || l.Poller.Invocations == 0 {
			t.Errorf("lane %s did not deliver: %+v", name, l)
		}
	}
	// The smtp lane's content check read messages of every shape: with
	// an HTML part, and with a subject outside ASCII (RFC 2047).
	if l, _ := rep.Lane("smtp"); l.MIME == nil || l.MIME.Checked == 0 || l.MIME.HTML == 0 || l.MIME.HTML == l.MIME.Checked || l.MIME.Encoded == 0 {
		t.Errorf("the smtp lane's content check: %+v", l.MIME)
	}
	if len(rep.Violations) > 0 {
		t.Fatalf("violations:\n%s\nprogress:\n%s", out.String(), progress.String())
	}
	// make demo's summary of the same report carries its verdict.
	var sum strings.Builder
	rep.Write(&sum, false)
	if !strings.Contains(sum.String(), "\nRESULT: OK") {
		t.Errorf("the demo's summary of a run without violations:\n%s", sum.String())
	}
	kills := 0
	for _, f := range rep.Faults {
		if strings.HasPrefix(f.Fault, "SIGKILL") {
			kills += f.Injected
		}
	}
	if kills == 0 {
		t.Errorf("no crash was injected:\n%s", out.String())
	}
	t.Logf("\n%s", out.String())
}

// TestAmbiguous: a class-policy abandon after a lost DynamoDB answer is a
// miss only when something else made the message ambiguous and every lost
// answer its worker lived through was released; otherwise a violation.
func TestAmbiguous(t *testing.T) {
	t.Parallel()
	const key = "v1_k"
	line := func(msg string, extra string) string {
		return `{"level":"ERROR","message":"` + msg + `","key":"` + key + `"` + extra + `}`
	}
	released := line("take over: ledger answer lost; releasing the claim it may have taken", "")
	releasedClaim := line("claim: ledger answer lost; releasing the claim it may have taken", "")
	died := `{"level":"WARN","message":"abandoned","key":"` + key + `","state":"PENDING","attempts":4}`
	for _, tc := range []struct {
		name        string
		ops         []string
		logs        []string
		diedHolding bool
		want        bool
	}{
		{"NoLostAnswer", nil, nil, false, true},
		{"KilledAfterTheLostAnswer", []string{"takeover+kill"}, nil, false, true},
		{"LostTakeoverOfAnUnreleasedRow", []string{"claim+kill", "takeover(unreleased)"}, nil, false, true},
		{"ReleaseNeverApplied", []string{"release"}, nil, false, true},
		{"LostClaimNotReleased", []string{"claim"}, []string{died}, false, false},
		{"LostTakeoverReleasedNothingElse", []string{"takeover"}, []string{released}, false, false},
		{"LostTakeoverReleasedThenAWorkerDied", []string{"takeover"}, []string{released, died}, false, true},
		{"LostTakeoverReleasedThenAmbiguous", []string{"takeover"}, []string{released, line("provider call failed", `,"kind":"ambiguous"`)}, false, true},
		{"ReleaseFailed", []string{"takeover"}, []string{released, line("release claim failed: the row stays PENDING until its lease passes", ""), died}, false, false},
		{"TwoLostOneReleased", []string{"claim", "takeover"}, []string{released, died}, false, false},
		{"AnotherKeysEvidence", []string{"takeover"}, []string{released, strings.ReplaceAll(died, key, "v1_other")}, false, false},
		// A lost Claim that DynamoDB refused (another worker held the row,
		// died holding it, and the sender that marked its stale claim
		// UNCERTAIN died before it logged): it changed nothing, and its
		// fenced release says nothing about the row.
		{"LostClaimOfAHeldRow", []string{"claim(unapplied)"}, []string{releasedClaim}, false, true},
		{"LostClaimOfAHeldRowThenKilled", []string{"claim(unapplied)+kill"}, nil, false, true},
		{"LostTakeOverThatLostToAnother", []string{"takeover(unapplied)"}, []string{released}, false, true},
		{"RefusedClaimsReleaseIsNotTheTakeOvers", []string{"claim(unapplied)", "takeover"}, []string{releasedClaim, died}, false, false},
		// The front saw a worker die holding the row (its takeover applied,
		// then its death before it released or marked): ambiguous, though
		// no line says so (the sender that marked its stale claim
		// UNCERTAIN, and the reconciler that abandoned it, were killed
		// before they logged).
		{"LostClaimReleasedThenAWorkerDiedHolding", []string{"claim"}, []string{releasedClaim}, true, true},
		{"LostClaimNotReleasedThoughAWorkerDiedHolding", []string{"claim"}, nil, true, false},
		{"RefusedClaimAndAReleasedTakeOverThenAWorkerDied", []string{"claim(unapplied)", "takeover"}, []string{releasedClaim, released, died}, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			logs := map[string]string{"sender-1": "START\n" + strings.Join(tc.logs, "\n") + "\nEND"}
			if got := ambiguous(tc.ops, tc.diedHolding, keyLines(logs)[key]); got != tc.want {
				t.Errorf("ambiguous(%v) = %v, want %v", tc.ops, got, tc.want)
			}
		})
	}
}
