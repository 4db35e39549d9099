package main

import (
	"context"
	"strings"

	"github.com/sendonce/sendonce/internal/lambdaenv"
	"github.com/sendonce/sendonce/internal/redact"
	"github.com/sendonce/sendonce/internal/secrets"
)

// redactor returns the Redactor that commands printing ledger rows use:
// keyed with the deployment's key, from SENDONCE_REDACT_KEY_PARAM (the
// ARN of the stack's RedactKeySecret, read with the SDK's standard
// configuration) or SENDONCE_REDACT_KEY, so that its tokens match the
// functions' log lines; with neither set, this process's random key
// (tokens that match nothing outside this run).
func (a *app) redactor(ctx context.Context) (*redact.Redactor, error) {
	get := func(name string) string { return strings.TrimSpace(a.getenv(name)) }
	if get(lambdaenv.EnvRedactKey) == "" && get(lambdaenv.EnvRedactKeyParam) == "" {
		return redact.Default(), nil
	}
	var res *secrets.Resolver
	if get(lambdaenv.EnvRedactKeyParam) != "" {
		// The key is in Secrets Manager or SSM: the SDK's standard
		// configuration, with --region, --profile and --endpoint-url.
		cfg, err := a.awsConfig(ctx)
		if err != nil {
			return nil, err
		}
		res = secrets.NewFromConfig(cfg)
	}
	return lambdaenv.Redaction(ctx, a.getenv, res)
}
