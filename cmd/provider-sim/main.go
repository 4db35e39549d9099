// Command provider-sim serves the generic HTTP provider simulator
// (internal/provider/simulator) as a stand-in gateway for local runs, such
// as the example Lambda provider's (docs/lambda-provider.md).
//
//	provider-sim -token T [-addr 127.0.0.1:8089] [-callback-secret S]
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
		addr     = fs.String("addr", "127.0.0.1:8089", "listen address (host:port); port 0 picks a free one")
		token    = fs.String("token", getenv("PROVIDER_SIM_TOKEN"), "bearer token clients must send (default $PROVIDER_SIM_TOKEN)")
		cbSecret = fs.String("callback-secret", getenv("PROVIDER_SIM_CALLBACK_SECRET"), "HMAC secret signing callbacks; empty disables callbacks (default $PROVIDER_SIM_CALLBACK_SECRET)")
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

	log := slog.New(slog.NewJSONHandler(stderr, nil))
	sim := simulator.New(simulator.Options{Token: *token, CallbackSecret: []byte(*cbSecret)})
	defer sim.Close()

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(stderr, "provider-sim: listen %s: %v\n", *addr, err)
		return 1
	}
	srv := &http.Server{Handler: sim.Handler(), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	fmt.Fprintf(stdout, "http://%s\n", ln.Addr())
	log.Info("provider simulator listening", "addr", ln.Addr().String(), "callbacks", *cbSecret != "")

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
