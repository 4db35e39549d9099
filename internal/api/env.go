package api

import (
	"fmt"
	"time"
)

// Environment variables of the api function (see also README.md, Configuration).
const (
	EnvTable         = "SENDONCE_TABLE"
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

// LoadEnv reads the configuration through getenv (os.Getenv):
//
//	SENDONCE_TABLE               required
//	SENDONCE_QUEUE_URL           required
//	SENDONCE_API_RETENTION       Go duration, default 24h, more than the 30s lease
//	SENDONCE_API_TENANT_RATE     LIMIT/WINDOW, default 100/1m
//	SENDONCE_API_RECIPIENT_RATE  LIMIT/WINDOW, default 5/1m
//
// It returns an error naming the variable and what is wrong with it.
func LoadEnv(getenv func(string) string) (Env, error) {
	e := Env{
		Table:         getenv(EnvTable),
		QueueURL:      getenv(EnvQueueURL),
		Retention:     DefaultRetention,
		TenantRate:    DefaultTenantRate,
		RecipientRate: DefaultRecipientRate,
	}
	if e.Table == "" {
		return Env{}, fmt.Errorf("%s is required: the sendonce table", EnvTable)
	}
	if e.QueueURL == "" {
		return Env{}, fmt.Errorf("%s is required: the notification queue's URL", EnvQueueURL)
	}
	if v := getenv(EnvRetention); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= DefaultLease {
			return Env{}, fmt.Errorf("%s=%q: want a Go duration longer than %s, e.g. 24h", EnvRetention, v, DefaultLease)
		}
		e.Retention = d
	}
	for _, r := range []struct {
		name string
		dst  *Rate
	}{{EnvTenantRate, &e.TenantRate}, {EnvRecipientRate, &e.RecipientRate}} {
		if v := getenv(r.name); v != "" {
			rate, err := ParseRate(v)
			if err != nil {
				return Env{}, fmt.Errorf("%s: %w", r.name, err)
			}
			*r.dst = rate
		}
	}
	return e, nil
}
