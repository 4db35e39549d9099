// Command demo runs the whole sendonce pipeline locally with real
// components (package localpipeline) and prints a summary from ground
// truth. `make demo` runs it after starting DynamoDB Local and
// moto_server.
//
//	go run ./cmd/demo [-n 300] [-instances 4] [-seed 1] [-timeout 100s] [-native 40] [-smtp 20] [-keep DIR]
//
// After the main run (every channel through the generic HTTP provider
// simulator, with faults), a second pipeline sends -native messages
// through Amazon SNS (SMS) and Amazon SES (email) on moto_server, each
// enqueued twice, and checks moto's record of what was sent; a third
// sends -smtp emails through the SMTP adapter to a real SMTP server the
// demo runs, each enqueued twice, and checks what the server received:
// each message once, with the right subject and parts. The three
// pipelines share one build of the function bootstraps.
//
// With -keep DIR (make demo KEEP=1) the main run's table and queues stay
// in the emulators, which make leaves running: the invalid requests of the
// workload go through the sender once more, so that the dead-letter queue
// holds them with their reasons; DIR/demo.env exports the table, the
// queues and the redaction key (DIR/env, scripts/local-aws.sh's, sources
// it); and the demo ends with commands to look around (bin/sendonce list,
// inspect of a key it sent, dlq list).
//
// It reads the emulators' endpoints from SENDONCE_TEST_DYNAMODB_ENDPOINT and
// SENDONCE_TEST_MOTO_ENDPOINT and the emulator binary from
// SENDONCE_TEST_RIE. Exit status: 0 when every message was sent at most
// once and none was lost (and no address reached a log), 1 otherwise or
// when the run could not be carried out, 2 on a usage error.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/sendonce/sendonce/internal/cmdmain"
	"github.com/sendonce/sendonce/internal/localpipeline"
	"github.com/sendonce/sendonce/internal/provider/simulator"
	"github.com/sendonce/sendonce/internal/provider/smtpprovider/smtptest"
	"github.com/sendonce/sendonce/internal/testenv"
)

