package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sendonce/sendonce/internal/apikey"
	"github.com/sendonce/sendonce/internal/apikey/dynamoapikey"
)

func apikeyCreateCmd(a *app) *cobra.Command {
	c := &cobra.Command{
		Use:   "create --tenant TENANT [--table NAME]",
		Short: "issue an API key for a tenant; prints the key once",
		Long: `
Issues a new API key for TENANT (1 to 64 of A-Z a-z 0-9 . _ -) and prints the
whole key ("so_<id>_<secret>") alone on stdout, whatever --output says. It is
shown this once: the table keeps only its SHA-256, so store it now. The
key's id, which revokes it, goes to stderr.

Callers of the HTTP API present the key as "Authorization: Bearer <key>".`,
		Args:        noArgs,
		Annotations: map[string]string{annotValue: "prints the key alone"},
	}
	tableF, tenant := tableFlag(c), tenantFlag(c)
	c.RunE = func(c *cobra.Command, _ []string) error {
		db, table, err := a.tenantTable(c, *tableF, *tenant)
		if err != nil {
			return err
		}
		id, key, err := apikey.New(dynamoapikey.New(db, table), apikey.Config{}).Create(c.Context(), *tenant)
		if err != nil {
			return tenantError(c, *tenant, err)
		}
		if _, err := fmt.Fprintln(a.stdout, key); err != nil {
			return err
		}
		a.note("created API key %s for tenant %s (revoke with: sendonce apikey revoke %s); the key is shown only once", id, *tenant, id)
		return nil
	}
	return c
}

func tenantFlag(c *cobra.Command) *string {
	return c.Flags().String("tenant", "", "the `TENANT` (required)")
}

// tenantTable checks the --tenant and --table of c, an apikey command on
// one tenant, and returns a DynamoDB client and the table.
func (a *app) tenantTable(c *cobra.Command, tableFlag, tenant string) (dynamoapikey.API, string, error) {
	if tenant == "" {
		return nil, "", &usageError{cmd: c, msg: name(c) + " needs --tenant TENANT"}
	}
	table, err := a.table(c, tableFlag)
	if err != nil {
		return nil, "", err
	}
	db, err := a.dynamoClient(c.Context())
	if err != nil {
		return nil, "", err
	}
	return db, table, nil
}

// tenantError is err of c on tenant, told plainly when the tenant is
// malformed.
func tenantError(c *cobra.Command, tenant string, err error) error {
	if errors.Is(err, apikey.ErrInvalidTenant) {
		return fmt.Errorf("%s: tenant %q is not 1 to 64 of A-Z a-z 0-9 . _ -", name(c), truncate(tenant))
	}
	return err
}

func apikeyRevokeCmd(a *app) *cobra.Command {
	c := &cobra.Command{
		Use:   "revoke [--table NAME] KEY-ID",
		Short: "revoke an API key by its id",
		Long: `
Revokes the API key whose id is KEY-ID (the 16 hex digits "apikey create"
printed on stderr, also the part between "so_" and the second "_" of the
key; the whole key is accepted too). The HTTP API rejects it from then on; a
function instance that authenticated it recently may accept it for up to 30
seconds more (its cache). Revoking a revoked key succeeds. A malformed or
unknown id is an error (exit status 1).`,
		Args:        oneArg("KEY-ID"),
		Annotations: map[string]string{annotValue: "prints nothing on stdout"},
	}
	tableF := tableFlag(c)
	c.RunE = func(c *cobra.Command, args []string) error {
		id := args[0]
		if full := apikey.ID(id); full != "" {
			id = full // the whole key was given: revoke it by its id
		}
		table, err := a.table(c, *tableF)
		if err != nil {
			return err
		}
		db, err := a.dynamoClient(c.Context())
		if err != nil {
			return err
		}
		err = apikey.New(dynamoapikey.New(db, table), apikey.Config{}).Revoke(c.Context(), id)
		switch {
		case errors.Is(err, apikey.ErrInvalidID):
			return fmt.Errorf("apikey revoke: %q is not a key id (16 lowercase hex digits)", truncate(id))
		case errors.Is(err, apikey.ErrNotFound):
			return fmt.Errorf("apikey revoke: no API key with id %s in table %s", id, table)
		case err != nil:
			return err
		}
		a.note("revoked API key %s", id)
		return nil
	}
	return c
}

func apikeyListCmd(a *app) *cobra.Command {
	c := &cobra.Command{
		Use:   "list --tenant TENANT [--table NAME]",
		Short: "list a tenant's API keys: ids, creation and revocation times",
		Long: `
Lists TENANT's API keys, oldest first: the key id (what "apikey revoke"
takes), when it was created, whether and when it was revoked. One JSON
object per line (--output json) or a table. Never a secret: the table keeps
only a hash, and the hash is not printed either.

It queries the table's "event" index where the table has it (template.yaml's
EventIndex=true), else scans the table (the default: its cost grows with the
table; progress on a terminal, and a note with the scan's totals at the
end). Keys created by a sendonce from before "apikey list" existed are not
listed; they still work and can still be revoked by id.`,
		Args: noArgs,
	}
	tableF, tenant := tableFlag(c), tenantFlag(c)
	c.RunE = func(c *cobra.Command, _ []string) error {
		db, table, err := a.tenantTable(c, *tableF, *tenant)
		if err != nil {
			return err
		}
		infos, err := apikey.New(dynamoapikey.New(db, table), apikey.Config{}).List(c.Context(), *tenant)
		if err != nil {
			return tenantError(c, *tenant, err)
		}
		if scanned, totals := a.scanned(); scanned {
			a.note("note: table %s has no event index, so this listing scanned the whole table: %s", table, totals)
		}
		views := make([]apikeyView, len(infos))
		for i, k := range infos {
			views[i] = apikeyView{ID: k.ID, Tenant: k.Tenant, CreatedAt: timeString(k.CreatedAt), Revoked: k.Revoked, RevokedAt: timeString(k.RevokedAt)}
		}
		return writeList(a.printer(), views, []string{"ID", "TENANT", "CREATED", "REVOKED"}, func(v apikeyView) []string {
			return []string{v.ID, v.Tenant, v.CreatedAt, v.RevokedAt}
		})
	}
	return c
}

// apikeyView is one key as apikey list prints it.
type apikeyView struct {
	ID        string `json:"id"`
	Tenant    string `json:"tenant"`
	CreatedAt string `json:"created_at,omitempty"`
	Revoked   bool   `json:"revoked"`
	RevokedAt string `json:"revoked_at,omitempty"`
}
