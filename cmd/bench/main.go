// Command bench measures what only a whole run can: the peer section
// (the same workload through sendonce's sender and through Powertools for
// AWS Lambda (TypeScript) idempotency, bench/peer.mjs, on one DynamoDB
// Local: interleaved throughput rounds with busy cores flagged, latency,
// CPU per call, DynamoDB calls, real-DynamoDB write units and duplicate
// sends), and cold and warm invokes of every bootstrap under the Lambda
// Runtime Interface Emulator with binary sizes and peak RSS. Everything
// else is a plain Go test or benchmark, which `make bench` runs after it:
// the DynamoDB calls and write units of the other paths are asserted by
// TestPathCosts, a batch over provider latency is BenchmarkHandleSQSBatch.
//
// It prints its figures in the Go benchmark format that benchstat reads
// (a row measured over rounds gives one line per round) and writes them to
// bench/report.bench.txt; -markdown also writes them as the table of
// docs/benchmarks.md, with how each was measured. `make bench` installs
// bench/'s Node package, starts the emulators and runs it; run alone it
// needs SENDONCE_TEST_DYNAMODB_ENDPOINT, SENDONCE_TEST_MOTO_ENDPOINT and
// SENDONCE_TEST_RIE, and `npm ci --prefix bench` for the peer section.
//
//	go run ./cmd/bench [-gobench bench/report.bench.txt] [-markdown FILE] [-only peer,lambda]
//	benchstat bench/report.bench.txt
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
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
var sections = []string{"peer", "lambda"}

func main() {
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
	mdOut := fs.String("markdown", "", "also write the Markdown table to this file")
	only := fs.String("only", "", "comma-separated sections to run (default all: "+strings.Join(sections, ",")+")")
	warm := fs.Int("warm", 10, "warm invokes per function under the RIE")
	goBench := fs.String("gobench", "bench/report.bench.txt", "where to write the report in Go benchmark format (for benchstat)")
	nodeDir := fs.String("node-dir", "bench", "the Node package of the peer section (bench/peer.mjs, installed with npm ci)")
	peerRounds := fs.Int("peer-rounds", 7, "rounds of the peer section's throughput comparison")
	peerRound := fs.Duration("peer-round", 2*time.Second, "length of one leg of a peer round")
	peerWarmup := fs.Duration("peer-warmup", 2*time.Second, "warm-up of each leg of the peer section")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	selected := map[string]bool{}
	for _, s := range strings.Split(*only, ",") {
		if s = strings.TrimSpace(s); s != "" {
			selected[s] = true
		}
	}
	for s := range selected {
		if !slices.Contains(sections, s) {
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
		"peer": func() error {
			return measurePeer(ctx, env.dynamo, peerConfig{
				NodeDir: *nodeDir, InFlight: 16, Fresh: 200, Concurrent: 200, PerKey: 8, Lost: 100, Large: 50,
				Rounds: *peerRounds, Round: *peerRound, Warmup: *peerWarmup,
			}, rep)
		},
		"lambda": func() error { return measureLambdas(ctx, env, *warm, rep) },
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

	if err := rep.WriteGoBench(stdout); err != nil {
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return 1
	}
	for path, write := range map[string]func(io.Writer) error{*goBench: rep.WriteGoBench, *mdOut: rep.WriteMarkdown} {
		if path == "" {
			continue
		}
		if err := writeFile(path, write); err != nil {
			fmt.Fprintf(stderr, "bench: %v\n", err)
			return 1
		}
		fmt.Fprintf(stderr, "bench: wrote %s\n", path)
	}
	if len(failed) > 0 {
		fmt.Fprintf(stderr, "bench: failed sections: %s\n", strings.Join(failed, ", "))
		return 1
	}
	return 0
}

// writeFile writes what write writes to path, creating its directory.
func writeFile(path string, write func(io.Writer) error) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	err = write(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
