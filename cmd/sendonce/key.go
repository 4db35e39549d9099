package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/sendonce/sendonce/internal/notify"
)

var keyCmd = &command{
	name:     "key",
	synopsis: "key < request.json",
	summary:  "print the idempotency key of a notification request",
	help: `
Reads one notification request (docs/request.md, the SQS message body) on stdin,
validates it exactly as the sender does, and prints its idempotency key
(v1_ and 64 hex digits) alone on stdout. It needs no AWS access.

An invalid request (not JSON, a missing or malformed field, more than 256 KB)
is an error (exit status 1) whose one-line message names the field and says
what is wrong: the same reason the sender gives when it dead-letters it.
`,
	run: runKey,
}

func runKey(_ context.Context, c *command, e env, args []string) error {
	fs := newFlags(c)
	commonFlags(fs) // accepted for uniformity; the key is printed alone
	pos, err := parse(c, fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return &usageError{cmd: c, msg: "key reads the request on stdin and takes no arguments, got: " + strings.Join(pos, " ")}
	}
	// One byte over the limit is enough for notify.Parse to reject it.
	body, err := io.ReadAll(io.LimitReader(e.stdin, notify.MaxBodySize+1))
	if err != nil {
		return fmt.Errorf("key: read stdin: %w", err)
	}
	req, err := notify.Parse(body)
	if err != nil {
		return fmt.Errorf("key: %w", err)
	}
	_, err = fmt.Fprintln(e.stdout, req.Key())
	return err
}
