package main

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/ledger/dynamoledger"
	"github.com/sendonce/sendonce/internal/redact"
	"github.com/sendonce/sendonce/internal/sendkey"
)

func inspectCmd(a *app) *cobra.Command {
	c := &cobra.Command{
		Use:   "inspect [--table NAME] KEY",
		Short: "print a ledger row, addresses redacted",
		Long: `
Prints the ledger row of KEY (an idempotency key, as "sendonce key" prints it),
read with a strongly consistent read: one JSON object (--output json), or
"field: value" lines (table) or "field<TAB>value" lines (text).

Nothing personal is printed raw:
  - address is redacted ("phone:3f2a9c01b7e45d10": a kind and 16 hex digits
    of an HMAC-SHA256 under the deployment's key). With
    SENDONCE_REDACT_KEY_PARAM set to the stack's RedactKeySecret ARN (or
    SENDONCE_REDACT_KEY to the key), it is the token the functions' logs
    use, so a row can be matched with log lines; without, a one-off key.
    Final rows (SENT, FAILED, ABANDONED) no longer hold the address at all.
  - the rendered message is never shown: subject_length and body_length give
    its length in characters while the row still holds it (it may carry a
    one-time code).
  - phone numbers, email addresses and SNS endpoint ARNs inside reason (a
    provider's error text) and recipient_id are redacted the same way.

A row settled by hand ("sendonce resolve") shows the audit: resolved_by
(the caller's IAM ARN), resolved_at, resolved_reason and resolved_from (the
state it was in). event_id is the producer's event id (rows claimed since
the event lookup exists).

Times are RFC 3339 UTC; fields that are empty or zero are left out. A key
with no live row (never claimed, or past its retention) is an error (exit
status 1), as is a string that is not a key.

  sendonce inspect KEY --query state --output text     prints SENT, FAILED, ...`,
		Args: oneArg("KEY"),
	}
	tableF := tableFlag(c)
	c.RunE = func(c *cobra.Command, args []string) error {
		ctx := c.Context()
		_, r, err := a.openRow(ctx, c, *tableF, args[0])
		if err != nil {
			return err
		}
		rd, err := a.redactor(ctx)
		if err != nil {
			return fmt.Errorf("inspect: %w", err)
		}
		return a.printer().object(view(r, rd))
	}
	return c
}

// openRow checks the table and key, then opens the ledger on the table
// and reads key's row: the start of the commands that act on one key.
// Its errors name the command.
func (a *app) openRow(ctx context.Context, c *cobra.Command, tableFlag, key string) (*dynamoledger.Ledger, ledger.Record, error) {
	table, err := a.table(c, tableFlag)
	if err != nil {
		return nil, ledger.Record{}, err
	}
	if !sendkey.Valid(key) {
		return nil, ledger.Record{}, fmt.Errorf("%s: %q is not an idempotency key (v1_ and 64 lowercase hex digits)", name(c), truncate(key))
	}
	led, err := a.openLedger(ctx, table)
	if err != nil {
		return nil, ledger.Record{}, fmt.Errorf("%s: %w", name(c), err)
	}
	r, err := getRow(ctx, led, key, table)
	if err != nil {
		return nil, ledger.Record{}, fmt.Errorf("%s: %w", name(c), err)
	}
	return led, r, nil
}

// openLedger returns the DynamoDB ledger on table.
func (a *app) openLedger(ctx context.Context, table string) (*dynamoledger.Ledger, error) {
	db, err := a.dynamoClient(ctx)
	if err != nil {
		return nil, err
	}
	return dynamoledger.New(db, table, dynamoledger.Config{})
}

// getRow reads key's row, with a message for a missing one that says why
// it may be missing.
func getRow(ctx context.Context, led ledger.Ledger, key, table string) (ledger.Record, error) {
	r, err := led.Get(ctx, key)
	if errors.Is(err, ledger.ErrNotFound) {
		return r, fmt.Errorf("no ledger row for %s in table %s (never claimed, or past its retention)", key, table)
	}
	return r, err
}

