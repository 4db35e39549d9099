package api

import (
	"fmt"
	"strings"
	"time"

	"github.com/sendonce/sendonce/internal/api/ratelimit"
	"github.com/sendonce/sendonce/internal/lambdaenv"
)

// Environment variables of the api function (docs/configuration.md),
// beside those every function reads (lambdaenv.Start: the table, the log
// level, the redaction key).
const (
	EnvQueueURL      = "SENDONCE_QUEUE_URL"
	EnvRetention     = "SENDONCE_API_RETENTION"
	EnvTenantRate    = "SENDONCE_API_TENANT_RATE"
	EnvRecipientRate = "SENDONCE_API_RECIPIENT_RATE"
)

// Env is the api function's own configuration.
type Env struct {
	QueueURL      string
	Retention     time.Duration
	TenantRate    ratelimit.Rate
	RecipientRate ratelimit.Rate
}

// ReadEnv reads the api function's own variables through env, the one
// reader of every function (lambdaenv), recording every problem there:
// call env.Err, or lambdaenv.Function.Ready, after.
//
//	SENDONCE_QUEUE_URL           required
//	SENDONCE_API_RETENTION       Go duration, default DefaultRetention, more than DefaultLease
//	SENDONCE_API_TENANT_RATE     LIMIT/WINDOW, default DefaultTenantRate
//	SENDONCE_API_RECIPIENT_RATE  LIMIT/WINDOW, default DefaultRecipientRate
func ReadEnv(env *lambdaenv.Env) Env {
	e := Env{
		QueueURL:      env.Required(EnvQueueURL),
		Retention:     env.Duration(EnvRetention, DefaultRetention),
		TenantRate:    lambdaenv.Value(env, EnvTenantRate, DefaultTenantRate, ratelimit.ParseRate),
		RecipientRate: lambdaenv.Value(env, EnvRecipientRate, DefaultRecipientRate, ratelimit.ParseRate),
	}
	if e.Retention <= DefaultLease {
		env.Fail(fmt.Errorf("%s=%q: want a Go duration longer than %s, e.g. 24h", EnvRetention, strings.TrimSpace(env.Getenv(EnvRetention)), DefaultLease))
	}
	return e
}
