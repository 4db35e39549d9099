// Command sendonce is the operator CLI of sendonce (docs/cli.md).
//
//	sendonce create-tables [--table NAME] [--wait DURATION]
//	sendonce key < request.json
//	sendonce inspect KEY
//	sendonce find --tenant T --event E [--recipient R --channel C --template N]
//	sendonce list --state pending|uncertain|abandoned|failed [--older-than D] [--tenant T] [--channel C] [--limit N]
//	sendonce resolve KEY --as sent|failed|abandoned --reason TEXT [--provider-id ID] [--force]
//	sendonce dlq list [--limit N]
//	sendonce dlq redrive [--dry-run] [--reason-match RE]
//	sendonce apikey create --tenant TENANT
//	sendonce apikey list --tenant TENANT
//	sendonce apikey revoke KEY-ID
//	sendonce help [COMMAND]
//	sendonce --version
//
// Every command takes --region, --profile and --endpoint-url as the AWS CLI
// does (otherwise the SDK's standard variables and files apply), --output
// json|table (table by default on a terminal, else json) and, where it
// reads the ledger, --table (default $SENDONCE_TABLE). Results go to
// stdout alone, so they can be piped; messages go to stderr.
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
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
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
	// terminal is true when stdout is a terminal: --output defaults to
	// table there.
	terminal bool
	// loadAWS loads the AWS configuration with the flags' options; nil
	// is config.LoadDefaultConfig. Tests load it from their own variables.
	loadAWS func(context.Context, ...func(*config.LoadOptions) error) (aws.Config, error)
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
type helpRequest struct {
	cmd   *command
	group string // "apikey": the overview of that group's commands
}

func (helpRequest) Error() string { return "help requested" }

// commands is the command table, in the order the overview lists it. A
// name of two words ("apikey create") is a subcommand of a group; the
// group needs no entry of its own. Add a command by adding its entry here.
func commands() []*command {
	return []*command{
		createTablesCmd, keyCmd, inspectCmd, findCmd, listCmd, resolveCmd,
		dlqListCmd, dlqRedriveCmd,
		apikeyCreateCmd, apikeyListCmd, apikeyRevokeCmd,
		templateCmd,
	}
}

// lookup finds the command args start with (a one- or two-word name) and
// returns it with the remaining arguments. A group word alone ("apikey")
// asks for one of its subcommands; "apikey -h" is a help request for the
// group.
func lookup(args []string) (*command, []string, error) {
	if len(args) == 0 {
		return nil, nil, &usageError{msg: "no command given"}
	}
	var sub []string
	for _, c := range commands() {
		switch group, name, two := strings.Cut(c.name, " "); {
		case !two && c.name == args[0]:
			return c, args[1:], nil
		case two && group == args[0]:
			if len(args) > 1 && args[1] == name {
				return c, args[2:], nil
			}
			sub = append(sub, name)
		}
	}
	if len(sub) == 0 {
		return nil, nil, &usageError{msg: fmt.Sprintf("unknown command %q", args[0])}
	}
	want := strings.Join(sub[:len(sub)-1], ", ") + " or " + sub[len(sub)-1]
	if len(args) < 2 {
		return nil, nil, &usageError{msg: fmt.Sprintf("%s needs a subcommand: %s", args[0], want)}
	}
	switch args[1] {
	case "-h", "-help", "--help", "help":
		return nil, nil, helpRequest{group: args[0]}
	}
	return nil, nil, &usageError{msg: fmt.Sprintf("unknown %s subcommand %q (want %s)", args[0], args[1], want)}
}

// run runs the command args name (args excludes the program name) and
// returns the exit status. getenv stands for os.Getenv.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	if getenv == nil {
		getenv = os.Getenv
	}
	return runEnv(ctx, env{stdin: stdin, stdout: stdout, stderr: stderr, getenv: getenv, terminal: isTerminal(stdout)}, args)
}

