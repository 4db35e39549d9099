// Package sendpath builds what the two functions that send share, the
// sender and the reconciler, from the environment (README.md, Configuration): the
// ledger on the one table, the channel → provider map, and the timeouts
// both must agree on. Each function's main reads its own settings beside
// it and wires the rest.
package sendpath

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"

	"github.com/sendonce/sendonce/internal/decide"
	"github.com/sendonce/sendonce/internal/lambdaenv"
	"github.com/sendonce/sendonce/internal/ledger/dynamoledger"
	"github.com/sendonce/sendonce/internal/provider"
	"github.com/sendonce/sendonce/internal/provider/registry"
	"github.com/sendonce/sendonce/internal/sender"
)

// Settings are the variables the sender and the reconciler share.
type Settings struct {
	Table           string
	ProviderTimeout time.Duration
	ClaimTimeout    time.Duration
	Retention       time.Duration
	Settle          time.Duration
	// MaxAge is how long after its first claim the reconciler gives a row
	// up (decide.DefaultMaxAge documents its derivation).
	MaxAge time.Duration
	// RetryBase is the base of the reconciler's backoff of released rows
	// (decide.Backoff).
	RetryBase time.Duration
}

// Read reads the shared variables into env's collected errors: call
// env.Err() after reading the function's own variables too.
func Read(env *lambdaenv.Env) Settings {
	return Settings{
		Table:           env.Required("SENDONCE_TABLE"),
		ProviderTimeout: env.Duration("SENDONCE_PROVIDER_TIMEOUT", decide.DefaultProviderTimeout),
		ClaimTimeout:    env.Duration("SENDONCE_CLAIM_TIMEOUT", sender.DefaultClaimTimeout),
		Retention:       env.Duration("SENDONCE_RETENTION", dynamoledger.DefaultRetention),
		Settle:          env.Duration("SENDONCE_RECONCILE_SETTLE", decide.DefaultSettle),
		MaxAge:          env.Duration("SENDONCE_MAX_AGE", decide.DefaultMaxAge),
		RetryBase:       env.Duration("SENDONCE_RECONCILE_RETRY_BASE", decide.RetryBase),
	}
}

// Deps are the clients built once per container.
type Deps struct {
	AWS       aws.Config
	Ledger    *dynamoledger.Ledger
	Providers map[string]provider.Sender
}

// Build loads the AWS configuration from the SDK's standard variables and
// builds the ledger and the providers. Its error names the step that failed.
func Build(ctx context.Context, s Settings, getenv func(string) string) (Deps, error) {
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return Deps{}, fmt.Errorf("load AWS configuration: %w", err)
	}
	l, err := dynamoledger.New(lambdaenv.DynamoDB(awsCfg, getenv), s.Table, dynamoledger.WithRetention(s.Retention))
	if err != nil {
		return Deps{}, err
	}
	providers, err := registry.FromEnv(ctx, getenv, awsCfg)
	if err != nil {
		return Deps{}, err
	}
	return Deps{AWS: awsCfg, Ledger: l, Providers: providers}, nil
}
