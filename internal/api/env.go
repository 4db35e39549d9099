package api

import (
	"fmt"
	"strings"
	"time"

	"github.com/sendonce/sendonce/internal/lambdaenv"
)

// Environment variables of the api function (docs/configuration.md).
const (
	EnvTable         = lambdaenv.EnvTable
	EnvQueueURL      = "SENDONCE_QUEUE_URL"
	EnvRetention     = "SENDONCE_API_RETENTION"
	EnvTenantRate    = "SENDONCE_API_TENANT_RATE"
	EnvRecipientRate = "SENDONCE_API_RECIPIENT_RATE"
)

// Env is the api function's configuration read from its environment.
type Env struct {
	Table         string
	QueueURL      string
	Retention     time.Duration
	TenantRate    Rate
	RecipientRate Rate
}

// LoadEnv reads the configuration through getenv (os.Getenv) with
// ReadEnv. Its error names every wrong variable and what is wrong with it.
func LoadEnv(getenv func(string) string) (Env, error) {
	env := lambdaenv.New(getenv)
	e := ReadEnv(env)
	if err := env.Err(); err != nil {
		return Env{}, err
	}
	return e, nil
}

// ReadEnv reads the configuration through env, recording every problem
// there (call env.Err, or lambdaenv.Function.Ready, after):
//
//	SENDONCE_TABLE               required
//	SENDONCE_QUEUE_URL           required
//	SENDONCE_API_RETENTION       Go duration, default DefaultRetention, more than DefaultLease
//	SENDONCE_API_TENANT_RATE     LIMIT/WINDOW, default DefaultTenantRate
//	SENDONCE_API_RECIPIENT_RATE  LIMIT/WINDOW, default DefaultRecipientRate
func ReadEnv(env *lambdaenv.Env) Env {
	e := Env{
		Table:         env.Required(EnvTable),
		QueueURL:      env.Required(EnvQueueURL),
		Retention:     env.Duration(EnvRetention, DefaultRetention),
		TenantRate:    lambdaenv.Value(env, EnvTenantRate, DefaultTenantRate, ParseRate),
		RecipientRate: lambdaenv.Value(env, EnvRecipientRate, DefaultRecipientRate, ParseRate),
	}
	if e.Retention <= DefaultLease {
		env.Fail(fmt.Errorf("%s=%q: want a Go duration longer than %s, e.g. 24h", EnvRetention, strings.TrimSpace(env.Getenv(EnvRetention)), DefaultLease))
	}
	return e
}
