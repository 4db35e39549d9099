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
