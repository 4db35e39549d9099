// Package sendpath builds what the two functions that send share, the
// sender and the reconciler, from the environment (docs/configuration.md):
// the ledger on the one table, the channel → provider map, and the
// timeouts both must agree on. Each function's main reads its own
// settings beside it and wires the rest.
package sendpath

import (
	"context"
	"time"

	"github.com/sendonce/sendonce/internal/decide"
	"github.com/sendonce/sendonce/internal/lambdaenv"
	"github.com/sendonce/sendonce/internal/ledger/dynamoledger"
	"github.com/sendonce/sendonce/internal/provider/registry"
	"github.com/sendonce/sendonce/internal/sender"
	"github.com/sendonce/sendonce/provider"
)

// Settings are the variables the sender and the reconciler share.
// The table and the ledger's retention are every function's
// (lambdaenv.Function.Table and Ledger).
type Settings struct {
	ProviderTimeout time.Duration
	ClaimTimeout    time.Duration
	Settle          time.Duration
	// MaxAge is how long after its first claim the reconciler gives a row
	// up (decide.DefaultMaxAge documents its derivation).
	MaxAge time.Duration
	// RetryBase is the base of the reconciler's backoff of released rows
	// (decide.Backoff).
	RetryBase time.Duration
	// Validity is each class's default validity (SENDONCE_VALIDITY,
	// decide.ParseValidity; none when unset). The sender applies it to a
	// new message (sender.Config.Validity); the row keeps the result
	// (ledger.Entry.ValidUntil), which is what the reconciler judges.
	Validity map[string]time.Duration
}

// Read reads the shared variables into env's collected errors: call
// env.Err() (or Function.Ready) after reading the function's own
// variables too. Each default is the constant of the package that owns
// the setting.
func Read(env *lambdaenv.Env) Settings {
	return Settings{
		ProviderTimeout: env.Duration("SENDONCE_PROVIDER_TIMEOUT", decide.DefaultProviderTimeout),
		ClaimTimeout:    env.Duration("SENDONCE_CLAIM_TIMEOUT", sender.DefaultClaimTimeout),
		Settle:          env.Duration("SENDONCE_RECONCILE_SETTLE", decide.DefaultSettle),
		MaxAge:          env.Duration("SENDONCE_MAX_AGE", decide.DefaultMaxAge),
		RetryBase:       env.Duration("SENDONCE_RECONCILE_RETRY_BASE", decide.RetryBase),
		Validity:        lambdaenv.Value(env, "SENDONCE_VALIDITY", nil, decide.ParseValidity),
	}
}

// Deps are the clients built once per container.
type Deps struct {
	Ledger *dynamoledger.Ledger
	// Providers and Fallbacks are each channel's route (registry.ReadRoutes):
	// its first provider, and the rest in order.
	Providers map[string]provider.Adapter
	Fallbacks map[string][]provider.Adapter
}

// Build builds the ledger (f.Ledger) and the providers' routes
// (registry.ReadRoutes) with s's provider timeout. Every problem is
// recorded in f.Env: call f.Ready after.
func Build(ctx context.Context, f *lambdaenv.Function, s Settings) Deps {
	opts := registry.Clients(f.AWS)
	opts.Timeout = s.ProviderTimeout
	d := Deps{Ledger: f.Ledger(), Providers: map[string]provider.Adapter{}, Fallbacks: map[string][]provider.Adapter{}}
	for ch, route := range registry.ReadRoutes(ctx, f.Env, opts) {
		d.Providers[ch], d.Fallbacks[ch] = route[0], route[1:]
	}
	return d
}
