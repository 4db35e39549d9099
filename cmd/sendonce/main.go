// Command sendonce is the operator CLI of sendonce (docs/cli.md).
//
//	sendonce create-tables [--table NAME] [--wait DURATION]
//	sendonce key < request.json
//	sendonce inspect [--table NAME] KEY
//	sendonce apikey create --tenant TENANT [--table NAME]
//	sendonce apikey revoke [--table NAME] KEY-ID
//	sendonce help [COMMAND]
//
// AWS endpoints, region and credentials come from the SDK's standard
// variables (AWS_REGION, AWS_ENDPOINT_URL_DYNAMODB, AWS_PROFILE, ...); the
// table from --table or SENDONCE_TABLE. Results go to stdout alone, so
// they can be piped; messages go to stderr.
//
// Exit status: 0 on success, 1 on a user error (an invalid request, an
// unknown key, a table with a different schema, an AWS error) with a
// one-line message on stderr, 2 on a usage error (unknown command, missing
// argument, bad flag) with the usage on stderr.
//
// See docs/cli.md.
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
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}

// Exit statuses.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

// env is what every command gets: its streams and the environment.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
}

// command is one (sub)command: its name as typed, a one-line summary, its
// synopsis and help, and what it does with its arguments.
type command struct {
	name     string
	synopsis string
	summary  string
	help     string
	run      func(ctx context.Context, c *command, e env, args []string) error
}

// usageError is a usage mistake: exit status 2, with the command's usage.
type usageError struct {
	cmd *command // nil: the top-level usage
	msg string
}

func (e *usageError) Error() string { return e.msg }

// helpRequest is returned when -h/--help was given: the usage goes to
// stdout and the exit status is 0.
type helpRequest struct{ cmd *command }

func (helpRequest) Error() string { return "help requested" }

func commands() []*command {
	return []*command{createTablesCmd, keyCmd, inspectCmd, apikeyCreateCmd, apikeyRevokeCmd, templateCmd}
}

// lookup finds the command args start with ("apikey create" is two words)
// and returns it with the remaining arguments.
func lookup(args []string) (*command, []string, error) {
	if len(args) == 0 {
		return nil, nil, &usageError{msg: "no command given"}
	}
	if args[0] == "apikey" {
		if len(args) < 2 {
			return nil, nil, &usageError{msg: "apikey needs a subcommand: create or revoke"}
		}
		switch args[1] {
		case "create":
			return apikeyCreateCmd, args[2:], nil
		case "revoke":
			return apikeyRevokeCmd, args[2:], nil
		case "-h", "-help", "--help", "help":
			return nil, nil, helpRequest{}
		}
		return nil, nil, &usageError{msg: fmt.Sprintf("unknown apikey subcommand %q (want create or revoke)", args[1])}
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c, args[1:], nil
		}
	}
	return nil, nil, &usageError{msg: fmt.Sprintf("unknown command %q", args[0])}
}

// run runs the command args name (args excludes the program name) and
// returns the exit status. getenv stands for os.Getenv, so tests can point
// the AWS SDK at local emulators without touching the process environment.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	if getenv == nil {
		getenv = os.Getenv
	}
	e := env{stdin: stdin, stdout: stdout, stderr: stderr, getenv: getenv}
	err := dispatch(ctx, e, args)
	var (
		ue *usageError
		hr helpRequest
	)
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &hr):
		printUsage(stdout, hr.cmd)
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "sendonce: %s\n\n", oneLine(ue.msg))
		printUsage(stderr, ue.cmd)
		return exitUsage
	default:
		fmt.Fprintf(stderr, "sendonce: %s\n", oneLine(err.Error()))
		return exitError
	}
}

func dispatch(ctx context.Context, e env, args []string) error {
	if len(args) > 0 {
		switch args[0] {
		case "-h", "-help", "--help":
			return helpRequest{}
		case "help":
			if len(args) == 1 {
				return helpRequest{}
			}
			c, rest, err := lookup(args[1:])
			if err != nil {
				return err
			}
			if len(rest) > 0 {
				return &usageError{cmd: c, msg: "help takes one command"}
			}
			return helpRequest{cmd: c}
		}
	}
	c, rest, err := lookup(args)
	if err != nil {
		return err
	}
	return c.run(ctx, c, e, rest)
}

// newFlags returns a FlagSet for c that prints nothing itself: parse
// reports its errors as usage errors and -h as a help request.
func newFlags(c *command) *flag.FlagSet {
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parse parses args with fs, allowing flags after positional arguments
// ("inspect KEY --table T"), and returns the positional arguments.
// Everything after "--" is positional.
func parse(c *command, fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, helpRequest{cmd: c}
			}
			return nil, &usageError{cmd: c, msg: err.Error()}
		}
		rest := fs.Args()
		if consumed := args[:len(args)-len(rest)]; len(consumed) > 0 && consumed[len(consumed)-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// tableFlag adds --table to fs, defaulting to SENDONCE_TABLE.
func tableFlag(fs *flag.FlagSet, e env) *string {
	return fs.String("table", strings.TrimSpace(e.getenv("SENDONCE_TABLE")), "the sendonce table (default $SENDONCE_TABLE)")
}

// needTable returns a usage error when no table was named.
// onePositional returns the single positional argument a command takes,
// or a usage error naming it (what) when there is none or more than one.
func onePositional(c *command, pos []string, what string) (string, error) {
	switch {
	case len(pos) == 0:
		return "", &usageError{cmd: c, msg: c.name + " needs a " + what}
	case len(pos) > 1:
		return "", &usageError{cmd: c, msg: c.name + " takes one " + what + ", got: " + strings.Join(pos, " ")}
	}
	return pos[0], nil
}

func needTable(c *command, table string) error {
	if table == "" {
		return &usageError{cmd: c, msg: "no table: pass --table NAME or set SENDONCE_TABLE"}
	}
	return nil
}

// oneLine keeps a message on one line, as the exit-status contract says.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

const overview = `sendonce: operator CLI of sendonce, effectively exactly-once notifications on AWS.

Usage:
  sendonce COMMAND [ARGUMENTS]

Commands:
%s  sendonce help [COMMAND]
      show this help, or a command's

AWS region, credentials and endpoints come from the SDK's standard variables
(AWS_REGION, AWS_PROFILE, AWS_ENDPOINT_URL_DYNAMODB, ...). The table comes from
--table or SENDONCE_TABLE.

Exit status: 0 on success; 1 on an error, with a one-line message on stderr;
2 on a usage error, with this usage on stderr.

Run "sendonce help COMMAND" for a command's details. See docs/cli.md.
`

func printUsage(w io.Writer, c *command) {
	if c == nil {
		var b strings.Builder
		for _, c := range commands() {
			fmt.Fprintf(&b, "  sendonce %s\n      %s\n", c.synopsis, c.summary)
		}
		fmt.Fprintf(w, overview, b.String())
		return
	}
	fmt.Fprintf(w, "Usage:\n  sendonce %s\n\n%s\n", c.synopsis, strings.TrimSpace(c.help))
}
