package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"

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
// (config.LoadDefaultConfig), with --region, --profile and --endpoint-url
// first and then the standard variables read through e.getenv rather than
// os.Getenv where they are set there: AWS_REGION (or AWS_DEFAULT_REGION),
// AWS_PROFILE, AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY /
// AWS_SESSION_TOKEN, AWS_ENDPOINT_URL_<SERVICE> and AWS_ENDPOINT_URL. In
// the real CLI getenv is os.Getenv, so these options only restate what the
// SDK reads itself; in tests they point it at the local emulators without
// touching the process environment. service is the endpoint variable's
// suffix ("DYNAMODB", "SQS", "STS"). local reports whether an endpoint
// was set (an emulator, most likely).
func awsConfig(ctx context.Context, e env, g *common, service string) (cfg aws.Config, local bool, err error) {
	get := func(name string) string { return strings.TrimSpace(e.getenv(name)) }
	var opts []func(*config.LoadOptions) error
	if r := firstOf(g.region, get("AWS_REGION"), get("AWS_DEFAULT_REGION")); r != "" {
		opts = append(opts, config.WithRegion(r))
	}
	if p := firstOf(g.profile, get("AWS_PROFILE")); p != "" {
		opts = append(opts, config.WithSharedConfigProfile(p))
	}
	if id, secret := get("AWS_ACCESS_KEY_ID"), get("AWS_SECRET_ACCESS_KEY"); id != "" && secret != "" && g.profile == "" {
		creds := aws.Credentials{AccessKeyID: id, SecretAccessKey: secret, SessionToken: get("AWS_SESSION_TOKEN"), Source: "environment"}
		opts = append(opts, config.WithCredentialsProvider(aws.CredentialsProviderFunc(
			func(context.Context) (aws.Credentials, error) { return creds, nil })))
	}
	ep := firstOf(g.endpoint, get("AWS_ENDPOINT_URL_"+service), get("AWS_ENDPOINT_URL"))
	if ep != "" {
		opts = append(opts, config.WithBaseEndpoint(ep))
	}
	cfg, err = config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, false, fmt.Errorf("load AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		return aws.Config{}, false, errors.New("no AWS region: pass --region or set AWS_REGION (or a region in your AWS profile)")
	}
	return cfg, ep != "", nil
}

func firstOf(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

// dynamoClient returns a DynamoDB client (see awsConfig). When an endpoint
// is set, response checksum validation is off: DynamoDB Local's error
// responses carry a wrong CRC32.
func dynamoClient(ctx context.Context, e env, g *common) (*dynamodb.Client, error) {
	cfg, local, err := awsConfig(ctx, e, g, "DYNAMODB")
	if err != nil {
		return nil, err
	}
	return dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		if local {
			o.DisableValidateResponseChecksum = true
		}
	}), nil
}

// sqsClient returns an SQS client (see awsConfig).
func sqsClient(ctx context.Context, e env, g *common) (*sqs.Client, error) {
	cfg, _, err := awsConfig(ctx, e, g, "SQS")
	if err != nil {
		return nil, err
	}
	return sqs.NewFromConfig(cfg), nil
}

// callerIdentity returns the caller's ARN as STS GetCallerIdentity reports
// it for the configured credentials: the "who" of a resolve.
func callerIdentity(ctx context.Context, e env, g *common) (string, error) {
	cfg, _, err := awsConfig(ctx, e, g, "STS")
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
