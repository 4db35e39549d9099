// Command bench measures sendonce where it matters and reports figures
// that hold on a small, noisy machine: DynamoDB calls and capacity units
// per message on each path, the sender's throughput as a fraction of raw
// conditional writes on the same DynamoDB Local, the peer section (the
// same workload through sendonce's sender and through Powertools for AWS
// Lambda (TypeScript) idempotency, bench/peer.mjs, in one run: throughput,
// latency, calls, real-DynamoDB write units and duplicate sends), a
// batch's wall time over one provider call's latency, cold and warm
// invokes of every bootstrap under the Lambda Runtime Interface Emulator
// with binary sizes and peak RSS, and Go micro-benchmarks.
//
// It prints a table and writes the report as JSON (bench/report.json by
// default; docs/benchmarks.md explains every row) and in the Go benchmark
// format that benchstat reads (bench/report.bench.txt). `make bench`
// installs bench/'s Node package, starts the emulators and runs it; run
// alone it needs SENDONCE_TEST_DYNAMODB_ENDPOINT, SENDONCE_TEST_MOTO_ENDPOINT
// and SENDONCE_TEST_RIE, and `npm ci --prefix bench` for the peer section.
//
//	go run ./cmd/bench [-out bench/report.json] [-gobench bench/report.bench.txt] [-markdown FILE] [-only dynamodb,throughput,peer,batch,lambda,micro]
//	go run ./cmd/bench -render bench/latest.json   # Markdown table of a saved report
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/benchreport"
	"github.com/sendonce/sendonce/internal/rie"
	"github.com/sendonce/sendonce/internal/testenv"
)

// endpoints are the local emulators.
type endpoints struct {
	dynamo, moto, rie string
}

// sections, in the order they run.
var sections = []string{"dynamodb", "throughput", "peer", "batch", "lambda", "micro"}

