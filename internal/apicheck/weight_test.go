package apicheck_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestCoreLinksNoLambdaWiring: a program that imports only the root
// package (NewSender, NewDynamoLedger, its own adapter) links none of the
// AWS services the Lambda wiring reads its configuration from or builds
// the built-in providers with, nor the Lambda runtime or the CLI: they
// belong to package lambdaapp.
func TestCoreLinksNoLambdaWiring(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/sendonce/sendonce").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	forbidden := []string{
		"github.com/aws/aws-sdk-go-v2/service/ssm",
		"github.com/aws/aws-sdk-go-v2/service/secretsmanager",
		"github.com/aws/aws-sdk-go-v2/service/sesv2",
		"github.com/aws/aws-sdk-go-v2/service/sns",
		"github.com/aws/aws-sdk-go-v2/service/lambda",
		"github.com/aws/aws-lambda-go/lambda",
		"github.com/spf13/cobra",
		"github.com/sendonce/sendonce/internal/lambdaenv",
	}
	deps := map[string]bool{}
	for _, d := range strings.Fields(string(out)) {
		deps[d] = true
	}
	for _, f := range forbidden {
		if deps[f] {
			t.Errorf("the root package links %s", f)
		}
	}
}

// TestAdaptersLinkOnlyTheirService: each public adapter package links its
// own AWS service at most: a program with the SNS adapter links neither
// SES nor Lambda, nor the Lambda wiring's SSM, Secrets Manager, runtime
// or CLI.
func TestAdaptersLinkOnlyTheirService(t *testing.T) {
	services := map[string]string{
		"sns": "github.com/aws/aws-sdk-go-v2/service/sns", "ses": "github.com/aws/aws-sdk-go-v2/service/sesv2",
		"lambda": "github.com/aws/aws-sdk-go-v2/service/lambda",
	}
	always := []string{
		"github.com/aws/aws-sdk-go-v2/service/ssm", "github.com/aws/aws-sdk-go-v2/service/secretsmanager",
		"github.com/aws/aws-lambda-go/lambda", "github.com/spf13/cobra",
		"github.com/sendonce/sendonce/internal/lambdaenv", "github.com/sendonce/sendonce/lambdaapp",
	}
	for _, name := range []string{"http", "lambda", "ses", "smtp", "sns", "twilio"} {
		pkg := "github.com/sendonce/sendonce/provider/" + name + "provider"
		out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		deps := map[string]bool{}
		for _, d := range strings.Fields(string(out)) {
			deps[d] = true
		}
		forbidden := append([]string(nil), always...)
		for svc, path := range services {
			if svc != name {
				forbidden = append(forbidden, path)
			}
		}
		for _, f := range forbidden {
			if deps[f] {
				t.Errorf("%s links %s", pkg, f)
			}
		}
	}
}
