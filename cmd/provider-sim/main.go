// Command provider-sim serves the generic HTTP provider simulator
// (internal/provider/simulator) for the demo and the chaos harness.
//
//	provider-sim -token T [-addr 127.0.0.1:8089] [-callback-secret S] ...
//
// When it is listening it prints its base URL alone on stdout
// ("http://127.0.0.1:8089"); logs go to stderr as JSON. It binds the
// loopback address unless -addr names another. SIGINT or SIGTERM stops it.
// The token and callback secret may come from PROVIDER_SIM_TOKEN and
// PROVIDER_SIM_CALLBACK_SECRET instead of flags, to keep them out of ps.
// Exit status: 0 after a clean stop, 1 when it cannot listen, 2 on a usage
// error.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sendonce/sendonce/internal/cmdmain"
	"github.com/sendonce/sendonce/internal/provider/simulator"
)

func main() { cmdmain.Main(run) }

// run parses args, serves until ctx ends, and returns the exit status.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := cmdmain.FlagSet("provider-sim", stderr)
	var (
		addr        = fs.String("addr", "127.0.0.1:8089", "listen address (host:port); port 0 picks a free one")
		token       = fs.String("token", getenv("PROVIDER_SIM_TOKEN"), "bearer token clients must send (default $PROVIDER_SIM_TOKEN)")
		cbSecret    = fs.String("callback-secret", getenv("PROVIDER_SIM_CALLBACK_SECRET"), "HMAC secret signing callbacks; empty disables callbacks (default $PROVIDER_SIM_CALLBACK_SECRET)")
		latency     = fs.Duration("latency", 0, "fixed latency of every /messages request")
		jitter      = fs.Duration("jitter", 0, "random extra latency, up to this")
		seed        = fs.Uint64("seed", 1, "seed of the RNG (jitter, random faults)")
		idempotency = fs.Bool("idempotency", true, "honour Idempotency-Key (false: every POST delivers)")
		lookup      = fs.Bool("lookup", true, "answer lookups by reference (false: 404)")
		cbDelay     = fs.Duration("callback-delay", 0, "delay before each callback")
		cbDups      = fs.Int("callback-duplicates", 0, "extra copies of each callback")
		cbReorder   = fs.Bool("callback-reorder", false, "post the final status before \"sent\"")
		cbWorkers   = fs.Int("callback-workers", 4, "callback worker goroutines")
		statusRate  = fs.Float64("fault-status-rate", 0, "probability a send is answered an error status")
		statuses    = fs.String("fault-statuses", "500,503,429", "comma-separated statuses of -fault-status-rate")
		tBefore     = fs.Float64("fault-timeout-before-rate", 0, "probability a send hangs before it is accepted")
		tAfter      = fs.Float64("fault-timeout-after-rate", 0, "probability a send is accepted, then hangs")
		rBefore     = fs.Float64("fault-reset-before-rate", 0, "probability a send's connection is reset before it is accepted")
		rAfter      = fs.Float64("fault-reset-after-rate", 0, "probability a send is accepted, then its connection reset")
		undeliv     = fs.Float64("fault-undeliverable-rate", 0, "probability an accepted send fails delivery")
		hang        = fs.Duration("fault-hang", 0, "bound of the random timeout faults' hang (0: until the client gives up)")
		verbose     = fs.Bool("v", false, "log every request at debug level")
	)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	usage := func(msg string) int {
		fmt.Fprintln(stderr, "provider-sim: "+msg)
		return 2
	}
	if fs.NArg() > 0 {
		return usage("unexpected arguments: " + strings.Join(fs.Args(), " "))
	}
	if *token == "" {
		return usage("-token (or PROVIDER_SIM_TOKEN) is required")
	}
	if *latency < 0 || *jitter < 0 || *cbDelay < 0 || *hang < 0 || *cbDups < 0 {
		return usage("durations and -callback-duplicates must not be negative")
	}
	random := simulator.RandomFaults{
		StatusRate: *statusRate, TimeoutBeforeRate: *tBefore, TimeoutAfterRate: *tAfter,
		ResetBeforeRate: *rBefore, ResetAfterRate: *rAfter, UndeliverableRate: *undeliv, Hang: *hang,
	}
	for s := range strings.SplitSeq(*statuses, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return usage("-fault-statuses: " + strconv.Quote(s) + " is not a status")
		}
		random.Statuses = append(random.Statuses, n)
	}

	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))
	sim := simulator.New(simulator.Options{
		Token:               *token,
		CallbackSecret:      []byte(*cbSecret),
		IdempotencyDisabled: !*idempotency,
		LookupDisabled:      !*lookup,
		Latency:             *latency,
		Jitter:              *jitter,
		Seed:                *seed,
		Callbacks:           simulator.CallbackOptions{Delay: *cbDelay, Duplicates: *cbDups, Reorder: *cbReorder, Workers: *cbWorkers},
		Logger:              log,
	})
	defer sim.Close()
	if err := sim.SetRandom(random); err != nil {
		return usage(err.Error())
	}

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(stderr, "provider-sim: listen %s: %v\n", *addr, err)
		return 1
	}
	srv := &http.Server{Handler: sim.Handler(), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	fmt.Fprintf(stdout, "http://%s\n", ln.Addr())
	log.Info("provider simulator listening", "addr", ln.Addr().String(),
		"idempotency", *idempotency, "lookup", *lookup, "callbacks", *cbSecret != "", "seed", *seed)

	select {
	case <-ctx.Done():
	case err := <-errc:
		fmt.Fprintf(stderr, "provider-sim: serve: %v\n", err)
		return 1
	}
	sim.Close() // releases hung requests so Shutdown can finish
	shutCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutCtx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		fmt.Fprintf(stderr, "provider-sim: shutdown: %v\n", err)
	}
	log.Info("provider simulator stopped", "stats", sim.Stats())
	return 0
}
