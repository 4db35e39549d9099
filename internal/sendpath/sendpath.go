// Package sendpath builds what the two functions that send share, the
// sender and the reconciler, from the environment (docs/configuration.md):
// the ledger on the one table, the channel → provider map, the timeouts
// both must agree on and the template cache's TTL. Each function's main
// reads its own settings beside it and wires the rest.
package sendpath

import (
	"context"
	"time"

	"github.com/sendonce/sendonce/internal/decide"
	"github.com/sendonce/sendonce/internal/lambdaenv"
	"github.com/sendonce/sendonce/internal/ledger/dynamoledger"
	"github.com/sendonce/sendonce/internal/opstate"
	"github.com/sendonce/sendonce/internal/pace"
	"github.com/sendonce/sendonce/internal/provider/registry"
	"github.com/sendonce/sendonce/internal/render"
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
	// Rates are the providers' send rates (SENDONCE_PROVIDER_RATES,
	// "provider=sends-per-second,..."; package pace), shared by every
	// sender and reconcile worker; a provider not listed is not paced.
	Rates map[string]int
	// TemplateCache is how long a resolved stored template is cached per
	// container, read from EnvTemplateCache, as render.Config.CacheTTL
	// takes it: negative when the variable turns the cache off ("0s").
	TemplateCache time.Duration
	// Validity is each class's default validity (SENDONCE_VALIDITY,
	// decide.ParseValidity; none when unset). The sender applies it to a
	// new message (sender.Config.Validity); the row keeps the result
	// (ledger.Entry.ValidUntil), which is what the reconciler judges.
	Validity map[string]time.Duration
}

// EnvTemplateCache is the variable of Settings.TemplateCache.
const EnvTemplateCache = "SENDONCE_TEMPLATE_CACHE"

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
		TemplateCache:   templateCache(env.CacheTTL(EnvTemplateCache, render.DefaultCacheTTL)),
		Validity:        lambdaenv.Value(env, "SENDONCE_VALIDITY", nil, decide.ParseValidity),
		Rates:           lambdaenv.Value(env, "SENDONCE_PROVIDER_RATES", nil, pace.ParseRates),
	}
}

// templateCache turns the variable's 0 (no cache) into the negative TTL
// render.Config takes for it; a zero there means the default.
func templateCache(ttl time.Duration) time.Duration {
	if ttl == 0 {
		return -1
	}
	return ttl
}

// PaceMaxWait bounds how long a send waits for its provider's rate
// (package pace) before it is released, nothing sent, to be retried.
const PaceMaxWait = 2 * time.Second

// Deps are the clients built once per container.
type Deps struct {
	Ledger *dynamoledger.Ledger
	// Providers and Fallbacks are each channel's route (registry.ReadRoutes):
	// its first provider, and the rest in order.
	Providers map[string]provider.Adapter
	Fallbacks map[string][]provider.Adapter
}

// Build builds the ledger (f.Ledger) and the providers' routes
// (registry.ReadRoutes) with s's provider timeout, the adapters logging
// to f.Log. Every problem is recorded in f.Env: call f.Ready after.
func Build(ctx context.Context, f *lambdaenv.Function, s Settings) Deps {
	opts := registry.Clients(f.AWS)
	opts.Timeout = s.ProviderTimeout
	opts.Logger = f.Log
	d := Deps{Ledger: f.Ledger(), Providers: map[string]provider.Adapter{}, Fallbacks: map[string][]provider.Adapter{}}
	// One limiter per container: the providers of every route share it,
	// and its counters (in the table) are shared with every container.
	ops := opstate.Store{DB: f.DB, Table: f.Table}
	limiter, err := pace.New(&pace.DynamoStore{DB: f.DB, Table: f.Table}, s.Rates, pace.Options{
		// A Retry-After's pause is what `sendonce status` shows.
		OnPause: func(ctx context.Context, provider string, until time.Time) {
			if err := ops.ProviderState(ctx, provider, opstate.Paused, until); err != nil {
				f.Log.Warn("record the provider's pause", "provider", provider, "error", err)
			}
		},
	})
	f.Env.Fail(err)
	for ch, route := range registry.ReadRoutes(ctx, f.Env, opts) {
		for i, a := range route {
			route[i] = pace.Wrap(a, limiter, PaceMaxWait)
		}
		d.Providers[ch], d.Fallbacks[ch] = route[0], route[1:]
	}
	return d
}
