// Command sendonce is the operator CLI of sendonce (docs/cli.md).
//
//	sendonce create-tables [--table NAME] [--event-index] [--wait DURATION]
//	sendonce key < request.json
//	sendonce inspect KEY
//	sendonce find --tenant T --event E [--recipient R --channel C --template N]
//	sendonce list --state pending|uncertain|abandoned|failed [--older-than D] [--tenant T] [--channel C] [--limit N]
//	sendonce resolve KEY --as sent|failed|abandoned --reason TEXT [--provider-id ID] [--force]
//	sendonce dlq list [--limit N]
//	sendonce dlq redrive [--dry-run] [--reason-match RE]
//	sendonce apikey create|list|revoke ...
//	sendonce template put|get|list|render|import-examples ...
//	sendonce help [COMMAND]
//	sendonce --version
//
// The global flags go before or after the command, as in the AWS CLI:
// --region, --profile, --endpoint-url, --output json|yaml|text|table
// (AWS_DEFAULT_OUTPUT, else table on a terminal, else json), --query JMESPATH and --debug.
// Commands that read the ledger take --table (default $SENDONCE_TABLE).
// Results go to stdout alone, so they can be piped; messages, progress and
// totals go to stderr.
//
// Exit status: 0 on success (status: healthy), 3 when status finds that
// something needs a person, 1 on an error (an invalid request, an unknown
// key, a missing table or credentials, an AWS error) with one line on
// stderr, 2 on a usage error (unknown command, missing argument, bad flag)
// with one line on stderr that names "sendonce help COMMAND".
//
// The commands are github.com/spf13/cobra commands; see docs/cli.md.
package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/jmespath/go-jmespath"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sendonce/sendonce/internal/buildinfo"
)

// The overview lists the commands in the order newRoot adds them.
func init() { cobra.EnableCommandSorting = false }

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

// env is what a run gets from outside: its streams and the environment.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	// terminal is true when stdout is a terminal (--output defaults to
	// table there); errTerminal when stderr is one (progress is shown
	// there).
	terminal, errTerminal bool
	// loadAWS loads the AWS configuration with the flags' options; nil
	// is config.LoadDefaultConfig. Tests load it from their own variables.
	loadAWS func(context.Context, ...func(*config.LoadOptions) error) (aws.Config, error)
}

// app is one run: its environment, the global flags and what the command
// learns on the way (for the error messages and the totals).
type app struct {
	env

	// The global flags.
	region, profile, endpoint string
	stackName                 string
	output, query             string
	debug                     bool

	format string             // --output, checked, with its default
	jq     *jmespath.JMESPath // --query, compiled; nil without

	running bool        // a command's own code runs: its errors are not usage errors
	command string      // its name ("dlq list")
	service string      // the AWS service it calls (annotService), which --endpoint-url is for
	cfg     *aws.Config // the AWS configuration, loaded once
	where   resources   // what the command works on, for error messages
	stack   *stackInfo  // the stack whose outputs name the resources (useStack)
	scan    scanStats   // the DynamoDB Scan pages read
	prog    *progress   // the live progress line on stderr
}

// usageError is a usage mistake: exit status 2, one line naming the help
// of cmd.
type usageError struct {
	cmd *cobra.Command
	msg string
}

func (e *usageError) Error() string { return e.msg }

// run runs the command args name (args excludes the program name) and
// returns the exit status. getenv stands for os.Getenv.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	if getenv == nil {
		getenv = os.Getenv
	}
	return runEnv(ctx, env{stdin: stdin, stdout: stdout, stderr: stderr, getenv: getenv,
		terminal: isTerminal(stdout), errTerminal: isTerminal(stderr)}, args)
}

// runEnv is run with e.
func runEnv(ctx context.Context, e env, args []string) int {
	a := &app{env: e}
	a.prog = newProgress(e.stderr, e.errTerminal)
	root := newRoot(a)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	a.prog.clear()
	var ue *usageError
	switch {
	case err == nil:
		return exitOK
	case isAttention(err):
		fmt.Fprintf(e.stderr, "sendonce: %s\n", oneLine(err.Error()))
		return exitAttention
	case errors.As(err, &ue):
		fmt.Fprintf(e.stderr, "sendonce: %s (see %q)\n", oneLine(ue.msg), helpHint(ue.cmd))
		return exitUsage
	case !a.running:
		// Cobra's own findings before the command ran: an unknown
		// command or flag, a bad flag value.
		fmt.Fprintf(e.stderr, "sendonce: %s (see %q)\n", oneLine(err.Error()), helpHint(cmd))
		return exitUsage
	default:
		fmt.Fprintf(e.stderr, "sendonce: %s\n", oneLine(a.plain(err)))
		return exitError
	}
}

