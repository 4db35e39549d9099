package main

import (
	"bytes"
	"context"
	"errors"
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
		{"UnknownFlag", []string{"key", "--json"}, nil, "", 2, "", "flag provided but not defined"},
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
		{"BadOutput", []string{"inspect", sampleKey, "--output", "yaml"}, nil, "", 2, "", `--output "yaml": want json or table`},
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
		})
	}
	if _, err := db.DescribeTable(context.Background(), &dynamodb.DescribeTableInput{TableName: aws.String(table)}); err != nil {
		t.Errorf("the binary's create-tables left no table %s: %v", table, err)
	}
}
