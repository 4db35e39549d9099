package localpipeline

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/sendonce/sendonce/internal/redact"
	"github.com/sendonce/sendonce/internal/testenv"
)

// anyTokenRE matches anything shaped like an address token of any length,
// so an unkeyed token of the old 12-digit form is caught too.
var anyTokenRE = regexp.MustCompile(`\b(?:phone|email|push|addr):[0-9a-f]{6,64}\b`)

// LogLeaks returns one line per way the output logs of function instance
// name could expose an address of addrs:
//
//   - the raw address;
//   - an address token that is not rd's token of one of addrs: unkeyed (a
//     reader could reverse it by hashing candidates) or made under another
//     key;
//   - no start-up line saying the instance's tokens are keyed with rd's key
//     (its redact_key_id), or a line saying they use a random key.
//
// rd is the Redactor of the deployment's key.
func LogLeaks(name, logs string, rd *redact.Redactor, addrs []string) []string {
	var out []string
	keyed := make(map[string]bool, len(addrs))
	for _, a := range addrs {
		if strings.Contains(logs, a) {
			out = append(out, name+": raw address "+a)
		}
		keyed[rd.Address(a)] = true
	}
	bad := map[string]bool{}
	for _, tok := range anyTokenRE.FindAllString(logs, -1) {
		if !keyed[tok] && !bad[tok] {
			bad[tok] = true
			out = append(out, name+": address token "+tok+" not made under the deployment's key")
		}
	}
	if !strings.Contains(logs, fmt.Sprintf(`"redact_key_id":%q`, rd.KeyID())) {
		out = append(out, name+": no start-up line with the deployment's redact_key_id "+rd.KeyID())
	}
	if strings.Contains(logs, "address tokens use a random key") {
		out = append(out, name+": address tokens use a random key")
	}
	return out
}

// NewRedactKeySecret stores a random deployment key as a Secrets Manager
// secret on moto_server at motoEndpoint, as template.yaml's RedactKeySecret
// holds one per stack. It returns the secret's ARN, the value of every
// function's SENDONCE_REDACT_KEY_PARAM, and the Redactor of the key, to
// check log output with LogLeaks.
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
