// Command demo runs the whole sendonce pipeline locally, through every
// provider adapter, under a gentle fault plan (chaos.Demo: package chaos,
// the engine of make chaos), and prints the faults, the verdict per
// adapter and one RESULT line from ground truth (chaos.Report.Write). `make demo` runs it after starting
// DynamoDB Local and moto_server.
//
//	go run ./cmd/demo [-n 300] [-seed 1] [-lanes http,sns,...] [-timeout 2m] [-v] [-keep DIR]
//
// Each adapter runs in its own lane (docs/chaos.md): the real sender,
// webhook and reconciler bootstraps under the Lambda Runtime Interface
// Emulator, DynamoDB Local, SQS on moto_server, the adapter against its
// real or faithful counterpart (the provider simulator, moto_server's SNS
// and SES, an SMTP server). The plan puts copies of messages on the
// queue, hands a few batches to two instances at once, has providers
// refuse or leave sends without an answer, posts callbacks twice and out
// of order and loses a few DynamoDB answers; each message is then checked
// against its provider's own record with groundtruth.Judge. -v prints
// the chaos report whole, as make chaos does.
//
// With -keep DIR (make demo KEEP=1) every lane's table and queues stay in
// the emulators, which make leaves running, the invalid requests back on
// the http lane's dead-letter queue with the sender's reasons; DIR/demo.env
// exports that lane's table, queues and redaction key (DIR/env,
// scripts/local-aws.sh's, sources it); and the demo ends with commands to
// look around (bin/sendonce list, inspect of a key it sent, dlq list).
//
// It reads the emulators' endpoints from SENDONCE_TEST_DYNAMODB_ENDPOINT and
// SENDONCE_TEST_MOTO_ENDPOINT and the emulator binary from
// SENDONCE_TEST_RIE. Exit status: 0 when no guarantee was broken (RESULT:
// OK), 1 on any violation or when the run could not be carried out, 2 on
// a usage error.
package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sendonce/sendonce/internal/chaos"
	"github.com/sendonce/sendonce/internal/cmdmain"
	"github.com/sendonce/sendonce/internal/testenv"
)

func main() { cmdmain.Main(run) }

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := cmdmain.FlagSet("demo", stderr)
	var (
		n       = fs.Int("n", 300, "number of valid messages, spread over the adapters")
		seed    = fs.Uint64("seed", 1, "seed of the workload and the fault plan")
		lanes   = fs.String("lanes", strings.Join(chaos.LaneNames(), ","), "adapters to drive, comma-separated")
		timeout = fs.Duration("timeout", 2*time.Minute, "bound on the run")
		verbose = fs.Bool("v", false, "print the chaos report whole (where each figure comes from, detail and metrics per adapter, the violations' log lines)")
		keep    = fs.String("keep", "", "leave every lane's table and queues in the emulators, write the http lane's variables to `DIR`/demo.env and print commands to look at them")
	)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 0 || *n <= 0 || *timeout <= 0 {
		fmt.Fprintln(stderr, "usage: demo [-n N>0] [-seed S] [-lanes a,b] [-timeout D>0] [-v] [-keep DIR]")
		return 2
	}
	o := chaos.Demo(*n, *seed)
	o.DynamoDBEndpoint, o.MotoEndpoint = getenv(testenv.DynamoDBEndpointEnv), getenv(testenv.MotoEndpointEnv)
	o.Lanes, o.Timeout, o.Progress, o.KeepResources = strings.Split(*lanes, ","), *timeout, stdout, *keep != ""
	if o.DynamoDBEndpoint == "" || o.MotoEndpoint == "" {
		fmt.Fprintf(stderr, "demo: the DynamoDB Local and moto_server endpoints are required (%s, %s): run it through `make demo`, which starts them\n", testenv.DynamoDBEndpointEnv, testenv.MotoEndpointEnv)
		return 1
	}
	rep, err := chaos.Run(ctx, o)
	if err != nil && rep.N == 0 {
		fmt.Fprintf(stderr, "demo: %v\n", err)
		return 1
	}
	if err != nil {
		// A partial report never reads as a pass.
		rep.Violations = append(rep.Violations, chaos.Violation{Kind: "run error", Detail: err.Error()})
	}
	fmt.Fprintln(stdout)
	rep.Write(stdout, *verbose)
	// With -keep, the commands to look around come last, whatever the
	// verdict: a failed run is worth a look too.
	if *keep != "" {
		if err := keepForLooking(rep, o.MotoEndpoint, *keep, stdout); err != nil {
			fmt.Fprintf(stderr, "demo: -keep: %v\n", err)
		}
	}
	if !rep.OK() {
		return 1
	}
	return 0
}
