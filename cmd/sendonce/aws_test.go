package main

import (
	"context"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

// loadFromVars stands for config.LoadDefaultConfig over a process
// environment holding vars, so that parallel tests each point the SDK at
// their own emulators without touching the test process's environment.
// It gives the SDK vars' AWS_REGION, static credentials
// (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY) and AWS_ENDPOINT_URL_<SERVICE>
// through its own options and configuration sources, and no shared files.
// The real resolution from the environment is TestBinary's.
func loadFromVars(vars map[string]string) func(context.Context, ...func(*config.LoadOptions) error) (aws.Config, error) {
	return func(ctx context.Context, opts ...func(*config.LoadOptions) error) (aws.Config, error) {
		base := []func(*config.LoadOptions) error{config.WithSharedConfigFiles([]string{}), config.WithSharedCredentialsFiles([]string{})}
		if r := vars["AWS_REGION"]; r != "" {
			base = append(base, config.WithRegion(r))
		}
		if id := vars["AWS_ACCESS_KEY_ID"]; id != "" {
			base = append(base, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(id, vars["AWS_SECRET_ACCESS_KEY"], "")))
		}
		cfg, err := config.LoadDefaultConfig(ctx, append(base, opts...)...)
		cfg.ConfigSources = append([]any{serviceEndpoints(func(sdkID string) string {
			return vars["AWS_ENDPOINT_URL_"+strings.ToUpper(strings.ReplaceAll(sdkID, " ", "_"))]
		})}, cfg.ConfigSources...)
		return cfg, err
	}
}

// serviceEndpoints is a configuration source of the SDK that gives the
// endpoint of a service by its SDK id ("DynamoDB", "Secrets Manager"), as
// AWS_ENDPOINT_URL_<SERVICE> does.
type serviceEndpoints func(sdkID string) string

// GetServiceBaseEndpoint implements the SDK's service endpoint source.
func (f serviceEndpoints) GetServiceBaseEndpoint(_ context.Context, sdkID string) (string, bool, error) {
	ep := f(sdkID)
	return ep, ep != "", nil
}
