package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/smithy-go"
)

// envStack names the stack whose outputs a run reads (--stack-name);
// the functions read the same variable for their metrics' namespace.
const envStack = "SENDONCE_STACK"

// stackOutputs maps the outputs of template.yaml that a command uses to
// the variables they stand for: with a stack, its output is the value of
// the variable (a command's own flag, such as --table, still wins). The
// outputs that no variable stands for are kept under lowercase names.
var stackOutputs = map[string]string{
	"TableName":      "SENDONCE_TABLE",
	"QueueUrl":       "SENDONCE_QUEUE_URL",
	"DLQUrl":         "SENDONCE_DLQ_URL",
	"RedactKeyParam": "SENDONCE_REDACT_KEY_PARAM",
	"ApiUrl":         "api_url",
	"AlarmTopicArn":  "alarm_topic_arn",
	"WebhookUrl":     "webhook_url",
}

// useStack reads the outputs of the stack --stack-name (else
// SENDONCE_STACK) names, once, with CloudFormation DescribeStacks, and
// makes them the values of the variables stackOutputs maps them to. It
// does nothing without a stack.
func (a *app) useStack(ctx context.Context) error {
	name := strings.TrimSpace(a.stackName)
	if name == "" {
		name = strings.TrimSpace(a.getenv(envStack))
	}
	if name == "" || a.stack != nil {
		return nil
	}
	cfg, err := a.awsConfig(ctx)
	if err != nil {
		return err
	}
	out, err := cloudformation.NewFromConfig(cfg).DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String(name)})
	var ae smithy.APIError
	switch {
	case errors.As(err, &ae) && ae.ErrorCode() == "ValidationError" && strings.Contains(ae.ErrorMessage(), "does not exist"):
		return fmt.Errorf("stack %q does not exist in %s: check --stack-name or %s, and --region", name, cfg.Region, envStack)
	case err != nil:
		return fmt.Errorf("read the outputs of stack %q (CloudFormation DescribeStacks): %w", name, err)
	case len(out.Stacks) == 0:
		return fmt.Errorf("stack %q does not exist in %s", name, cfg.Region)
	}
	vars := map[string]string{}
	for _, o := range out.Stacks[0].Outputs {
		if v, ok := stackOutputs[aws.ToString(o.OutputKey)]; ok {
			vars[v] = aws.ToString(o.OutputValue)
		}
	}
	if vars["SENDONCE_TABLE"] == "" {
		return fmt.Errorf("stack %q has no TableName output: is it a sendonce stack?", name)
	}
	a.stack = &stackInfo{name: name, vars: vars}
	getenv := a.getenv
	a.getenv = func(k string) string {
		if v := a.stack.vars[k]; v != "" {
			return v
		}
		return getenv(k)
	}
	return nil
}

// stackInfo is the stack a run reads its resources from.
type stackInfo struct {
	name string
	vars map[string]string // by variable name (stackOutputs)
}
