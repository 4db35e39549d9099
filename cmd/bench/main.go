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
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sendonce/sendonce/internal/benchreport"
	"github.com/sendonce/sendonce/internal/cmdmain"
	"github.com/sendonce/sendonce/internal/rie"
	"github.com/sendonce/sendonce/internal/testenv"
)

// endpoints are the local emulators.
type endpoints struct {
	dynamo, moto, rie string
}

// sections, in the order they run.
var sections = []string{"peer", "lambda"}

func main() { cmdmain.Main(run) }

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

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := cmdmain.FlagSet("bench", stderr)
	mdOut := fs.String("markdown", "", "also write the Markdown table to this file")
	only := fs.String("only", strings.Join(sections, ","), "comma-separated sections to run")
	goBench := fs.String("gobench", "bench/report.bench.txt", "where to write the report in Go benchmark format (for benchstat)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	selected := strings.Split(*only, ",")
	for _, s := range selected {
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

	rep := &benchreport.Report{Machine: benchreport.CurrentMachine(), Started: time.Now().UTC()}
	steps := map[string]func() error{
		"peer": func() error {
			return measurePeer(ctx, env.dynamo, peerConfig{
				NodeDir: "bench", InFlight: 16, Fresh: 200, Concurrent: 200, PerKey: 8, Lost: 100, Large: 50,
				Rounds: 7, Round: 2 * time.Second, Warmup: 2 * time.Second,
			}, rep)
		},
		"lambda": func() error { return measureLambdas(ctx, env, 10, rep) },
	}
	var failed []string
	for _, name := range sections {
		if !slices.Contains(selected, name) {
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

	// Writes to a bytes.Buffer cannot fail.
	var gob, md bytes.Buffer
	_ = rep.WriteGoBench(&gob)
	_ = rep.WriteMarkdown(&md)
	_, _ = stdout.Write(gob.Bytes())
	for path, b := range map[string][]byte{*goBench: gob.Bytes(), *mdOut: md.Bytes()} {
		if path == "" {
			continue
		}
		err := os.MkdirAll(filepath.Dir(path), 0o755)
		if err == nil {
			err = os.WriteFile(path, b, 0o644)
		}
		if err != nil {
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
