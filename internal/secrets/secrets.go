// Package secrets reads configuration secrets (provider tokens, SMTP
// passwords, callback secrets) from AWS Systems Manager Parameter Store or
// AWS Secrets Manager, once per process.
//
// A setting comes in two forms: the plain value (SENDONCE_X, for local
// runs) or the name of where it is stored (SENDONCE_X_PARAM, production).
// The name is
//
//   - an SSM parameter name or ARN ("/sendonce/prod/twilio-token"), read
//     with GetParameter WithDecryption (SecureString);
//   - "arn:aws:secretsmanager:..." or "secretsmanager:NAME", read with
//     GetSecretValue (SecretString).
//
// A Resolver caches each value for its lifetime, so a Lambda container
// reads a secret once, not per message. Errors name the parameter and
// never hold the value.
package secrets

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
)

// SecretsManagerPrefix marks a name to be read from Secrets Manager.
const SecretsManagerPrefix = "secretsmanager:"

// ErrEmpty is wrapped by the error of a secret that exists but is empty.
var ErrEmpty = errors.New("secret is empty")

// SSMAPI is the part of *ssm.Client a Resolver uses.
type SSMAPI interface {
	GetParameter(ctx context.Context, in *ssm.GetParameterInput, optFns ...func(*ssm.Options)) (*ssm.GetParameterOutput, error)
}

// SecretsManagerAPI is the part of *secretsmanager.Client a Resolver uses.
type SecretsManagerAPI interface {
	GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, optFns ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

// Resolver resolves and caches secrets. It is safe for concurrent use;
// concurrent first reads of one name make a single call.
type Resolver struct {
	ssm SSMAPI
	sm  SecretsManagerAPI

	mu    sync.Mutex
	cache map[string]*entry
}

type entry struct {
	done  chan struct{}
	value string
	err   error
}

// New returns a Resolver over the given clients.
func New(ssmClient SSMAPI, smClient SecretsManagerAPI) *Resolver {
	return &Resolver{ssm: ssmClient, sm: smClient, cache: map[string]*entry{}}
}

// NewFromConfig returns a Resolver with SSM and Secrets Manager clients
// built from cfg (endpoints from the SDK's standard variables).
func NewFromConfig(cfg aws.Config) *Resolver {
	return New(ssm.NewFromConfig(cfg), secretsmanager.NewFromConfig(cfg))
}

// Resolve returns plain when paramName is empty, and otherwise the value
// stored under paramName (see the package doc), read once and cached.
//
// A failed read is not cached. The error names paramName, never the
// value; it wraps the AWS error (errors.As works) and ErrEmpty for a
// secret with no value.
func (r *Resolver) Resolve(ctx context.Context, plain, paramName string) (string, error) {
	if paramName == "" {
		return plain, nil
	}
	r.mu.Lock()
	e, ok := r.cache[paramName]
	if ok {
		r.mu.Unlock()
		select {
		case <-e.done:
		case <-ctx.Done():
			return "", fmt.Errorf("secrets: read %s: %w", paramName, ctx.Err())
		}
		if e.err == nil {
			return e.value, nil
		}
		// The read this call waited for failed; try again below.
		r.mu.Lock()
		if r.cache[paramName] == e {
			delete(r.cache, paramName)
		}
	}
	e = &entry{done: make(chan struct{})}
	r.cache[paramName] = e
	r.mu.Unlock()

	e.value, e.err = r.read(ctx, paramName)
	close(e.done)
	if e.err != nil {
		r.mu.Lock()
		if r.cache[paramName] == e {
			delete(r.cache, paramName)
		}
		r.mu.Unlock()
		return "", e.err
	}
	return e.value, nil
}

func (r *Resolver) read(ctx context.Context, name string) (string, error) {
	if id, ok := secretsManagerID(name); ok {
		if r.sm == nil {
			return "", fmt.Errorf("secrets: read secret %s: no Secrets Manager client", name)
		}
		out, err := r.sm.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(id)})
		if err != nil {
			return "", fmt.Errorf("secrets: read secret %s: %w", name, err)
		}
		if aws.ToString(out.SecretString) == "" {
			return "", fmt.Errorf("secrets: read secret %s: %w (or binary)", name, ErrEmpty)
		}
		return aws.ToString(out.SecretString), nil
	}
	if r.ssm == nil {
		return "", fmt.Errorf("secrets: read SSM parameter %s: no SSM client", name)
	}
	out, err := r.ssm.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(name), WithDecryption: aws.Bool(true)})
	if err != nil {
		return "", fmt.Errorf("secrets: read SSM parameter %s: %w", name, err)
	}
	if out.Parameter == nil || aws.ToString(out.Parameter.Value) == "" {
		return "", fmt.Errorf("secrets: read SSM parameter %s: %w", name, ErrEmpty)
	}
	return aws.ToString(out.Parameter.Value), nil
}

// secretsManagerID reports whether name is a Secrets Manager reference
// and returns the SecretId to read.
func secretsManagerID(name string) (string, bool) {
	switch {
	case strings.HasPrefix(name, "arn:aws:secretsmanager:"), strings.HasPrefix(name, "arn:aws-"):
		if strings.Contains(name, ":secretsmanager:") {
			return name, true
		}
	case strings.HasPrefix(name, SecretsManagerPrefix):
		return strings.TrimPrefix(name, SecretsManagerPrefix), true
	}
	return "", false
}