// runEnv is run with e.
func runEnv(ctx context.Context, e env, args []string) int {
	stdout, stderr := e.stdout, e.stderr
	err := dispatch(ctx, e, args)
	var (
		ue *usageError
		hr helpRequest
	)
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &hr):
		if hr.group != "" {
			printGroup(stdout, hr.group)
		} else {
			printUsage(stdout, hr.cmd)
		}
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
		case "--version", "-version", "version":
			_, err := fmt.Fprintln(e.stdout, version())
			return err
		case "help":
			if len(args) == 1 {
				return helpRequest{}
			}
			c, rest, err := lookup(args[1:])
			var hr helpRequest
			if errors.As(err, &hr) || (err != nil && len(args) == 2 && isGroup(args[1])) {
				return helpRequest{group: args[1]}
			}
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

// parseOne parses args with fs and returns the single positional argument
// (what) the command takes; see parse and onePositional.
func parseOne(c *command, fs *flag.FlagSet, args []string, what string) (string, error) {
	pos, err := parse(c, fs, args)
	if err != nil {
		return "", err
	}
	return onePositional(c, pos, what)
}

// noArgs parses args with fs for a command that takes no positional
// arguments.
func noArgs(c *command, fs *flag.FlagSet, args []string) error {
	pos, err := parse(c, fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return &usageError{cmd: c, msg: "unexpected arguments: " + strings.Join(pos, " ")}
	}
	return nil
}

// tableFlags returns c's FlagSet with the common flags and --table, the
// start of every command on the table.
func tableFlags(c *command, e env) (*flag.FlagSet, *common, *string) {
	fs := newFlags(c)
	return fs, commonFlags(fs), tableFlag(fs, e)
}

// needTable returns a usage error when no table was named.
func needTable(c *command, table string) error {
	if table == "" {
		return &usageError{cmd: c, msg: "no table: pass --table NAME or set SENDONCE_TABLE"}
	}
	return nil
}

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
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

  sendonce --version
      print the version

Every command takes --region, --profile and --endpoint-url (as the AWS CLI
does; otherwise AWS_REGION, AWS_PROFILE, AWS_ENDPOINT_URL_DYNAMODB, ... and
the AWS config files apply) and --output json|table (table on a terminal,
else json). The table comes from --table or SENDONCE_TABLE, the queues from
--queue-url / --dlq-url or SENDONCE_QUEUE_URL / SENDONCE_DLQ_URL.

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
	fmt.Fprintf(w, "Usage:\n  sendonce %s\n\n%s\n%s", c.synopsis, strings.TrimSpace(c.help), commonHelp)
}

// commonHelp closes every command's help.
const commonHelp = `
Common flags:
  --output json|table   json: one object per line for lists; table: aligned
                        columns (default: table on a terminal, else json)
  --region REGION       the AWS region (default: AWS_REGION or the profile's)
  --profile NAME        a profile of the AWS config files (default: AWS_PROFILE)
  --endpoint-url URL    send every AWS call to URL (e.g. DynamoDB Local)
`

// isGroup reports whether word names a group of subcommands.
func isGroup(word string) bool {
	for _, c := range commands() {
		if g, _, ok := strings.Cut(c.name, " "); ok && g == word {
			return true
		}
	}
	return false
}

// printGroup prints the usage of group's subcommands.
func printGroup(w io.Writer, group string) {
	fmt.Fprintf(w, "Usage:\n")
	for _, c := range commands() {
		if g, _, ok := strings.Cut(c.name, " "); ok && g == group {
			fmt.Fprintf(w, "  sendonce %s\n      %s\n", c.synopsis, c.summary)
		}
	}
	fmt.Fprintf(w, "\nRun \"sendonce help %s SUBCOMMAND\" for a subcommand's details.\n", group)
}

// version is this binary's version from its build information: the module
// version (set by go install) and the VCS revision and time (set by go
// build in a checkout).
func version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "sendonce (unknown version)"
	}
	v := info.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, at, dirty string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	out := "sendonce " + v
	if rev != "" {
		out += " " + rev[:min(12, len(rev))] + dirty
	}
	if at != "" {
		out += " " + at
	}
	return out + " " + info.GoVersion
}