// rowView is what inspect prints: a ledger.Record with every address
// redacted and the rendered message reduced to its length.
type rowView struct {
	Key      string       `json:"key"`
	State    ledger.State `json:"state"`
	Tenant   string       `json:"tenant,omitempty"`
	Channel  string       `json:"channel,omitempty"`
	Class    string       `json:"class,omitempty"`
	Provider string       `json:"provider,omitempty"`
	// History is each earlier attempt: its number, provider and outcome.
	History           []string     `json:"history,omitempty"`
	Template          string       `json:"template,omitempty"`
	TemplateVersion   int          `json:"template_version,omitempty"`
	TemplateLocale    string       `json:"template_locale,omitempty"`
	RecipientID       string       `json:"recipient_id,omitempty"`
	Address           string       `json:"address,omitempty"`
	SubjectLength     int          `json:"subject_length,omitempty"`
	BodyLength        int          `json:"body_length,omitempty"`
	Attempts          int          `json:"attempts"`
	ClaimID           string       `json:"claim_id,omitempty"`
	Released          bool         `json:"released,omitempty"`
	LeaseUntil        string       `json:"lease_until,omitempty"`
	AttemptedAt       string       `json:"attempted_at,omitempty"`
	CreatedAt         string       `json:"created_at,omitempty"`
	UpdatedAt         string       `json:"updated_at,omitempty"`
	ExpiresAt         string       `json:"expires_at,omitempty"`
	ProviderMessageID string       `json:"provider_message_id,omitempty"`
	Reason            string       `json:"reason,omitempty"`
	DeliveryStatus    string       `json:"delivery_status,omitempty"`
	DeliveryRank      int          `json:"delivery_rank,omitempty"`
	DeliveryAt        string       `json:"delivery_at,omitempty"`
	EventID           string       `json:"event_id,omitempty"`
	ResolvedBy        string       `json:"resolved_by,omitempty"`
	ResolvedAt        string       `json:"resolved_at,omitempty"`
	ResolvedReason    string       `json:"resolved_reason,omitempty"`
	ResolvedFrom      ledger.State `json:"resolved_from,omitempty"`
}

func view(r ledger.Record, rd *redact.Redactor) rowView {
	return rowView{
		Key:               r.Key,
		State:             r.State,
		Tenant:            r.Tenant,
		Channel:           r.Channel,
		Class:             r.Class,
		Provider:          r.Provider,
		History:           scrubAll(rd, r.History, r.Address),
		Template:          r.Template,
		TemplateVersion:   r.TemplateVersion,
		TemplateLocale:    r.TemplateLocale,
		RecipientID:       scrub(rd, r.RecipientID, r.Address),
		Address:           rd.Address(r.Address),
		SubjectLength:     utf8.RuneCountInString(r.Subject),
		BodyLength:        utf8.RuneCountInString(r.Body),
		Attempts:          r.Attempts,
		ClaimID:           r.ClaimID,
		Released:          r.Released,
		LeaseUntil:        timeString(r.LeaseUntil),
		AttemptedAt:       timeString(r.AttemptedAt),
		CreatedAt:         timeString(r.CreatedAt),
		UpdatedAt:         timeString(r.UpdatedAt),
		ExpiresAt:         timeString(r.ExpiresAt),
		ProviderMessageID: r.ProviderMessageID,
		Reason:            scrub(rd, r.Reason, r.Address),
		DeliveryStatus:    r.DeliveryStatus,
		DeliveryRank:      r.DeliveryRank,
		DeliveryAt:        timeString(r.DeliveryAt),
		EventID:           r.EventID,
		ResolvedBy:        r.ResolvedBy,
		ResolvedAt:        timeString(r.ResolvedAt),
		ResolvedReason:    scrub(rd, r.ResolvedReason, r.Address),
		ResolvedFrom:      r.ResolvedFrom,
	}
}

func timeString(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// addressRE matches what looks like an address in free text: an E.164
// number, an email address, an SNS ARN.
var addressRE = regexp.MustCompile(`\+[1-9][0-9]{6,14}|[A-Za-z0-9._%+'-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+|arn:aws[a-z-]*:sns:[^\s"',;)]+`)

// scrub redacts addr, and anything else that looks like an address, in s.
func scrub(rd *redact.Redactor, s, addr string) string {
	if s == "" {
		return ""
	}
	if addr != "" {
		s = strings.ReplaceAll(s, addr, rd.Address(addr))
	}
	return addressRE.ReplaceAllStringFunc(s, rd.Address)
}

func truncate(s string) string {
	if utf8.RuneCountInString(s) > 80 {
		return string([]rune(s)[:80]) + "…"
	}
	return s
}

// scrubAll is scrub of each of ss.
func scrubAll(rd *redact.Redactor, ss []string, addr string) []string {
	var out []string
	for _, s := range ss {
		out = append(out, scrub(rd, s, addr))
	}
	return out
}