func main() { cmdmain.Main(run) }

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := cmdmain.FlagSet("demo", stderr)
	var (
		n         = fs.Int("n", 300, "number of valid logical messages")
		instances = fs.Int("instances", localpipeline.DefaultSenderInstances, "concurrent sender Lambda instances")
		seed      = fs.Uint64("seed", 1, "seed of the workload and the simulator")
		timeout   = fs.Duration("timeout", 100*time.Second, "bound on the run, from the first message to the drained pipeline")
		native    = fs.Int("native", 40, "messages sent afterwards through SNS (SMS) and SES (email) on moto_server; 0 skips")
		smtpN     = fs.Int("smtp", 20, "emails sent afterwards through the SMTP adapter to a local SMTP server; 0 skips")
		keep      = fs.String("keep", "", "leave the main run's table and queues in the emulators, write their variables to `DIR`/demo.env and print commands to look at them")
	)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 0 || *n <= 0 || *instances <= 0 || *timeout <= 0 || *native < 0 || *smtpN < 0 {
		fmt.Fprintln(stderr, "usage: demo [-n N>0] [-instances K>0] [-seed S] [-timeout D>0] [-native M>=0] [-smtp E>=0] [-keep DIR]")
		return 2
	}

	dir, err := os.MkdirTemp("", "sendonce-demo-")
	if err != nil {
		fmt.Fprintf(stderr, "demo: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)
	boot, err := localpipeline.BuildBootstraps(ctx, dir, localpipeline.Bootstraps{})
	if err != nil {
		fmt.Fprintf(stderr, "demo: %v\n", err)
		return 1
	}

	p, err := localpipeline.Start(ctx, localpipeline.Options{
		DynamoDBEndpoint: getenv(testenv.DynamoDBEndpointEnv),
		MotoEndpoint:     getenv(testenv.MotoEndpointEnv),
		Bootstraps:       boot,
		SenderInstances:  *instances,
		Simulator: simulator.Options{
			// The generic HTTP provider honours Idempotency-Key
			// (docs/http-provider.md): the reconciler settles an ambiguous
			// send through it by lookup, or repeats it with the same key.
			// The summary shows how many repeats the provider had to drop.
			Seed:      *seed,
			Latency:   5 * time.Millisecond,
			Jitter:    20 * time.Millisecond,
			Callbacks: simulator.CallbackOptions{Duplicates: 1, Reorder: true, Workers: 4, Queue: 4 * *n},
		},
		Progress:      stdout,
		KeepResources: *keep != "",
	})
	if err != nil {
		fmt.Fprintf(stderr, "demo: %v\n", err)
		return 1
	}
	stopMain := sync.OnceFunc(func() {
		if err := p.Close(); err != nil {
			fmt.Fprintf(stderr, "demo: stop: %v\n", err)
		}
	})
	defer stopMain()

	w := localpipeline.NewWorkload(localpipeline.DefaultWorkload(*n, *seed))
	rep, err := localpipeline.Run(ctx, p, w, localpipeline.RunOptions{Timeout: *timeout, Progress: stdout})
	fmt.Fprintln(stdout)
	rep.WriteSummary(stdout)
	// With -keep, the commands to look around come last, whatever the
	// verdict: a failed run is worth a look too.
	if *keep != "" {
		if look, err := keepForLooking(ctx, p, w, rep, *keep); err != nil {
			fmt.Fprintf(stderr, "demo: -keep: %v\n", err)
		} else {
			defer look(stdout)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "demo: %v\n", err)
		return 1
	}
	if !rep.OK() {
		return 1
	}
	stopMain() // before the next phases: the machine is small
	if *native == 0 && *smtpN == 0 {
		return 0
	}
	ph := phases{getenv: getenv, boot: boot, timeout: *timeout, stdout: stdout, stderr: stderr}
	var summaries []func(io.Writer)
	ok := true
	if *native > 0 {
		rep, err := ph.native(ctx, *native)
		summaries = append(summaries, rep.WriteSummary)
		ok = ok && err == nil && rep.OK()
	}
	if *smtpN > 0 {
		rep, err := ph.smtp(ctx, *smtpN)
		summaries = append(summaries, rep.WriteSummary)
		ok = ok && err == nil && rep.OK()
	}
	// The native figures side by side, after both phases' progress.
	fmt.Fprintln(stdout)
	for _, write := range summaries {
		write(stdout)
	}
	if !ok {
		fmt.Fprintln(stdout, "RESULT: FAILED: a message of the SNS/SES or SMTP phase was delivered twice, lost, not SENT or wrong, or an address reached a log")
		return 1
	}
	fmt.Fprintln(stdout, "RESULT: OK: every message of the SNS/SES and SMTP phases delivered exactly once")
	return 0
}

// phases runs the demo's phases after the main run: each its own
// pipeline, each message enqueued twice.
type phases struct {
	getenv         func(string) string
	boot           localpipeline.Bootstraps
	timeout        time.Duration
	stdout, stderr io.Writer
}

// start starts a pipeline with env for a phase. moto_server and the
// SMTP server answer slowly on a busy machine: a longer provider timeout
// keeps ambiguous sends (and their policy) the exception.
func (ph phases) start(ctx context.Context, env map[string]string) (*localpipeline.Pipeline, error) {
	return localpipeline.Start(ctx, localpipeline.Options{
		DynamoDBEndpoint:  ph.getenv(testenv.DynamoDBEndpointEnv),
		MotoEndpoint:      ph.getenv(testenv.MotoEndpointEnv),
		Bootstraps:        ph.boot,
		SenderInstances:   2,
		ProviderTimeout:   5 * time.Second,
		ClaimTimeout:      15 * time.Second,
		SenderTimeout:     15 * time.Second,
		VisibilityTimeout: 20 * time.Second,
		Env:               env,
		Progress:          ph.stdout,
	})
}

// stop closes p, reporting a failure to stop.
func (ph phases) stop(p *localpipeline.Pipeline) {
	if err := p.Close(); err != nil {
		fmt.Fprintf(ph.stderr, "demo: stop: %v\n", err)
	}
}

// native sends n messages with SMS through Amazon SNS and email through
// Amazon SES (moto_server) and checks moto's record: each exactly once.
func (ph phases) native(ctx context.Context, n int) (localpipeline.NativeReport, error) {
	env, err := localpipeline.NativeEnv(ctx, ph.getenv(testenv.MotoEndpointEnv), "notify@sendonce.example")
	if err != nil {
		fmt.Fprintf(ph.stderr, "demo: %v\n", err)
		return localpipeline.NativeReport{}, err
	}
	fmt.Fprintln(ph.stdout, "\n==> SMS through SNS and email through SES (moto_server)")
	p, err := ph.start(ctx, env)
	if err != nil {
		fmt.Fprintf(ph.stderr, "demo: %v\n", err)
		return localpipeline.NativeReport{}, err
	}
	defer ph.stop(p)
	rep, err := localpipeline.RunNative(ctx, p, n, 2, ph.timeout)
	if err != nil {
		fmt.Fprintf(ph.stderr, "demo: %v\n", err)
	}
	return rep, err
}

// smtp sends n emails through the SMTP adapter to a real SMTP server
// (emersion/go-smtp) and checks what it received: each message exactly
// once, with the right subject and parts.
func (ph phases) smtp(ctx context.Context, n int) (localpipeline.SMTPReport, error) {
	srv, err := smtptest.Start(smtptest.Options{})
	if err != nil {
		fmt.Fprintf(ph.stderr, "demo: %v\n", err)
		return localpipeline.SMTPReport{}, err
	}
	defer func() {
		if err := srv.Close(); err != nil {
			fmt.Fprintf(ph.stderr, "demo: %v\n", err)
		}
	}()
	fmt.Fprintln(ph.stdout, "\n==> email through SMTP (a local go-smtp server)")
	p, err := ph.start(ctx, localpipeline.SMTPEnv(srv, "notify@sendonce.example"))
	if err != nil {
		fmt.Fprintf(ph.stderr, "demo: %v\n", err)
		return localpipeline.SMTPReport{}, err
	}
	defer ph.stop(p)
	rep, err := localpipeline.RunSMTP(ctx, p, srv, n, 2, ph.timeout)
	if err != nil {
		fmt.Fprintf(ph.stderr, "demo: %v\n", err)
	}
	return rep, err
}
