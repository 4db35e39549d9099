// Command chaos runs the real local pipeline through every provider
// adapter (http, sns, smtp, ses), each against its counterpart, under
// redeliveries, crashes, provider faults and an outage, callback trouble,
// a DynamoDB error storm and lost DynamoDB answers (package chaos), then
// checks every message against each counterpart's ground truth and prints
// the verdict per adapter. `make chaos` runs it after starting DynamoDB
// Local and moto_server.
//
//	go run ./cmd/chaos [-n 2000] [-seed S] [-lanes http,sns,smtp,ses] [-crash-every D] [-outage D] [-timeout D]
//
// It reads the emulators' endpoints from SENDONCE_TEST_DYNAMODB_ENDPOINT
// and SENDONCE_TEST_MOTO_ENDPOINT and the emulator binary from
// SENDONCE_TEST_RIE. Without -seed a random seed is drawn and printed, so
// a failing run can be repeated. Exit status: 0 when no guarantee was
// broken, 1 on any violation or when the run could not be carried out, 2
// on a usage error.
package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/sendonce/sendonce/internal/chaos"
	"github.com/sendonce/sendonce/internal/cmdmain"
	"github.com/sendonce/sendonce/internal/testenv"
)

func main() { cmdmain.Main(run) }

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := cmdmain.FlagSet("chaos", stderr)
	var (
		n          = fs.Int("n", 2000, "number of valid logical messages")
		seed       = fs.Uint64("seed", 0, "seed of every fault (0: draw one and print it)")
		lanes      = fs.String("lanes", strings.Join(chaos.LaneNames(), ","), "adapters to drive, comma-separated")
		outage     = fs.Duration("outage", -1, "how long every send is refused (-1: the default mix's)")
		crashEvery = fs.Duration("crash-every", 0, "mean interval between SIGKILLs (0: the default mix's)")
		timeout    = fs.Duration("timeout", 0, "bound on the run (0: scaled to -n)")
	)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 0 || *n <= 0 || *timeout < 0 || *crashEvery < 0 {
		fmt.Fprintln(stderr, "usage: chaos [-n N>0] [-seed S] [-lanes a,b] [-crash-every D] [-outage D] [-timeout D]")
		return 2
	}
	if *seed == 0 {
		*seed = rand.Uint64N(1<<31) + 1
	}
	o := chaos.Defaults(*n, *seed)
	o.DynamoDBEndpoint, o.MotoEndpoint = getenv(testenv.DynamoDBEndpointEnv), getenv(testenv.MotoEndpointEnv)
	o.Lanes, o.Progress = strings.Split(*lanes, ","), stdout
	if *outage >= 0 {
		o.Outage = *outage
	}
	if *crashEvery > 0 {
		o.CrashEvery = *crashEvery
	}
	if *timeout > 0 {
		o.Timeout = *timeout
	}
	if o.DynamoDBEndpoint == "" || o.MotoEndpoint == "" {
		fmt.Fprintf(stderr, "chaos: the DynamoDB Local and moto_server endpoints are required (%s, %s): run it through `make chaos`, which starts them\n", testenv.DynamoDBEndpointEnv, testenv.MotoEndpointEnv)
		return 1
	}
	fmt.Fprintf(stdout, "chaos: seed %d (repeat with -seed=%d), %d messages through %s\n", *seed, *seed, *n, *lanes)
	start := time.Now()
	rep, err := chaos.Run(ctx, o)
	if err != nil && rep.N == 0 {
		// Nothing ran: a report would only show empty tables.
		fmt.Fprintf(stderr, "chaos: %v\n", err)
		return 1
	}
	if err != nil {
		// A partial report never reads as a pass.
		rep.Violations = append(rep.Violations, chaos.Violation{Kind: "run error", Detail: err.Error()})
	}
	fmt.Fprintln(stdout)
	rep.Write(stdout, true)
	fmt.Fprintf(stdout, "wall time %s\n", time.Since(start).Round(100*time.Millisecond))
	if err != nil {
		fmt.Fprintf(stderr, "chaos: %v\n", err)
		return 1
	}
	if !rep.OK() {
		return 1
	}
	return 0
}