// helpHint is the help command that explains c.
func helpHint(c *cobra.Command) string {
	if c == nil || !c.HasParent() {
		return "sendonce help"
	}
	return "sendonce help " + name(c)
}

// name is c's path without the program: "inspect", "apikey create".
func name(c *cobra.Command) string {
	return strings.TrimPrefix(c.CommandPath(), "sendonce ")
}

// newRoot builds the command tree for one run of a.
func newRoot(a *app) *cobra.Command {
	root := &cobra.Command{
		Use:           "sendonce",
		Short:         "operator CLI of sendonce, effectively exactly-once notifications on AWS",
		Long:          overview,
		Version:       version(),
		SilenceErrors: true,
		SilenceUsage:  true,
		// An argument that names no command reaches the root.
		Args: func(c *cobra.Command, args []string) error {
			if len(args) > 0 {
				return unknownCommand(c, args[0])
			}
			return nil
		},
		RunE: func(c *cobra.Command, _ []string) error {
			return &usageError{cmd: c, msg: "no command given"}
		},
		PersistentPreRunE: a.prepare,
		// "sendonce completion bash|zsh|fish|powershell" (docs/cli.md).
		CompletionOptions: cobra.CompletionOptions{},
		// "lsit" suggests "list" (cobra's default is no suggestion here).
		SuggestionsMinimumDistance: 2,
		// "sendonce lsit --state failed" is an unknown command, not an
		// unknown flag of the root.
		FParseErrWhitelist: cobra.FParseErrWhitelist{UnknownFlags: true},
	}
	pf := root.PersistentFlags()
	pf.StringVar(&a.region, "region", "", "the AWS `REGION` (default: AWS_REGION or the profile's region)")
	pf.StringVar(&a.profile, "profile", "", "a `PROFILE` of the AWS config files (default: AWS_PROFILE)")
	pf.StringVar(&a.endpoint, "endpoint-url", "", "send the command's calls of its service (DynamoDB; SQS for dlq) to `URL`, as the AWS CLI does; other services keep AWS_ENDPOINT_URL_<SERVICE>")
	pf.StringVar(&a.stackName, "stack-name", "", "read the table, queues, API URL and alarm topic from the outputs of the sendonce `STACK` (default: SENDONCE_STACK)")
	pf.StringVar(&a.output, "output", "", "the `FORMAT`: json, yaml, text or table (default: AWS_DEFAULT_OUTPUT, else table on a terminal, else json)")
	pf.StringVar(&a.query, "query", "", "a JMESPath `EXPRESSION` applied to the JSON result (a list is an array)")
	pf.BoolVar(&a.debug, "debug", false, "log the AWS SDK's retries and requests and print errors unabridged")

	root.AddCommand(
		createTablesCmd(a), keyCmd(a), statusCmd(a), inspectCmd(a), findCmd(a), listCmd(a), resolveCmd(a),
		group("dlq", "dead-lettered messages: list them, move the valid ones back", dlqListCmd(a), dlqRedriveCmd(a)),
		group("apikey", "the HTTP API's keys: issue, list, revoke", apikeyCreateCmd(a), apikeyListCmd(a), apikeyRevokeCmd(a)),
		templateCmd(a),
		&cobra.Command{Use: "version", Short: "print the version", Hidden: true, Args: noArgs, Annotations: map[string]string{annotLocal: ""},
			RunE: func(c *cobra.Command, _ []string) error {
				_, err := fmt.Fprintln(c.OutOrStdout(), version())
				return err
			}},
	)
	root.SetHelpCommand(helpCmd(a))
	root.SetHelpFunc(func(c *cobra.Command, _ []string) { printHelp(c.OutOrStdout(), c) })
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return &usageError{cmd: c, msg: err.Error()} })
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	root.SetIn(a.stdin)
	markRunning(a, root)
	return root
}

// markRunning wraps every command's RunE so that a.running tells a
// command's own errors (exit 1) from cobra's usage errors (exit 2).
func markRunning(a *app, c *cobra.Command) {
	if f := c.RunE; f != nil {
		c.RunE = func(c *cobra.Command, args []string) error {
			a.running, a.command = true, name(c)
			a.service = cmp.Or(c.Annotations[annotService], serviceDynamoDB)
			if _, local := c.Annotations[annotLocal]; !local {
				if err := a.useStack(c.Context()); err != nil {
					return err
				}
			}
			return f(c, args)
		}
	}
	for _, sub := range c.Commands() {
		markRunning(a, sub)
	}
}

