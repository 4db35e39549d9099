package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sendonce/sendonce/notify"
)

func keyCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "key < request.json",
		Short: "print the idempotency key of a notification request",
		Long: `
Reads one notification request (docs/request.md, the SQS message body) on stdin,
validates it exactly as the sender does, and prints its idempotency key
(v1_ and 64 hex digits) alone on stdout, whatever --output says. It needs no
AWS access.

An invalid request (not JSON, a missing or malformed field, more than 256 KB)
is an error (exit status 1) whose one-line message names the field and says
what is wrong: the same reason the sender gives when it dead-letters it.`,
		Annotations: map[string]string{annotValue: "prints the key alone", annotLocal: ""},
		Args: func(c *cobra.Command, args []string) error {
			if len(args) > 0 {
				return &usageError{cmd: c, msg: "key reads the request on stdin and takes no arguments, got: " + strings.Join(args, " ")}
			}
			return nil
		},
		RunE: func(c *cobra.Command, _ []string) error {
			// One byte over the limit is enough for notify.Parse to reject it.
			body, err := io.ReadAll(io.LimitReader(a.stdin, notify.MaxBodySize+1))
			if err != nil {
				return fmt.Errorf("key: read stdin: %w", err)
			}
			req, err := notify.Parse(body)
			if err != nil {
				return fmt.Errorf("key: %w", err)
			}
			_, err = fmt.Fprintln(a.stdout, req.Key())
			return err
		},
	}
}
