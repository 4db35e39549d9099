// Package cmdmain is the start-up the harness commands (cmd/demo,
// cmd/chaos, cmd/provider-sim) share. Each keeps its body in a Run
// function that takes its arguments, environment and output streams and
// returns the exit status, so its tests drive it without a process; its
// main is one call to Main.
package cmdmain

import (
	"context"
	"flag"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Run is a command's body: it parses args, reads its environment through
// getenv, writes to stdout and stderr, stops early when ctx ends, and
// returns the exit status (by convention 0 success, 1 failure, 2 usage).
type Run func(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int

// Main calls run with the process's arguments, environment and standard
// streams, under a context that ends on SIGINT or SIGTERM, and exits with
// the status it returns.
func Main(run Run) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// FlagSet returns a flag set named name that returns parse errors instead
// of exiting and writes them, and -h's usage, to stderr.
func FlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}