func main() {
	testing.Init() // testing.Benchmark reads the test flags' defaults
	os.Exit(run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

// loadEndpoints reads the emulator endpoints, or returns one error line
// naming every variable that is missing.
func loadEndpoints(getenv func(string) string) (endpoints, error) {
	e := endpoints{dynamo: getenv(testenv.DynamoDBEndpointEnv), moto: getenv(testenv.MotoEndpointEnv), rie: getenv(rie.BinaryEnv)}
	var missing []string
	for _, v := range []struct{ name, val string }{
		{testenv.DynamoDBEndpointEnv, e.dynamo}, {testenv.MotoEndpointEnv, e.moto}, {rie.BinaryEnv, e.rie},
	} {
		if strings.TrimSpace(v.val) == "" {
			missing = append(missing, v.name)
		}
	}
	if len(missing) > 0 {
		return endpoints{}, fmt.Errorf("%s not set: run `make bench`, which starts DynamoDB Local and moto_server and installs the RIE (or `make services-start rie` and `source .local/env`)", strings.Join(missing, ", "))
	}
	return e, nil
}

func run(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "bench/report.json", "where to write the JSON report")
	mdOut := fs.String("markdown", "", "also write the Markdown table to this file")
	only := fs.String("only", "", "comma-separated sections to run (default all: "+strings.Join(sections, ",")+")")
	workers := fs.Int("workers", 16, "goroutines of the throughput comparison")
	rounds := fs.Int("rounds", 7, "rounds of the throughput comparison")
	round := fs.Duration("round", 2*time.Second, "length of one throughput round (each side)")
	warmup := fs.Duration("warmup", 3*time.Second, "warm-up of each side of the throughput comparison")
	latency := fs.Duration("latency", 200*time.Millisecond, "provider latency of the batch measurement")
	warm := fs.Int("warm", 10, "warm invokes per function under the RIE")
	goBench := fs.String("gobench", "bench/report.bench.txt", "where to write the report in Go benchmark format (for benchstat)")
	nodeDir := fs.String("node-dir", "bench", "the Node package of the peer section (bench/peer.mjs, installed with npm ci)")
	peerRounds := fs.Int("peer-rounds", 7, "rounds of the peer section's throughput comparison")
	peerRound := fs.Duration("peer-round", 2*time.Second, "length of one leg of a peer round")
	peerWarmup := fs.Duration("peer-warmup", 2*time.Second, "warm-up of each leg of the peer section")
	render := fs.String("render", "", "print the Markdown table of this JSON report and exit (no emulators needed)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *render != "" {
		r, err := benchreport.ReadFile(*render)
		if err == nil {
			err = r.WriteMarkdown(stdout)
		}
		if err != nil {
			fmt.Fprintf(stderr, "bench: %v\n", err)
			return 1
		}
		return 0
	}
	selected := map[string]bool{}
	for _, s := range strings.Split(*only, ",") {
		if s = strings.TrimSpace(s); s != "" {
			selected[s] = true
		}
	}
	for s := range selected {
		if !contains(sections, s) {
			fmt.Fprintf(stderr, "bench: unknown section %q (want %s)\n", s, strings.Join(sections, ", "))
			return 2
		}
	}
	env, err := loadEndpoints(getenv)
	if err != nil {
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return 1
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep := &benchreport.Report{Machine: benchreport.CurrentMachine(), Started: time.Now().UTC()}
	steps := map[string]func() error{
		"dynamodb": func() error { return measurePaths(ctx, env.dynamo, rep) },
		"throughput": func() error {
			return measureThroughput(ctx, env.dynamo, throughputConfig{Workers: *workers, Warmup: *warmup, Round: *round, Rounds: *rounds}, rep)
		},
		"peer": func() error {
			return measurePeer(ctx, env.dynamo, peerConfig{
				NodeDir: *nodeDir, InFlight: 16, Fresh: 200, Concurrent: 200, PerKey: 8, Lost: 100, Large: 50,
				Rounds: *peerRounds, Round: *peerRound, Warmup: *peerWarmup,
			}, rep)
		},
		"batch":  func() error { return measureBatch(ctx, env.dynamo, *latency, 3, rep) },
		"lambda": func() error { return measureLambdas(ctx, env, *warm, rep) },
		"micro":  func() error { return measureMicro(ctx, rep) },
	}
	var failed []string
	for _, name := range sections {
		if len(selected) > 0 && !selected[name] {
			continue
		}
		t0 := time.Now()
		fmt.Fprintf(stderr, "bench: %s ...\n", name)
		if err := steps[name](); err != nil {
			failed = append(failed, name)
			fmt.Fprintf(stderr, "bench: %s: FAILED: %v\n", name, err)
			rep.Note("Section %s failed: %v", name, err)
			if errors.Is(err, context.Canceled) {
				break
			}
			continue
		}
		fmt.Fprintf(stderr, "bench: %s done in %s\n", name, time.Since(t0).Round(100*time.Millisecond))
	}
	rep.Seconds = time.Since(rep.Started).Round(time.Second).Seconds()

	fmt.Fprintln(stdout)
	_ = rep.WriteText(stdout)
	for _, n := range rep.Notes {
		fmt.Fprintf(stdout, "note: %s\n", n)
	}
	if err := rep.WriteFile(*out); err != nil {
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "report written to %s\n", *out)
	if *goBench != "" {
		if err := writeGoBench(rep, *goBench); err != nil {
			fmt.Fprintf(stderr, "bench: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "benchstat input written to %s\n", *goBench)
	}
	if *mdOut != "" {
		f, err := os.Create(*mdOut)
		if err == nil {
			err = rep.WriteMarkdown(f)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			fmt.Fprintf(stderr, "bench: write %s: %v\n", *mdOut, err)
			return 1
		}
	}
	if len(failed) > 0 {
		fmt.Fprintf(stderr, "bench: failed sections: %s\n", strings.Join(failed, ", "))
		return 1
	}
	return 0
}

func contains(xs []string, x string) bool {
	for _, s := range xs {
		if s == x {
			return true
		}
	}
	return false
}

// writeGoBench writes rep in Go benchmark format to path.
func writeGoBench(rep *benchreport.Report, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	err = rep.WriteGoBench(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