// Annotation keys of a command.
const (
	// annotValue marks a command that prints one value alone (a key, a
	// version number) or nothing: --query does not apply to it.
	annotValue = "sendonce/value"
	// annotLocal marks a command that calls no AWS service: it reads no
	// stack.
	annotLocal = "sendonce/local"
	// annotService names the AWS service a command calls (its SDK id),
	// the one --endpoint-url applies to; serviceDynamoDB when unset.
	annotService = "sendonce/service"
)

// The services a command's --endpoint-url may name, by their SDK ids.
const (
	serviceDynamoDB = "DynamoDB"
	serviceSQS      = "SQS"
)

// prepare checks the global flags before any command runs: --output and
// --query are usage errors when wrong, before any AWS call.
func (a *app) prepare(c *cobra.Command, _ []string) error {
	format, from := a.output, "--output"
	if format == "" {
		// As the AWS CLI: the flag, else AWS_DEFAULT_OUTPUT.
		format, from = strings.TrimSpace(a.getenv("AWS_DEFAULT_OUTPUT")), "AWS_DEFAULT_OUTPUT"
	}
	switch format {
	case "json", "text", "table", "yaml":
		a.format = format
	case "":
		a.format = "json"
		if a.terminal {
			a.format = "table"
		}
	default:
		return &usageError{cmd: c, msg: fmt.Sprintf("%s %q: want json, yaml, text or table", from, format)}
	}
	if a.query == "" {
		return nil
	}
	if what, ok := c.Annotations[annotValue]; ok {
		return &usageError{cmd: c, msg: fmt.Sprintf("--query does not apply to %s, which %s", name(c), what)}
	}
	jq, err := compileQuery(a.query)
	if err != nil {
		return &usageError{cmd: c, msg: err.Error()}
	}
	a.jq = jq
	return nil
}

// group is a command word whose subcommands do the work ("apikey").
func group(word, short string, subs ...*cobra.Command) *cobra.Command {
	g := &cobra.Command{
		Use:   word + " COMMAND",
		Short: short,
		Args:  cobra.ArbitraryArgs,
		RunE: func(c *cobra.Command, args []string) error {
			var names []string
			for _, s := range c.Commands() {
				if s.IsAvailableCommand() {
					names = append(names, s.Name())
				}
			}
			want := strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
			if len(args) == 0 {
				return &usageError{cmd: c, msg: fmt.Sprintf("%s needs a subcommand: %s", word, want)}
			}
			return &usageError{cmd: c, msg: fmt.Sprintf("unknown %s subcommand %q (want %s)", word, args[0], want)}
		},
	}
	g.AddCommand(subs...)
	return g
}

// unknownCommand is the usage error for word under c, with cobra's
// suggestion when one is close.
func unknownCommand(c *cobra.Command, word string) error {
	msg := fmt.Sprintf("unknown command %q", word)
	if s := c.SuggestionsFor(word); len(s) > 0 {
		msg += fmt.Sprintf("; did you mean %q?", s[0])
	}
	return &usageError{cmd: c, msg: msg}
}

// helpCmd is "sendonce help [COMMAND]": a command's help on stdout, exit
// 0; an unknown command is a usage error (cobra's own help command
// prints the overview then, with exit status 0).
func helpCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:         "help [COMMAND]",
		Short:       "show this help, or a command's",
		Annotations: map[string]string{annotLocal: ""},
		RunE: func(c *cobra.Command, args []string) error {
			root := c.Root()
			if len(args) == 0 {
				printHelp(a.stdout, root)
				return nil
			}
			found, rest, err := root.Find(args)
			if err != nil || found == root {
				return unknownCommand(root, args[0])
			}
			if len(rest) > 0 {
				return &usageError{cmd: root, msg: "help takes one command, got: " + strings.Join(args, " ")}
			}
			printHelp(a.stdout, found)
			return nil
		},
	}
}

// Positional argument checks, as cobra.PositionalArgs with the CLI's
// messages.

func noArgs(c *cobra.Command, args []string) error {
	if len(args) > 0 {
		return &usageError{cmd: c, msg: "unexpected arguments: " + strings.Join(args, " ")}
	}
	return nil
}

// oneArg wants a single positional argument, what.
func oneArg(what string) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		switch {
		case len(args) == 0:
			return &usageError{cmd: c, msg: name(c) + " needs a " + what}
		case len(args) > 1:
			return &usageError{cmd: c, msg: name(c) + " takes one " + what + ", got: " + strings.Join(args, " ")}
		}
		return nil
	}
}

