package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/config"

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
func redactor(ctx context.Context, e env) (*redact.Redactor, error) {
	get := func(name string) string { return strings.TrimSpace(e.getenv(name)) }
	if get(lambdaenv.EnvRedactKey) == "" && get(lambdaenv.EnvRedactKeyParam) == "" {
		return redact.Default(), nil
	}
	var res *secrets.Resolver
	if get(lambdaenv.EnvRedactKeyParam) != "" {
		var opts []func(*config.LoadOptions) error
		if r := get("AWS_REGION"); r != "" {
			opts = append(opts, config.WithRegion(r))
		}
		cfg, err := config.LoadDefaultConfig(ctx, opts...)
		if err != nil {
			return nil, fmt.Errorf("load AWS configuration: %w", err)
		}
		res = secrets.NewFromConfig(cfg)
	}
	return lambdaenv.Redaction(ctx, e.getenv, res)
}
