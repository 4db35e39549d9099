package api

import (
	"strings"
	"testing"
)

// TestLoadEnvReportsEveryProblem: every wrong variable of the api
// function is named in the one error, not only the first.
func TestLoadEnvReportsEveryProblem(t *testing.T) {
	t.Parallel()
	vars := map[string]string{EnvRetention: "10s", EnvTenantRate: "lots", EnvRecipientRate: "5/1m"}
	_, err := LoadEnv(func(k string) string { return vars[k] })
	if err == nil {
		t.Fatal("LoadEnv accepted four bad settings")
	}
	for _, want := range []string{EnvTable + " is required", EnvQueueURL + " is required", EnvRetention + `="10s"`, EnvTenantRate + ": "} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("err = %q\nwant it to say %s", err, want)
		}
	}
	if strings.Contains(err.Error(), EnvRecipientRate) {
		t.Errorf("err = %q names the good %s", err, EnvRecipientRate)
	}
}
