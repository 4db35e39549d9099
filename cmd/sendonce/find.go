package main

import (
	"errors"
	"fmt"
	"regexp"

	"github.com/spf13/cobra"

	"github.com/sendonce/sendonce/internal/sendkey"
	"github.com/sendonce/sendonce/notify"
)

func findCmd(a *app) *cobra.Command {
	c := &cobra.Command{
		Use:   "find --tenant T --event E [--recipient R --channel C --template N] [--table NAME]",
		Short: "the support lookup: a message's ledger row from what the producer sent",
		Long: `
With all five of --tenant, --event, --recipient, --channel and --template, it
derives the message's idempotency key (as "sendonce key" does) and prints its
row exactly as "sendonce inspect KEY" would: no hashing by hand. A message
with no row (never claimed, or past its retention) is an error (exit 1).

With --tenant and --event alone, it prints every row of that business event
(all recipients, channels and templates), ordered by key: one JSON object
per line (--output json) or a table. Where the table has the "event" index
(template.yaml's EventIndex=true, or create-tables --event-index: a
KEYS_ONLY index written once per message when it is claimed, one more
write unit per message) it queries that index; without it (the default)
it scans the whole table, filtered on the event, with progress on stderr
(on a terminal) and a note with the scan's totals at the end: the same
rows, at a cost that grows with the table. Then it reads each row.
Rows claimed by a sendonce older than the event lookup are not found this
way. An event with no rows is an error (exit 1).`,
		Args: noArgs,
	}
	tableF := tableFlag(c)
	var p sendkey.Parts
	f := c.Flags()
	f.StringVar(&p.Tenant, "tenant", "", "the `TENANT` id (required)")
	f.StringVar(&p.EventID, "event", "", "the `EVENT` id (required)")
	f.StringVar(&p.RecipientID, "recipient", "", "the `RECIPIENT` id")
	f.StringVar(&p.Channel, "channel", "", "the `CHANNEL`: sms, email or push")
	f.StringVar(&p.Template, "template", "", "the `TEMPLATE` name")
	c.RunE = func(c *cobra.Command, _ []string) error {
		ctx := c.Context()
		if p.Tenant == "" || p.EventID == "" {
			return &usageError{cmd: c, msg: "find needs --tenant and --event"}
		}
		given := 0
		for _, v := range []string{p.RecipientID, p.Channel, p.Template} {
			if v != "" {
				given++
			}
		}
		if given != 0 && given != 3 {
			return &usageError{cmd: c, msg: "give all of --recipient, --channel and --template, or none of them"}
		}
		table, err := a.table(c, *tableF)
		if err != nil {
			return err
		}
		if !tenantRE.MatchString(p.Tenant) {
			return fmt.Errorf("find: tenant %q is not 1 to 64 of A-Z a-z 0-9 . _ -", truncate(p.Tenant))
		}
		if given == 3 && !notify.Channel(p.Channel).Valid() {
			return fmt.Errorf("find: channel %q: want sms, email or push", truncate(p.Channel))
		}
		led, err := a.openLedger(ctx, table)
		if err != nil {
			return fmt.Errorf("find: %w", err)
		}
		rd, err := a.redactor(ctx)
		if err != nil {
			return fmt.Errorf("find: %w", err)
		}
		if given == 3 {
			r, err := getRow(ctx, led, sendkey.Derive(p), table)
			if err != nil {
				return fmt.Errorf("find: %w", err)
			}
			return a.printer().object(view(r, rd))
		}
		recs, err := led.ByEvent(ctx, p.Tenant, p.EventID)
		if err != nil {
			return fmt.Errorf("find: %w", err)
		}
		// One line on stderr either way: the note, or the error that says it.
		note := ""
		if scanned, totals := a.scanned(); scanned {
			note = fmt.Sprintf("table %s has no event index, so this lookup scanned the whole table: %s (every item read and billed: the cost grows with the table; deploy with EventIndex=true, or create-tables --event-index, for large tables)", table, totals)
		}
		if len(recs) == 0 {
			msg := fmt.Sprintf("find: no ledger rows for event %q of tenant %s in table %s (never claimed, claimed by a sendonce older than the event lookup, or past its retention)", truncate(p.EventID), p.Tenant, table)
			if note != "" {
				msg += "; " + note
			}
			return errors.New(msg)
		}
		if note != "" {
			a.note("note: %s", note)
		}
		views := make([]rowView, len(recs))
		for i, r := range recs {
			views[i] = view(r, rd)
		}
		return writeList(a.printer(), views, []string{"KEY", "STATE", "CHANNEL", "TEMPLATE", "RECIPIENT", "ATTEMPTS", "PROVIDER_ID", "DELIVERY", "REASON"},
			func(v rowView) []string {
				return []string{v.Key, string(v.State), v.Channel, v.Template, v.RecipientID, fmt.Sprint(v.Attempts), v.ProviderMessageID, v.DeliveryStatus, v.Reason}
			})
	}
	return c
}

// tenantRE is the tenant_id rule of a notification request.
var tenantRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)
