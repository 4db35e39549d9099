// Package testenv connects tests to the real local AWS emulators that
// `make test` starts: DynamoDB Local and moto_server.
//
// Endpoints come from SENDONCE_TEST_DYNAMODB_ENDPOINT and
// SENDONCE_TEST_MOTO_ENDPOINT. A test that needs an emulator that is not
// configured fails with a hint; it never skips, so CI cannot pass without
// running it.
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sendonce/sendonce/internal/tableschema"
)

// Region is the region every local client uses.
const Region = "us-east-1"

// Endpoint variables.
const (
	DynamoDBEndpointEnv = "SENDONCE_TEST_DYNAMODB_ENDPOINT"
	MotoEndpointEnv     = "SENDONCE_TEST_MOTO_ENDPOINT"
)

// Config returns an aws.Config with static dummy credentials for the local
// emulators. Set BaseEndpoint on each client's options (or use the helpers).
func Config() aws.Config {
	return aws.Config{
		Region:           Region,
		Credentials:      credentials.NewStaticCredentialsProvider("test", "test", ""),
		RetryMaxAttempts: 3,
	}
}

// DynamoDBEndpoint returns DynamoDB Local's URL, or fails t.
func DynamoDBEndpoint(t testing.TB) string {
	t.Helper()
	return endpoint(t, DynamoDBEndpointEnv, "DynamoDB Local")
}

// MotoEndpoint returns moto_server's URL, or fails t.
func MotoEndpoint(t testing.TB) string {
	t.Helper()
	return endpoint(t, MotoEndpointEnv, "moto_server")
}

func endpoint(t testing.TB, env, what string) string {
	t.Helper()
	u := os.Getenv(env)
	if u == "" {
		t.Fatalf("%s is not set: this test needs %s; run it through `make test`, which starts it", env, what)
	}
	return u
}

// DynamoDB returns a client for DynamoDB Local. optFns are applied after
// the local settings (e.g. to add counting middleware).
func DynamoDB(t testing.TB, optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	t.Helper()
	return DynamoDBAt(DynamoDBEndpoint(t), optFns...)
}

// DynamoDBAt returns a client for the DynamoDB Local at endpoint, for
// tools that run outside a test. optFns are applied after the local
// settings.
func DynamoDBAt(endpoint string, optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	opts := append([]func(*dynamodb.Options){func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(endpoint)
		// DynamoDB Local's error responses carry a wrong CRC32.
		o.DisableValidateResponseChecksum = true
	}}, optFns...)
	return dynamodb.NewFromConfig(Config(), opts...)
}

// SQSAt returns a client for SQS on the moto_server at endpoint.
func SQSAt(endpoint string) *sqs.Client {
	return sqs.NewFromConfig(Config(), func(o *sqs.Options) { o.BaseEndpoint = aws.String(endpoint) })
}

// NewTable creates a fresh table with the production schema (attention
// index and TTL included; opts as tableschema.CreateTableInput's, e.g.
// tableschema.WithEventIndex(true)) and deletes it when the test ends.
func NewTable(t testing.TB, c *dynamodb.Client, opts ...tableschema.Option) string {
	t.Helper()
	// Two minutes, not seconds: on a busy machine DynamoDB Local (a JVM
	// beside every test binary of go test -p 6) took over 30 s for one
	// CreateTable, and go test's -timeout still bounds a hang.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	name := "sendonce-test-" + RandomID()
	if err := CreateTable(ctx, c, name, opts...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = c.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	})
	return name
}

// CreateTable creates table name with the production schema and turns on
// its TTL, as template.yaml declares it.
func CreateTable(ctx context.Context, c *dynamodb.Client, name string, opts ...tableschema.Option) error {
	if _, err := c.CreateTable(ctx, tableschema.CreateTableInput(name, opts...)); err != nil {
		return fmt.Errorf("create table %s: %w", name, err)
	}
	if _, err := c.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName: aws.String(name),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{
			AttributeName: aws.String(tableschema.TTLAttribute),
			Enabled:       aws.Bool(true),
		},
	}); err != nil {
		return fmt.Errorf("enable TTL on %s: %w", name, err)
	}
	return nil
}

// RandomID returns 16 random hex digits.
func RandomID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// MotoData decodes what the moto_server at moto recorded
// (/moto-api/data.json: the SMS SNS sent, the emails SES sent, ...) into
// v, through client.
func MotoData(ctx context.Context, client *http.Client, moto string, v any) error {
	// moto_server serializes every backend's state for this request
	// while other requests change it: now and then it answers 500 with
	// an HTML page ("dictionary changed size during iteration"). That
	// says nothing of the state; it is read again, a few times.
	var last error
	for try := range 5 {
		if try > 0 {
			select {
			case <-ctx.Done():
				return fmt.Errorf("read moto data: %w (after %v)", ctx.Err(), last)
			case <-time.After(time.Duration(try) * 200 * time.Millisecond):
			}
		}
		var body []byte
		body, last = motoDataOnce(ctx, client, moto)
		if last != nil {
			continue
		}
		if err := json.Unmarshal(body, v); err != nil {
			return fmt.Errorf("decode moto data: %w", err)
		}
		return nil
	}
	return last
}

func motoDataOnce(ctx context.Context, client *http.Client, moto string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, moto+"/moto-api/data.json", nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("read moto data: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("read moto data: %w", err)
	}
	if resp.StatusCode != http.StatusOK || !json.Valid(body) {
		return nil, fmt.Errorf("read moto data: HTTP %d, %d bytes that are not JSON: %.120q", resp.StatusCode, len(body), body)
	}
	return body, nil
}
