package lambdaenv

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"

	"github.com/sendonce/sendonce/internal/redact"
	"github.com/sendonce/sendonce/internal/secrets"
	"github.com/sendonce/sendonce/internal/testenv"
)

const testKey = "0123456789abcdef0123456789abcdef-local"

func getenv(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestRedactionFromEnv(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	want, err := redact.New([]byte(testKey))
	if err != nil {
		t.Fatal(err)
	}
	r, err := Redaction(ctx, getenv(map[string]string{EnvRedactKey: " " + testKey + " "}), nil)
	if err != nil || r.Random() || r.Address("+15551234567") != want.Address("+15551234567") {
		t.Fatalf("plain key: %v, %v; want the key's tokens", r, err)
	}
	r, err = Redaction(ctx, getenv(nil), nil)
	if err != nil || !r.Random() {
		t.Errorf("no key: %v, %v; want a random Redactor", r, err)
	}
	bad := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"Both", map[string]string{EnvRedactKey: testKey, EnvRedactKeyParam: "/x"}, "both set"},
		{"Short", map[string]string{EnvRedactKey: "tooshort"}, EnvRedactKey + ": redact: key is 8 bytes"},
		{"ParamNoResolver", map[string]string{EnvRedactKeyParam: "/x"}, EnvRedactKeyParam},
	}
	for _, tt := range bad {
		_, err := Redaction(ctx, getenv(tt.env), nil)
		if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "tooshort") {
			t.Errorf("%s: err = %v, want it to say %q and not show the key", tt.name, err, tt.want)
		}
	}
}

// TestRedactionFromStores reads the key from Secrets Manager (as
// template.yaml configures it) and from an SSM SecureString on
// moto_server: both give the tokens of the same key given plainly.
func TestRedactionFromStores(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ssmc, smc := motoStores(t)
	res := secrets.New(ssmc, smc)
	name := "sendonce-redact-" + testenv.RandomID()
	sec, err := smc.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String(name), SecretString: aws.String(testKey)})
	if err != nil {
		t.Fatalf("CreateSecret: %v", err)
	}
	param := "/sendonce/test/" + name
	if _, err := ssmc.PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String(param), Value: aws.String(testKey), Type: ssmtypes.ParameterTypeSecureString}); err != nil {
		t.Fatalf("PutParameter: %v", err)
	}
	want, _ := redact.New([]byte(testKey))
	for _, ref := range []string{aws.ToString(sec.ARN), "secretsmanager:" + name, param} {
		r, err := Redaction(ctx, getenv(map[string]string{EnvRedactKeyParam: ref}), res)
		if err != nil || r.Random() || r.KeyID() != want.KeyID() || r.Address("ana@example.com") != want.Address("ana@example.com") {
			t.Errorf("%s: %v, %v; want the stored key's tokens", ref, r, err)
		}
	}
	if _, err := Redaction(ctx, getenv(map[string]string{EnvRedactKeyParam: "secretsmanager:absent-" + name}), res); err == nil || !strings.Contains(err.Error(), EnvRedactKeyParam) {
		t.Errorf("absent secret: err = %v, want one naming %s", err, EnvRedactKeyParam)
	}
}

// TestSetRedaction installs the key as redact's default and logs its id,
// or warns when the key is random. Not parallel: it changes the default.
func TestSetRedaction(t *testing.T) {
	old := redact.Default()
	t.Cleanup(func() { redact.SetDefault(old) })
	ctx := context.Background()
	want, _ := redact.New([]byte(testKey))
	var buf strings.Builder
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	if err := SetRedaction(ctx, log, getenv(map[string]string{EnvRedactKey: testKey}), nil); err != nil {
		t.Fatal(err)
	}
	if redact.Address("+15551234567") != want.Address("+15551234567") {
		t.Error("SetRedaction did not install the key")
	}
	var line struct {
		Level string `json:"level"`
		ID    string `json:"redact_key_id"`
	}
	if err := json.Unmarshal([]byte(buf.String()), &line); err != nil || line.ID != want.KeyID() || line.Level != "INFO" || strings.Contains(buf.String(), testKey) {
		t.Errorf("start-up log %q: want INFO with redact_key_id %s and no key", buf.String(), want.KeyID())
	}
	buf.Reset()
	if err := SetRedaction(ctx, log, getenv(nil), nil); err != nil {
		t.Fatal(err)
	}
	if !redact.Default().Random() || !strings.Contains(buf.String(), `"level":"WARN"`) || !strings.Contains(buf.String(), EnvRedactKeyParam) {
		t.Errorf("no key: default random %v, log %q; want a WARN naming %s", redact.Default().Random(), buf.String(), EnvRedactKeyParam)
	}
	if err := SetRedaction(ctx, log, getenv(map[string]string{EnvRedactKey: "short"}), nil); err == nil {
		t.Error("a short key was accepted")
	}
}

// TestEnvSecretFromSSM reads a secret stored as an SSM SecureString on
// moto_server; a name that is not stored is a problem naming X_PARAM.
func TestEnvSecretFromSSM(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ssmc, smc := motoStores(t)
	param := "/sendonce/test/secret-" + testenv.RandomID()
	if _, err := ssmc.PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String(param), Value: aws.String("stored"), Type: ssmtypes.ParameterTypeSecureString}); err != nil {
		t.Fatalf("PutParameter: %v", err)
	}
	e := New(getenv(map[string]string{"S_PARAM": param, "GONE_PARAM": param + "-absent"}))
	e.Secrets = secrets.New(ssmc, smc)
	if got := e.Secret(ctx, "S"); got != "stored" || e.Err() != nil {
		t.Fatalf("Secret = %q, %v; want the stored value", got, e.Err())
	}
	if got := e.Secret(ctx, "GONE"); got != "" || e.Err() == nil || !strings.Contains(e.Err().Error(), "GONE_PARAM") {
		t.Errorf("absent parameter: %q, %v; want an error naming GONE_PARAM", got, e.Err())
	}
}

// motoStores returns SSM and Secrets Manager clients of moto_server.
func motoStores(t *testing.T) (*ssm.Client, *secretsmanager.Client) {
	t.Helper()
	ep := testenv.MotoEndpoint(t)
	cfg := testenv.Config()
	return ssm.NewFromConfig(cfg, func(o *ssm.Options) { o.BaseEndpoint = aws.String(ep) }),
		secretsmanager.NewFromConfig(cfg, func(o *secretsmanager.Options) { o.BaseEndpoint = aws.String(ep) })
}
