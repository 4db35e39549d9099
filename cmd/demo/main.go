// Command demo runs the whole sendonce pipeline locally with real
// components (package localpipeline) and prints a summary from ground
// truth. `make demo` runs it after starting DynamoDB Local and
// moto_server.
//
//	go run ./cmd/demo [-n 300] [-instances 4] [-seed 1] [-timeout 100s] [-native 40]
//
// After the main run (every channel through the generic HTTP provider
// simulator, with faults), a second pipeline sends -native messages
// through Amazon SNS (SMS) and Amazon SES (email) on moto_server, each
// enqueued twice, and checks moto's record of what was sent.
//
// It reads the emulators' endpoints from SENDONCE_TEST_DYNAMODB_ENDPOINT and
// SENDONCE_TEST_MOTO_ENDPOINT and the emulator binary from
// SENDONCE_TEST_RIE. Exit status: 0 when every message was sent at most
// once and none was lost (and no address reached a log), 1 otherwise or
// when the run could not be carried out, 2 on a usage error.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sendonce/sendonce/internal/localpipeline"
	"github.com/sendonce/sendonce/internal/provider/simulator"
	"github.com/sendonce/sendonce/internal/testenv"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		n         = fs.Int("n", 300, "number of valid logical messages")
		instances = fs.Int("instances", localpipeline.DefaultSenderInstances, "concurrent sender Lambda instances")
		seed      = fs.Uint64("seed", 1, "seed of the workload and the simulator")
		timeout   = fs.Duration("timeout", 100*time.Second, "bound on the run, from the first message to the drained pipeline")
		native    = fs.Int("native", 40, "messages sent afterwards through SNS (SMS) and SES (email) on moto_server; 0 skips")
	)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 0 || *n <= 0 || *instances <= 0 || *timeout <= 0 || *native < 0 {
		fmt.Fprintln(stderr, "usage: demo [-n N>0] [-instances K>0] [-seed S] [-timeout D>0] [-native M>=0]")
		return 2
	}

	p, err := localpipeline.Start(ctx, localpipeline.Options{
		DynamoDBEndpoint: getenv(testenv.DynamoDBEndpointEnv),
		MotoEndpoint:     getenv(testenv.MotoEndpointEnv),
		SenderInstances:  *instances,
		Simulator: simulator.Options{
			// The generic HTTP provider honours Idempotency-Key
			// (docs/http-provider.md), and the sender relies on it: an ambiguous send is
			// released and repeated with the same key. The summary shows
			// how many repeats the provider had to drop.
			Seed:      *seed,
			Latency:   5 * time.Millisecond,
			Jitter:    20 * time.Millisecond,
			Callbacks: simulator.CallbackOptions{Duplicates: 1, Reorder: true, Workers: 4, Queue: 4 * *n},
		},
		Progress: stdout,
	})
	if err != nil {
		fmt.Fprintf(stderr, "demo: %v\n", err)
		return 1
	}
	defer func() {
		if err := p.Close(); err != nil {
			fmt.Fprintf(stderr, "demo: stop: %v\n", err)
		}
	}()

	w := localpipeline.NewWorkload(localpipeline.DefaultWorkload(*n, *seed))
	rep, err := localpipeline.Run(ctx, p, w, localpipeline.RunOptions{Timeout: *timeout, Progress: stdout})
	fmt.Fprintln(stdout)
	rep.WriteSummary(stdout)
	if err != nil {
		fmt.Fprintf(stderr, "demo: %v\n", err)
		return 1
	}
	if !rep.OK() {
		return 1
	}
	if *native > 0 {
		return runNative(ctx, getenv, *native, *timeout, stdout, stderr)
	}
	return 0
}

// runNative runs a second pipeline whose functions send SMS through
// Amazon SNS and email through Amazon SES (moto_server), each message
// enqueued twice, and checks moto's record: each exactly once.
func runNative(ctx context.Context, getenv func(string) string, n int, timeout time.Duration, stdout, stderr io.Writer) int {
	moto := getenv(testenv.MotoEndpointEnv)
	env, err := localpipeline.NativeEnv(ctx, moto, "notify@sendonce.example")
	if err != nil {
		fmt.Fprintf(stderr, "demo: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout, "\n==> SMS through SNS and email through SES (moto_server)")
	p, err := localpipeline.Start(ctx, localpipeline.Options{
		DynamoDBEndpoint: getenv(testenv.DynamoDBEndpointEnv),
		MotoEndpoint:     moto,
		SenderInstances:  2,
		// moto_server answers slowly on a busy machine: a longer provider
		// timeout keeps ambiguous sends (and their policy) the exception.
		ProviderTimeout:   5 * time.Second,
		ClaimTimeout:      15 * time.Second,
		SenderTimeout:     15 * time.Second,
		VisibilityTimeout: 20 * time.Second,
		Env:               env,
		Progress:          stdout,
	})
	if err != nil {
		fmt.Fprintf(stderr, "demo: %v\n", err)
		return 1
	}
	defer func() {
		if err := p.Close(); err != nil {
			fmt.Fprintf(stderr, "demo: stop: %v\n", err)
		}
	}()
	rep, err := localpipeline.RunNative(ctx, p, n, 2, timeout)
	rep.WriteSummary(stdout)
	if err != nil {
		fmt.Fprintf(stderr, "demo: %v\n", err)
		return 1
	}
	if !rep.OK() {
		return 1
	}
	return 0
}
