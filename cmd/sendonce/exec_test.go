package main

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sendonce/sendonce/internal/testenv"
)

// TestBinary builds the real binary and runs it as a process, so main's
// wiring (os.Args, os.Getenv, os.Exit) and the SDK's own reading of the
// standard AWS variables are covered too.
func TestBinary(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	db := testenv.DynamoDB(t)
	table := "sendonce-cli-" + testenv.RandomID()
	dropLater(t, db, table)
	local := []string{
		"AWS_ENDPOINT_URL_DYNAMODB=" + testenv.DynamoDBEndpoint(t), "AWS_REGION=" + testenv.Region,
		"AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test",
		"AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null", "AWS_EC2_METADATA_DISABLED=true",
	}
	// An instance metadata service that has no role, as on a machine that
	// is not an EC2 instance behind a proxy answering 404: the SDK warns
	// "falling back to IMDSv1" and ends its chain there.
	imds := httptest.NewServer(http.NotFoundHandler())
	defer imds.Close()
	noCredentials := []string{"SENDONCE_TABLE=" + table, "AWS_REGION=" + testenv.Region, "AWS_CONFIG_FILE=/dev/null",
		"AWS_SHARED_CREDENTIALS_FILE=/dev/null", "AWS_EC2_METADATA_SERVICE_ENDPOINT=" + imds.URL}
	localEnv := []string{"AWS_ENDPOINT_URL_DYNAMODB=" + testenv.DynamoDBEndpoint(t), "AWS_ENDPOINT_URL=" + testenv.MotoEndpoint(t),
		"AWS_REGION=" + testenv.Region, "AWS_DEFAULT_REGION=" + testenv.Region, "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test",
		"AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null", "SENDONCE_TABLE=" + table}
	tests := []struct {
		name       string
		args       []string
		env        []string
		stdin      string
		wantCode   int
		wantStdout string // exact, when not empty
		wantStderr string // contained
	}{
		{"Help", []string{"help"}, nil, "", 0, "", ""},
		{"Version", []string{"--version"}, nil, "", 0, "", ""},
		{"NoCommand", nil, nil, "", 2, "", "no command given"},
		{"UnknownFlag", []string{"key", "--json"}, nil, "", 2, "", `unknown flag: --json (see "sendonce help key")`},
		{"Key", []string{"key"}, nil, sampleRequest, 0, sampleKey + "\n", ""},
		{"KeyInvalid", []string{"key"}, nil, `{"tenant_id":"acme"}`, 1, "", "invalid request: event_id: is required"},
		{"InspectNoTable", []string{"inspect", sampleKey}, nil, "", 2, "", "no table"},
		{"NoRegion", []string{"inspect", sampleKey}, []string{"SENDONCE_TABLE=t", "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null"}, "", 1, "", "no AWS region: pass --region or set AWS_REGION"},
		{"CreateTablesFromEnvironment", []string{"create-tables"}, append(local, "SENDONCE_TABLE="+table), "", 0, "", "created table " + table},
		{"InspectUnknownFromEnvironment", []string{"inspect", sampleKey}, append(local, "SENDONCE_TABLE="+table), "", 1, "", "no ledger row"},
		{"InspectWithFlags", []string{"inspect", sampleKey, "--region", testenv.Region, "--endpoint-url", testenv.DynamoDBEndpoint(t), "--table", table},
			[]string{"AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null"}, "", 1, "", "no ledger row"},
		{"EndpointFlagOverEnvironment", []string{"inspect", sampleKey, "--endpoint-url", testenv.DynamoDBEndpoint(t), "--table", table},
			append(slices.Clone(local), "AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:1"), "", 1, "", "no ledger row"},
		{"BadOutput", []string{"inspect", sampleKey, "--output", "xml"}, nil, "", 2, "", `--output "xml": want json, yaml, text or table`},
		{"GlobalFlagsBeforeTheCommand", []string{"--region", testenv.Region, "--endpoint-url", testenv.DynamoDBEndpoint(t), "--output", "text", "inspect", sampleKey, "--table", table},
			[]string{"AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null"}, "", 1, "", "no ledger row"},
		{"NoCredentials", []string{"inspect", sampleKey}, noCredentials, "", 1, "",
			"sendonce: inspect: no AWS credentials: set AWS_PROFILE (or pass --profile), or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"},
		{"NoCredentialsDisabledIMDS", []string{"list", "--state", "uncertain"}, append(slices.Clone(noCredentials[:4]), "AWS_EC2_METADATA_DISABLED=true"), "", 1, "",
			"sendonce: list: no AWS credentials"},
		{"NoTable", []string{"list", "--state", "uncertain", "--table", "nope"}, local, "", 1, "",
			`sendonce: list: table "nope" does not exist in us-east-1 at ` + testenv.DynamoDBEndpoint(t)},
		// What source .local/env exports (scripts/local-aws.sh): DynamoDB
		// Local by its own variable, everything else (SQS here) through
		// AWS_ENDPOINT_URL, the AWS CLI v1's AWS_DEFAULT_REGION too.
		{"LocalEnvDynamoDB", []string{"list", "--state", "uncertain", "--output", "text"}, localEnv, "", 0, "", ""},
		{"LocalEnvSQS", []string{"dlq", "list", "--dlq-url", testenv.MotoEndpoint(t) + "/123456789012/none"}, localEnv, "", 1, "",
			"sendonce: dlq list: queue " + testenv.MotoEndpoint(t) + "/123456789012/none does not exist in us-east-1"},
		{"NoRegionList", []string{"list", "--state", "failed"}, []string{"SENDONCE_TABLE=t", "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null"}, "", 1, "",
			"sendonce: list: no AWS region: pass --region or set AWS_REGION (or a region in your AWS profile)"},
		{"NoRegionNoCredentials", []string{"inspect", sampleKey}, []string{"SENDONCE_TABLE=t", "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null"}, "", 1, "", "no AWS region"},
	}
	for _, tt := range tests { // in order: create-tables precedes inspect
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, tt.args...)
			cmd.Env = append([]string{"HOME=" + t.TempDir()}, tt.env...)
			cmd.Stdin = strings.NewReader(tt.stdin)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tt.wantCode {
				t.Errorf("exit status = %d, want %d (stderr %q)", code, tt.wantCode, stderr.String())
			}
			if tt.wantStdout != "" && stdout.String() != tt.wantStdout {
				t.Errorf("stdout = %q, want %q", stdout.String(), tt.wantStdout)
			}
			if !strings.Contains(stderr.String(), tt.wantStderr) {
				t.Errorf("stderr = %q, want it to contain %q", stderr.String(), tt.wantStderr)
			}
			// An error is one line, and none shows the SDK's chain or logs.
			if tt.wantCode != 0 && strings.Count(stderr.String(), "\n") != 1 {
				t.Errorf("stderr = %q, want one line", stderr.String())
			}
			for _, raw := range []string{"IMDS", "operation error", "SDK ", "RequestID"} {
				if strings.Contains(stderr.String(), raw) {
					t.Errorf("stderr = %q shows the SDK's %q", stderr.String(), raw)
				}
			}
		})
	}
	if _, err := db.DescribeTable(context.Background(), &dynamodb.DescribeTableInput{TableName: aws.String(table)}); err != nil {
		t.Errorf("the binary's create-tables left no table %s: %v", table, err)
	}
}
