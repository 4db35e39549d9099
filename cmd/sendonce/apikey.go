package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/sendonce/sendonce/internal/apikey"
)

var apikeyCreateCmd = &command{
	name:     "apikey create",
	synopsis: "apikey create --tenant TENANT [--table NAME]",
	summary:  "issue an API key for a tenant; prints the key once",
	help: `
Issues a new API key for TENANT (1 to 64 of A-Z a-z 0-9 . _ -) and prints the
whole key ("so_<id>_<secret>") alone on stdout. It is shown this once: the
table keeps only its SHA-256, so store it now. The key's id, which revokes
it, goes to stderr.

Callers of the HTTP API present the key as "Authorization: Bearer <key>".

Flags:
  --tenant TENANT   the tenant the key acts for (required)
  --table NAME      the table (default $SENDONCE_TABLE)
`,
	run: runAPIKeyCreate,
}

var apikeyRevokeCmd = &command{
	name:     "apikey revoke",
	synopsis: "apikey revoke [--table NAME] KEY-ID",
	summary:  "revoke an API key by its id",
	help: `
Revokes the API key whose id is KEY-ID (the 16 hex digits "apikey create"
printed on stderr, also the part between "so_" and the second "_" of the
key; the whole key is accepted too). The HTTP API rejects it from then on; a function instance that
authenticated it recently may accept it for up to 30 seconds more (its
cache). Revoking a revoked key succeeds. A malformed or unknown id is an
error (exit status 1).

Flags:
  --table NAME   the table (default $SENDONCE_TABLE)
`,
	run: runAPIKeyRevoke,
}

func runAPIKeyCreate(ctx context.Context, c *command, e env, args []string) error {
	g, table, tenant, err := tenantFlags(c, e, args)
	if err != nil {
		return err
	}
	db, err := tableClient(ctx, c, e, g, table)
	if err != nil {
		return err
	}
	id, key, err := apikey.New(db, table).Create(ctx, tenant)
	if err != nil {
		return tenantError(c, tenant, err)
	}
	if _, err := fmt.Fprintln(e.stdout, key); err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "sendonce: created API key %s for tenant %s (revoke with: sendonce apikey revoke %s); the key is shown only once\n", id, tenant, id)
	return nil
}

// tenantFlags parses args of c, an apikey command on one tenant: the
// table flags and the required --tenant.
func tenantFlags(c *command, e env, args []string) (g *common, table, tenant string, err error) {
	fs, g, t := tableFlags(c, e)
	tn := fs.String("tenant", "", "")
	if err := noArgs(c, fs, args); err != nil {
		return nil, "", "", err
	}
	if *tn == "" {
		return nil, "", "", &usageError{cmd: c, msg: c.name + " needs --tenant TENANT"}
	}
	return g, *t, *tn, nil
}

// tenantError is err of c on tenant, told plainly when the tenant is
// malformed.
func tenantError(c *command, tenant string, err error) error {
	if errors.Is(err, apikey.ErrInvalidTenant) {
		return fmt.Errorf("%s: tenant %q is not 1 to 64 of A-Z a-z 0-9 . _ -", c.name, truncate(tenant))
	}
	return err
}

func runAPIKeyRevoke(ctx context.Context, c *command, e env, args []string) error {
	fs, g, table := tableFlags(c, e)
	arg, err := parseOne(c, fs, args, "KEY-ID")
	if err != nil {
		return err
	}
	id := arg
	if full := apikey.ID(id); full != "" {
		id = full // the whole key was given: revoke it by its id
	}
	db, err := tableClient(ctx, c, e, g, *table)
	if err != nil {
		return err
	}
	err = apikey.New(db, *table).Revoke(ctx, id)
	switch {
	case errors.Is(err, apikey.ErrInvalidID):
		return fmt.Errorf("apikey revoke: %q is not a key id (16 lowercase hex digits)", truncate(id))
	case errors.Is(err, apikey.ErrNotFound):
		return fmt.Errorf("apikey revoke: no API key with id %s in table %s", id, *table)
	case err != nil:
		return err
	}
	fmt.Fprintf(e.stderr, "sendonce: revoked API key %s\n", id)
	return nil
}

var apikeyListCmd = &command{
	name:     "apikey list",
	synopsis: "apikey list --tenant TENANT [--table NAME]",
	summary:  "list a tenant's API keys: ids, creation and revocation times",
	help: `
Lists TENANT's API keys, oldest first: the key id (what "apikey revoke"
takes), when it was created, whether and when it was revoked. One JSON
object per line (--output json) or a table. Never a secret: the table keeps
only a hash, and the hash is not printed either.

It queries the table's "event" index where the table has it (template.yaml's
EventIndex=true), else scans the table (the default: its cost grows with the
table; see "sendonce help find"). Keys created by a sendonce
from before "apikey list" existed are not listed; they still work and can
still be revoked by id.

Flags:
  --tenant TENANT   the tenant (required)
  --table NAME      the table (default $SENDONCE_TABLE)
`,
	run: runAPIKeyList,
}

// apikeyView is one key as apikey list prints it.
type apikeyView struct {
	ID        string `json:"id"`
	Tenant    string `json:"tenant"`
	CreatedAt string `json:"created_at,omitempty"`
	Revoked   bool   `json:"revoked"`
	RevokedAt string `json:"revoked_at,omitempty"`
}

func runAPIKeyList(ctx context.Context, c *command, e env, args []string) error {
	g, table, tenant, err := tenantFlags(c, e, args)
	if err != nil {
		return err
	}
	format, err := g.format(c, e)
	if err != nil {
		return err
	}
	db, err := tableClient(ctx, c, e, g, table)
	if err != nil {
		return err
	}
	infos, err := apikey.New(db, table).List(ctx, tenant)
	if err != nil {
		return tenantError(c, tenant, err)
	}
	views := make([]apikeyView, len(infos))
	for i, k := range infos {
		views[i] = apikeyView{ID: k.ID, Tenant: k.Tenant, CreatedAt: timeString(k.CreatedAt), Revoked: k.Revoked, RevokedAt: timeString(k.RevokedAt)}
	}
	return writeList(e.stdout, format, views, []string{"ID", "TENANT", "CREATED", "REVOKED"}, func(v apikeyView) []string {
		return []string{v.ID, v.Tenant, v.CreatedAt, v.RevokedAt}
	})
}
