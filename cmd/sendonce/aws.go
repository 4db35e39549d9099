package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sts"
)

// common holds the flags every command takes: the AWS CLI's --region,
// --profile and --endpoint-url, and --output.
type common struct {
	region, profile, endpoint string
	output                    string
}

// commonFlags adds the common flags to fs.
func commonFlags(fs *flag.FlagSet) *common {
	g := awsFlags(fs)
	fs.StringVar(&g.output, "output", "", "")
	return g
}

// awsFlags adds only the AWS CLI's --region, --profile and --endpoint-url
// to fs, for commands whose --output has formats of their own (template).
func awsFlags(fs *flag.FlagSet) *common {
	g := &common{}
	fs.StringVar(&g.region, "region", "", "")
	fs.StringVar(&g.profile, "profile", "", "")
	fs.StringVar(&g.endpoint, "endpoint-url", "", "")
	return g
}

// format returns the output format: --output if given (a usage error
// unless json or table), else table on a terminal and json otherwise.
func (g *common) format(c *command, e env) (string, error) {
	switch g.output {
	case "json", "table":
		return g.output, nil
	case "":
		if e.terminal {
			return "table", nil
		}
		return "json", nil
	}
	return "", &usageError{cmd: c, msg: fmt.Sprintf("--output %q: want json or table", g.output)}
}

// awsConfig loads the AWS configuration the SDK's standard way
// (config.LoadDefaultConfig: AWS_REGION, AWS_PROFILE, the credential
// variables, AWS_ENDPOINT_URL_<SERVICE> and AWS_ENDPOINT_URL, the shared
// files), with --region and --profile as its options, and --endpoint-url,
// as in the AWS CLI, before any configured endpoint of every service.
func awsConfig(ctx context.Context, e env, g *common) (aws.Config, error) {
	var opts []func(*config.LoadOptions) error
	if g.region != "" {
		opts = append(opts, config.WithRegion(g.region))
	}
	if g.profile != "" {
		opts = append(opts, config.WithSharedConfigProfile(g.profile))
	}
	load := e.loadAWS
	if load == nil {
		load = config.LoadDefaultConfig
	}
	cfg, err := load(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("load AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		return aws.Config{}, errors.New("no AWS region: pass --region or set AWS_REGION (or a region in your AWS profile)")
	}
	if g.endpoint != "" {
		// A service's configured endpoint (AWS_ENDPOINT_URL_DYNAMODB, a
		// profile's services section) outranks cfg.BaseEndpoint in the
		// SDK; the flag is offered first as every service's endpoint.
		cfg.BaseEndpoint = aws.String(g.endpoint)
		cfg.ConfigSources = append([]any{serviceEndpoints(func(string) string { return g.endpoint })}, cfg.ConfigSources...)
	}
	return cfg, nil
}

// serviceEndpoints is a configuration source of the SDK that gives the
// endpoint of a service by its SDK id ("DynamoDB", "Secrets Manager").
type serviceEndpoints func(sdkID string) string

// GetServiceBaseEndpoint implements the SDK's service endpoint source.
func (f serviceEndpoints) GetServiceBaseEndpoint(_ context.Context, sdkID string) (string, bool, error) {
	ep := f(sdkID)
	return ep, ep != "", nil
}

// dynamoClient returns a DynamoDB client (see awsConfig). When an endpoint
// is set, from any source, response checksum validation is off: DynamoDB
// Local's error responses carry a wrong CRC32.
func dynamoClient(ctx context.Context, e env, g *common) (*dynamodb.Client, error) {
	cfg, err := awsConfig(ctx, e, g)
	if err != nil {
		return nil, err
	}
	return dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		o.DisableValidateResponseChecksum = o.BaseEndpoint != nil
	}), nil
}

// tableClient returns a DynamoDB client (see dynamoClient) for a command
// on table, or needTable's usage error when no table was named.
func tableClient(ctx context.Context, c *command, e env, g *common, table string) (*dynamodb.Client, error) {
	if err := needTable(c, table); err != nil {
		return nil, err
	}
	return dynamoClient(ctx, e, g)
}

// sqsClient returns an SQS client (see awsConfig).
func sqsClient(ctx context.Context, e env, g *common) (*sqs.Client, error) {
	cfg, err := awsConfig(ctx, e, g)
	if err != nil {
		return nil, err
	}
	return sqs.NewFromConfig(cfg), nil
}

// callerIdentity returns the caller's ARN as STS GetCallerIdentity reports
// it for the configured credentials: the "who" of a resolve.
func callerIdentity(ctx context.Context, e env, g *common) (string, error) {
	cfg, err := awsConfig(ctx, e, g)
	if err != nil {
		return "", err
	}
	out, err := sts.NewFromConfig(cfg).GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if err != nil {
		return "", fmt.Errorf("find the caller's identity (STS GetCallerIdentity): %w", err)
	}
	if arn := aws.ToString(out.Arn); arn != "" {
		return arn, nil
	}
	return "", errors.New("find the caller's identity: STS returned no ARN")
}
