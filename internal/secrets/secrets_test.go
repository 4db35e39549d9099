package secrets_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"

	"github.com/sendonce/sendonce/internal/secrets"
	"github.com/sendonce/sendonce/internal/testenv"
)

// countingSSM counts GetParameter calls that reach moto_server.
type countingSSM struct {
	*ssm.Client
	calls atomic.Int32
}

func (c *countingSSM) GetParameter(ctx context.Context, in *ssm.GetParameterInput, optFns ...func(*ssm.Options)) (*ssm.GetParameterOutput, error) {
	c.calls.Add(1)
	return c.Client.GetParameter(ctx, in, optFns...)
}

type countingSM struct {
	*secretsmanager.Client
	calls atomic.Int32
}

func (c *countingSM) GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, optFns ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error) {
	c.calls.Add(1)
	return c.Client.GetSecretValue(ctx, in, optFns...)
}

type bundle struct {
	ssm *countingSSM
	sm  *countingSM
	r   *secrets.Resolver
}

func setup(t *testing.T) bundle {
	t.Helper()
	ep := testenv.MotoEndpoint(t)
	cfg := testenv.Config()
	b := bundle{
		ssm: &countingSSM{Client: ssm.NewFromConfig(cfg, func(o *ssm.Options) { o.BaseEndpoint = aws.String(ep) })},
		sm:  &countingSM{Client: secretsmanager.NewFromConfig(cfg, func(o *secretsmanager.Options) { o.BaseEndpoint = aws.String(ep) })},
	}
	b.r = secrets.New(b.ssm, b.sm)
	return b
}

func TestResolveSSMOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	name := "/sendonce/test/" + testenv.RandomID()
	const value = "tok-ssm-value"
	if _, err := b.ssm.PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String(name), Value: aws.String(value), Type: ssmtypes.ParameterTypeSecureString}); err != nil {
		t.Fatalf("PutParameter: %v", err)
	}
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			got, err := b.r.Resolve(ctx, "", name)
			if err != nil || got != value {
				t.Errorf("Resolve = %q, %v; want %q", got, err, value)
			}
		})
	}
	wg.Wait()
	if got := b.ssm.calls.Load(); got != 1 {
		t.Errorf("GetParameter calls = %d for 50 resolves, want 1", got)
	}
}

func TestResolveSecretsManager(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	name := "sendonce-test-" + testenv.RandomID()
	const value = "tok-sm-value"
	out, err := b.sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String(name), SecretString: aws.String(value)})
	if err != nil {
		t.Fatalf("CreateSecret: %v", err)
	}
	for _, ref := range []string{secrets.SecretsManagerPrefix + name, aws.ToString(out.ARN), secrets.SecretsManagerPrefix + name} {
		got, err := b.r.Resolve(ctx, "", ref)
		if err != nil || got != value {
			t.Errorf("Resolve(%s) = %q, %v; want %q", ref, got, err, value)
		}
	}
	if got := b.sm.calls.Load(); got != 2 {
		t.Errorf("GetSecretValue calls = %d, want 2 (one per distinct reference)", got)
	}
	if got := b.ssm.calls.Load(); got != 0 {
		t.Errorf("GetParameter calls = %d, want 0", got)
	}
}

func TestResolvePlain(t *testing.T) {
	t.Parallel()
	r := secrets.New(nil, nil)
	got, err := r.Resolve(context.Background(), "plain-value", "")
	if err != nil || got != "plain-value" {
		t.Errorf("Resolve = %q, %v; want plain-value", got, err)
	}
}

func TestResolveErrors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	missing := "/sendonce/missing/" + testenv.RandomID()
	for range 2 {
		_, err := b.r.Resolve(ctx, "", missing)
		if err == nil || !strings.Contains(err.Error(), missing) {
			t.Errorf("err = %v, want one naming %s", err, missing)
		}
	}
	if got := b.ssm.calls.Load(); got != 2 {
		t.Errorf("calls = %d, want 2: a failure is not cached", got)
	}
	_, err := b.r.Resolve(ctx, "", secrets.SecretsManagerPrefix+"missing-"+testenv.RandomID())
	if err == nil || !strings.Contains(err.Error(), "secretsmanager:missing-") {
		t.Errorf("err = %v, want one naming the secret", err)
	}

	// An empty value is an error that names the parameter.
	name := "/sendonce/empty/" + testenv.RandomID()
	r := secrets.New(&fixedSSM{value: ""}, nil)
	if _, err := r.Resolve(ctx, "", name); !errors.Is(err, secrets.ErrEmpty) || !strings.Contains(err.Error(), name) {
		t.Errorf("err = %v, want ErrEmpty naming %s", err, name)
	}
}

// TestErrorHoldsNoValue: even when the AWS error text would echo
// something, the value itself never reaches the error (it was never read).
func TestErrorHoldsNoValue(t *testing.T) {
	t.Parallel()
	r := secrets.New(&fixedSSM{value: "super-secret", err: errors.New("throttled")}, nil)
	_, err := r.Resolve(context.Background(), "", "/p")
	if err == nil || strings.Contains(err.Error(), "super-secret") || !strings.Contains(err.Error(), "/p") {
		t.Errorf("err = %v", err)
	}
}

type fixedSSM struct {
	value string
	err   error
}

func (f *fixedSSM) GetParameter(context.Context, *ssm.GetParameterInput, ...func(*ssm.Options)) (*ssm.GetParameterOutput, error) {
	if f.err != nil {
		return nil, f.err
	}
	return &ssm.GetParameterOutput{Parameter: &ssmtypes.Parameter{Value: aws.String(f.value)}}, nil
}
