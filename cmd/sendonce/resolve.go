package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sendonce/sendonce/internal/ledger"
)

func resolveCmd(a *app) *cobra.Command {
	c := &cobra.Command{
		Use:   "resolve KEY --as sent|failed|abandoned --reason TEXT [--provider-id ID] [--force] [--table NAME]",
		Short: "settle a row by hand after checking with the provider (fenced, audited)",
		Long: `
Settles the row of KEY in a final state after an operator has checked with
the provider: sent (the provider has it), failed (it will never go out) or
abandoned (nobody can tell). It reads the row, then writes with one
conditional write fenced on the state and claim id it read: if a sender or
the reconciler moved the row in between, nothing is written and it fails
(exit 1); read it again and decide again.

It refuses (exit 1), unless --force is given:
  - a final row (SENT, FAILED, ABANDONED): it was settled already;
  - a PENDING row whose lease has not ended: a worker may be calling the
    provider right now (its outcome would then be fenced out).

The row keeps who settled it (the caller's IAM ARN, from STS
GetCallerIdentity with the same credentials), when, why (--reason), and
the state it was in; "sendonce inspect KEY" shows them. --provider-id
records the provider's message id the operator found. Like every final
row it drops the address and the rendered message and leaves the attention
index: the reconciler never touches it again, and a redelivery of the
message finds it final and sends nothing. It prints the row as written.`,
		Args: oneArg("KEY"),
	}
	tableF := tableFlag(c)
	f := c.Flags()
	as := f.String("as", "", "`STATE`: sent, failed or abandoned (required)")
	reason := f.String("reason", "", "why, in `TEXT` (required; kept in the row)")
	providerID := f.String("provider-id", "", "the provider's message `ID`, if known")
	force := f.Bool("force", false, "settle a final or in-flight row anyway")
	c.RunE = func(c *cobra.Command, args []string) error {
		ctx, key := c.Context(), args[0]
		to := ledger.State(strings.ToUpper(*as))
		if !to.Final() {
			return &usageError{cmd: c, msg: fmt.Sprintf("--as %q: want sent, failed or abandoned", *as)}
		}
		if strings.TrimSpace(*reason) == "" {
			return &usageError{cmd: c, msg: "resolve needs --reason TEXT"}
		}
		led, cur, err := a.openRow(ctx, c, *tableF, key)
		if err != nil {
			return err
		}
		res := ledger.Resolution{
			Key: key, FromState: cur.State, FromClaimID: cur.ClaimID, State: to,
			Reason: strings.TrimSpace(*reason), ProviderMessageID: *providerID, Force: *force,
		}
		if err := res.Refused(cur, time.Now()); err != nil {
			return fmt.Errorf("resolve %s: %w (pass --force to settle it anyway)", key, err)
		}
		if res.By, err = a.callerIdentity(ctx); err != nil {
			return fmt.Errorf("resolve: %w", err)
		}
		r, err := led.Resolve(ctx, res)
		if moved, ok := ledger.AsConflict(err); ok {
			return fmt.Errorf("resolve %s: the row moved since it was read (now %s, attempt %d); nothing written: inspect it and decide again", key, moved.State, moved.Attempts)
		}
		if errors.Is(err, ledger.ErrFinal) || errors.Is(err, ledger.ErrInFlight) {
			return fmt.Errorf("resolve %s: %w (pass --force to settle it anyway)", key, err)
		}
		if err != nil {
			return fmt.Errorf("resolve: %w", err)
		}
		a.note("resolved %s as %s (was %s), by %s", key, r.State, cur.State, r.ResolvedBy)
		rd, err := a.redactor(ctx)
		if err != nil {
			return fmt.Errorf("resolve: %w", err)
		}
		return a.printer().object(view(r, rd))
	}
	return c
}
