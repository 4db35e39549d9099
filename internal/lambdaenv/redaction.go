package lambdaenv

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/sendonce/sendonce/internal/redact"
	"github.com/sendonce/sendonce/internal/secrets"
)

// The variables of the address-redaction key (package redact).
const (
	// EnvRedactKey holds the key itself (local use).
	EnvRedactKey = "SENDONCE_REDACT_KEY"
	// EnvRedactKeyParam names where the key is stored (production): a
	// Secrets Manager secret (its ARN, as template.yaml passes it, or
	// "secretsmanager:NAME") or an SSM SecureString parameter.
	EnvRedactKeyParam = "SENDONCE_REDACT_KEY_PARAM"
)

// Redaction returns the Redactor the environment configures: keyed with
// the secret EnvRedactKeyParam names (read through res), or with
// EnvRedactKey; with neither set, a Redactor with a random key of this
// process (its Random method says so), whose tokens correlate within this
// process only. Setting both, a key shorter than redact.MinKeyLen bytes,
// or a secret that cannot be read is an error naming the variable, never
// showing the key.
func Redaction(ctx context.Context, getenv func(string) string, res *secrets.Resolver) (*redact.Redactor, error) {
	e := New(getenv)
	e.Secrets = res
	r := e.Redactor(ctx)
	if len(e.errs) > 0 {
		return nil, errors.Join(e.errs...)
	}
	return r, nil
}

// Redactor is Redaction reading through e: a problem is recorded in e
// (Secret) and the result is then nil.
func (e *Env) Redactor(ctx context.Context) *redact.Redactor {
	n := e.Problems()
	key := e.Secret(ctx, EnvRedactKey)
	switch {
	case e.Problems() > n:
		return nil
	case key == "":
		return redact.NewRandom()
	}
	name := EnvRedactKey
	if strings.TrimSpace(e.Getenv(EnvRedactKeyParam)) != "" {
		name = EnvRedactKeyParam
	}
	r, err := redact.New([]byte(key))
	if err != nil {
		e.Fail(fmt.Errorf("%s: %w", name, err))
		return nil
	}
	return r
}

// SetRedaction makes the environment's Redactor (Redaction) the default of
// package redact, for every log line, FAILED reason and error text of this
// process, and logs which key is in use (install). Call it once at
// start-up, before handling work.
func SetRedaction(ctx context.Context, log *slog.Logger, getenv func(string) string, res *secrets.Resolver) error {
	r, err := Redaction(ctx, getenv, res)
	if err != nil {
		return err
	}
	install(log, r)
	return nil
}

// install makes r the default of package redact and logs which key is in
// use: its redact.KeyID, the same in every function of a deployment, or a
// warning when the key is random.
func install(log *slog.Logger, r *redact.Redactor) {
	redact.SetDefault(r)
	if r.Random() {
		log.Warn("address tokens use a random key of this container: they correlate within it only, not across containers or with `sendonce inspect`; set "+EnvRedactKeyParam,
			"redact_key_id", r.KeyID())
		return
	}
	log.Info("address tokens keyed", "redact_key_id", r.KeyID())
}