// tableFlag adds --table to c; table returns its value.
func tableFlag(c *cobra.Command) *string {
	return c.Flags().String("table", "", "the sendonce `TABLE` (default: SENDONCE_TABLE)")
}

// table returns the table c works on: --table, else SENDONCE_TABLE; a
// usage error when neither names one.
func (a *app) table(c *cobra.Command, flag string) (string, error) {
	t := flag
	if t == "" {
		t = strings.TrimSpace(a.getenv("SENDONCE_TABLE"))
	}
	if t == "" {
		return "", &usageError{cmd: c, msg: "no table: pass --table NAME or set SENDONCE_TABLE"}
	}
	a.where.table = t
	return t, nil
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

const overview = `Every command takes the global flags, before or after it, as the AWS CLI
does: --region, --profile and --endpoint-url (otherwise AWS_REGION,
AWS_PROFILE, AWS_ENDPOINT_URL_DYNAMODB, ... and the AWS config files
apply), --output json|yaml|text|table (else AWS_DEFAULT_OUTPUT, else
table on a terminal, else json),
--query JMESPATH and --debug. The table comes from --table, else the
outputs of the stack --stack-name (or SENDONCE_STACK) names, else
SENDONCE_TABLE; the queues from --queue-url / --dlq-url, else the stack,
else SENDONCE_QUEUE_URL / SENDONCE_DLQ_URL.

Exit status: 0 on success; 1 on an error, with a one-line message on
stderr; 2 on a usage error, with a one-line message naming the help.`

// printHelp prints c's help: its synopsis, its text, its subcommands and
// its flags.
func printHelp(w io.Writer, c *cobra.Command) {
	var b strings.Builder
	if !c.HasParent() {
		b.WriteString("sendonce: " + c.Short + ".\n\nUsage:\n  sendonce COMMAND [ARGUMENTS] [FLAGS]\n\nCommands:\n")
		for _, s := range c.Commands() {
			if !s.IsAvailableCommand() || s.Name() == "help" {
				continue
			}
			if s.HasAvailableSubCommands() {
				for _, ss := range s.Commands() {
					fmt.Fprintf(&b, "  sendonce %s %s\n      %s\n", s.Name(), ss.Use, ss.Short)
				}
				continue
			}
			fmt.Fprintf(&b, "  sendonce %s\n      %s\n", s.Use, s.Short)
		}
		b.WriteString("  sendonce help [COMMAND]\n      show this help, or a command's\n  sendonce --version\n      print the version\n\n")
		b.WriteString(overview + "\n\nRun \"sendonce help COMMAND\" for a command's details. See docs/cli.md.\n")
		b.WriteString("\nGlobal flags:\n" + c.PersistentFlags().FlagUsages())
		io.WriteString(w, b.String())
		return
	}
	parent := strings.TrimSuffix(strings.TrimPrefix(c.Parent().CommandPath(), "sendonce"), " ")
	fmt.Fprintf(&b, "Usage:\n  sendonce%s %s\n", parent, c.Use)
	if c.HasAvailableSubCommands() {
		b.WriteString("\nCommands:\n")
		for _, s := range c.Commands() {
			if s.IsAvailableCommand() {
				fmt.Fprintf(&b, "  sendonce %s %s\n      %s\n", name(c), s.Use, s.Short)
			}
		}
	}
	if long := strings.TrimSpace(c.Long); long != "" {
		b.WriteString("\n" + long + "\n")
	} else {
		b.WriteString("\n" + upperFirst(c.Short) + ".\n")
	}
	local := pflag.NewFlagSet(c.Name(), pflag.ContinueOnError)
	c.LocalNonPersistentFlags().VisitAll(func(f *pflag.Flag) {
		if f.Name != "help" {
			local.AddFlag(f)
		}
	})
	if local.HasAvailableFlags() {
		b.WriteString("\nFlags:\n" + local.FlagUsages())
	}
	b.WriteString("\nGlobal flags:\n" + c.Root().PersistentFlags().FlagUsages())
	if c.HasAvailableSubCommands() {
		fmt.Fprintf(&b, "\nRun \"sendonce help %s COMMAND\" for a subcommand's details.\n", name(c))
	}
	io.WriteString(w, b.String())
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// version is this binary's version: "sendonce " and the module's version
// from its build information (buildinfo.Version).
func version() string { return "sendonce " + buildinfo.Version() }
