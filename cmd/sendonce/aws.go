package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sendonce/sendonce/internal/lambdaenv"
)

// dynamoClient returns a DynamoDB client configured the SDK's standard way
// (config.LoadDefaultConfig), with the standard variables read through
// e.getenv rather than os.Getenv where they are set there: AWS_REGION (or
// AWS_DEFAULT_REGION), AWS_PROFILE, AWS_ACCESS_KEY_ID /
// AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN, AWS_ENDPOINT_URL_DYNAMODB and
// AWS_ENDPOINT_URL. In the real CLI getenv is os.Getenv, so these options
// only restate what the SDK reads itself; in tests they point it at DynamoDB
// Local without touching the process environment.
func dynamoClient(ctx context.Context, e env) (*dynamodb.Client, error) {
	get := func(name string) string { return strings.TrimSpace(e.getenv(name)) }
	var opts []func(*config.LoadOptions) error
	if r := get("AWS_REGION"); r != "" {
		opts = append(opts, config.WithRegion(r))
	} else if r := get("AWS_DEFAULT_REGION"); r != "" {
		opts = append(opts, config.WithRegion(r))
	}
	if p := get("AWS_PROFILE"); p != "" {
		opts = append(opts, config.WithSharedConfigProfile(p))
	}
	if id, secret := get("AWS_ACCESS_KEY_ID"), get("AWS_SECRET_ACCESS_KEY"); id != "" && secret != "" {
		creds := aws.Credentials{AccessKeyID: id, SecretAccessKey: secret, SessionToken: get("AWS_SESSION_TOKEN"), Source: "environment"}
		opts = append(opts, config.WithCredentialsProvider(aws.CredentialsProviderFunc(
			func(context.Context) (aws.Credentials, error) { return creds, nil })))
	}
	if ep := get("AWS_ENDPOINT_URL_DYNAMODB"); ep != "" {
		opts = append(opts, config.WithBaseEndpoint(ep))
	} else if ep := get("AWS_ENDPOINT_URL"); ep != "" {
		opts = append(opts, config.WithBaseEndpoint(ep))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("load AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		return nil, errors.New("no AWS region: set AWS_REGION (or a region in your AWS profile)")
	}
	// lambdaenv.DynamoDB turns response checksum validation off when an
	// endpoint variable points at an emulator (DynamoDB Local's error
	// responses carry a wrong CRC32).
	return lambdaenv.DynamoDB(cfg, e.getenv), nil
}
