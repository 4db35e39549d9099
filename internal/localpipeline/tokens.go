package localpipeline

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/sendonce/sendonce/internal/redact"
	"github.com/sendonce/sendonce/internal/testenv"
)

// NewRedactKeySecret stores a random deployment key as a Secrets Manager
// secret on moto_server at motoEndpoint, as template.yaml's RedactKeySecret
// holds one per stack. It returns the secret's ARN, the value of every
// function's SENDONCE_REDACT_KEY_PARAM, and the Redactor of the key, to
// check log output with Scan.
func NewRedactKeySecret(ctx context.Context, motoEndpoint string) (string, *redact.Redactor, error) {
	var b [32]byte
	_, _ = rand.Read(b[:])
	key := hex.EncodeToString(b[:])
	rd, err := redact.New([]byte(key))
	if err != nil {
		return "", nil, err
	}
	sm := secretsmanager.NewFromConfig(testenv.Config(), func(o *secretsmanager.Options) { o.BaseEndpoint = aws.String(motoEndpoint) })
	out, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{
		Name: aws.String("sendonce-redact-key-" + testenv.RandomID()), SecretString: aws.String(key),
	})
	if err != nil {
		return "", nil, fmt.Errorf("localpipeline: create the redaction key secret: %w", err)
	}
	return aws.ToString(out.ARN), rd, nil
}
