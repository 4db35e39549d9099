package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go/logging"
	"github.com/aws/smithy-go/middleware"
)

// resources are what a command works on, named in its error messages.
type resources struct {
	table            string // the DynamoDB table
	dynamoDBEndpoint string // DynamoDB's endpoint, when one is configured
}

// awsConfig returns the AWS configuration, loaded once per run the SDK's
// standard way (config.LoadDefaultConfig: AWS_REGION, AWS_PROFILE, the
// credential variables, AWS_ENDPOINT_URL_<SERVICE> and AWS_ENDPOINT_URL,
// the shared files), with --region and --profile as its options.
// --endpoint-url is not part of it: it is the endpoint of the command's
// own service only (endpointFor), as in the AWS CLI. A missing region is an error; so are credentials that
// cannot be loaded, found here, before the first call, so that the
// message can say so plainly (credentialsError). The SDK logs nothing
// unless --debug.
func (a *app) awsConfig(ctx context.Context) (aws.Config, error) {
	if a.cfg != nil {
		return *a.cfg, nil
	}
	var opts []func(*config.LoadOptions) error
	if a.region != "" {
		opts = append(opts, config.WithRegion(a.region))
	}
	if a.profile != "" {
		opts = append(opts, config.WithSharedConfigProfile(a.profile))
	}
	if a.debug {
		opts = append(opts, config.WithLogger(logging.NewStandardLogger(a.stderr)),
			config.WithClientLogMode(aws.LogRetries|aws.LogRequest|aws.LogResponse))
	} else {
		// Not the SDK's warnings ("falling back to IMDSv1") either: the
		// error, if any, says what went wrong.
		opts = append(opts, config.WithLogger(logging.Nop{}))
	}
	load := a.loadAWS
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
	if cfg.Credentials == nil {
		return aws.Config{}, &credentialsError{profile: a.profile, err: errors.New("no credential provider")}
	}
	if _, err := cfg.Credentials.Retrieve(ctx); err != nil {
		return aws.Config{}, &credentialsError{profile: a.profile, err: err}
	}
	a.cfg = &cfg
	return cfg, nil
}

// credentialsError is the failure to load AWS credentials.
type credentialsError struct {
	profile string
	err     error
}

func (e *credentialsError) Error() string { return "load AWS credentials: " + e.err.Error() }
func (e *credentialsError) Unwrap() error { return e.err }

// endpointFor returns the endpoint --endpoint-url gives the service
// sdkID: the flag's URL when sdkID is the service the command calls
// (annotService), else nil, and the service's configured endpoint
// (AWS_ENDPOINT_URL_<SERVICE>, AWS_ENDPOINT_URL, a profile's services
// section) or AWS's applies. The AWS CLI's --endpoint-url is, in the same
// way, the endpoint of the one service a command calls.
func (a *app) endpointFor(sdkID string) *string {
	if a.endpoint == "" || cmp.Or(a.service, serviceDynamoDB) != sdkID {
		return nil
	}
	return aws.String(a.endpoint)
}

// dynamoClient returns a DynamoDB client (see awsConfig) whose Scan pages
// feed the run's scan totals and progress. When an endpoint is set, from
// any source, response checksum validation is off: DynamoDB Local's error
// responses carry a wrong CRC32.
func (a *app) dynamoClient(ctx context.Context) (*dynamodb.Client, error) {
	cfg, err := a.awsConfig(ctx)
	if err != nil {
		return nil, err
	}
	return dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		if ep := a.endpointFor(serviceDynamoDB); ep != nil {
			o.BaseEndpoint = ep
		}
		o.DisableValidateResponseChecksum = o.BaseEndpoint != nil
		a.where.dynamoDBEndpoint = aws.ToString(o.BaseEndpoint)
		o.APIOptions = append(o.APIOptions, a.observeScans)
	}), nil
}

// sqsClient returns an SQS client (see awsConfig).
func (a *app) sqsClient(ctx context.Context) (*sqs.Client, error) {
	cfg, err := a.awsConfig(ctx)
	if err != nil {
		return nil, err
	}
	return sqs.NewFromConfig(cfg, func(o *sqs.Options) {
		if ep := a.endpointFor(serviceSQS); ep != nil {
			o.BaseEndpoint = ep
		}
	}), nil
}

// callerIdentity returns the caller's ARN as STS GetCallerIdentity reports
// it for the configured credentials: the "who" of a resolve.
func (a *app) callerIdentity(ctx context.Context) (string, error) {
	cfg, err := a.awsConfig(ctx)
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

// scanStats are the DynamoDB Scan pages a run read: every scan of the
// table goes through the CLI's client, whichever package pages it
// (list --state failed, find by event and apikey list without the event
// index).
type scanStats struct {
	mu               sync.Mutex
	start            time.Time
	pages            int
	scanned, matched int64
}

// observeScans adds to a DynamoDB client's stack a step that counts every
// Scan page's items (read, and left by the filter) and shows the progress.
func (a *app) observeScans(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("sendonce/scan-totals",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			s := &a.scan
			if _, ok := in.Parameters.(*dynamodb.ScanInput); ok {
				s.mu.Lock()
				if s.start.IsZero() {
					s.start = time.Now()
				}
				s.mu.Unlock()
			}
			out, md, err := next.HandleInitialize(ctx, in)
			if page, ok := out.Result.(*dynamodb.ScanOutput); ok && err == nil {
				s.mu.Lock()
				s.pages++
				s.scanned += int64(page.ScannedCount)
				s.matched += int64(page.Count)
				line := fmt.Sprintf("scanning table %s: %d items read, %d matched (%d pages)", a.where.table, s.scanned, s.matched, s.pages)
				s.mu.Unlock()
				a.prog.show(line)
			}
			return out, md, err
		}), middleware.After)
}

// scanned reports whether the run scanned the table, and its totals as
// one phrase: "read 1200 items in 2 pages (1.3s), 4 matched the filter".
func (a *app) scanned() (bool, string) {
	s := &a.scan
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pages == 0 {
		return false, ""
	}
	return true, fmt.Sprintf("read %d items in %d pages (%s), %d matched the filter",
		s.scanned, s.pages, time.Since(s.start).Round(100*time.Millisecond), s.matched)
}
