package api

import (
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/api/ratelimit"
	"github.com/sendonce/sendonce/internal/lambdaenv"
)

// readEnv reads vars as the api function does: through one lambdaenv.Env.
func readEnv(vars map[string]string) (Env, error) {
	env := lambdaenv.New(func(k string) string { return vars[k] })
	e := ReadEnv(env)
	return e, env.Err()
}

// TestReadEnvReportsEveryProblem: every wrong variable of the api
// function is named in the one error, not only the first.
func TestReadEnvReportsEveryProblem(t *testing.T) {
	t.Parallel()
	_, err := readEnv(map[string]string{EnvRetention: "10s", EnvTenantRate: "lots", EnvRecipientRate: "5/1m"})
	if err == nil {
		t.Fatal("ReadEnv accepted three bad settings")
	}
	for _, want := range []string{EnvQueueURL + " is required", EnvRetention + `="10s"`, EnvTenantRate + ": "} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("err = %q\nwant it to say %s", err, want)
		}
	}
	if strings.Contains(err.Error(), EnvRecipientRate) {
		t.Errorf("err = %q names the good %s", err, EnvRecipientRate)
	}
}

func TestReadEnv(t *testing.T) {
	t.Parallel()
	base := map[string]string{EnvQueueURL: "https://sqs/q"}
	tests := []struct {
		name    string
		set     map[string]string
		want    Env
		wantErr string
	}{
		{"Defaults", nil, Env{QueueURL: "https://sqs/q", Retention: DefaultRetention, TenantRate: DefaultTenantRate, RecipientRate: DefaultRecipientRate}, ""},
		{"Overrides", map[string]string{EnvRetention: "48h", EnvTenantRate: "10/1s", EnvRecipientRate: "2/1h"},
			Env{QueueURL: "https://sqs/q", Retention: 48 * time.Hour, TenantRate: ratelimit.Rate{Limit: 10, Window: time.Second}, RecipientRate: ratelimit.Rate{Limit: 2, Window: time.Hour}}, ""},
		{"NoQueue", map[string]string{EnvQueueURL: ""}, Env{}, EnvQueueURL},
		{"BadRetention", map[string]string{EnvRetention: "1d"}, Env{}, EnvRetention},
		{"ShortRetention", map[string]string{EnvRetention: "10s"}, Env{}, EnvRetention},
		{"BadTenantRate", map[string]string{EnvTenantRate: "lots"}, Env{}, EnvTenantRate},
		{"BadRecipientRate", map[string]string{EnvRecipientRate: "0/1m"}, Env{}, EnvRecipientRate},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := map[string]string{}
			for k, v := range base {
				env[k] = v
			}
			for k, v := range tt.set {
				env[k] = v
			}
			got, err := readEnv(env)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("ReadEnv = %v, want an error naming %s", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("ReadEnv = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}
