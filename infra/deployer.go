package infra

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Grant is a set of IAM actions a person or pipeline needs to deploy
// something, with what it is for.
type Grant struct {
	// Actions are IAM actions (service:Action), as a deployer's policy
	// names them.
	Actions []string
	// Note says where the actions apply or when they are needed ("" when
	// on the stack's own resources of the type, always).
	Note string
}

// DeployerBase is what every deployment needs whatever the template holds:
// CloudFormation's change sets of the stack, the SAM transform, and the
// artifacts bucket `sam deploy --resolve-s3` creates and uploads to.
var DeployerBase = []struct {
	What  string
	Grant Grant
}{
	{"CloudFormation (the stack)", Grant{Actions: []string{
		"cloudformation:CreateChangeSet", "cloudformation:DescribeChangeSet", "cloudformation:ExecuteChangeSet",
		"cloudformation:DeleteChangeSet", "cloudformation:DescribeStacks", "cloudformation:DescribeStackEvents",
		"cloudformation:DescribeStackResource", "cloudformation:GetTemplate", "cloudformation:GetTemplateSummary",
		"cloudformation:ListStackResources", "cloudformation:DeleteStack"},
		Note: "on arn:aws:cloudformation:REGION:ACCOUNT:stack/STACK/* (and the SAM CLI's managed stack aws-sam-cli-managed-default/*)"}},
	{"the SAM transform", Grant{Actions: []string{"cloudformation:CreateChangeSet"},
		Note: "on arn:aws:cloudformation:REGION:aws:transform/Serverless-2016-10-31"}},
	{"the artifacts bucket (sam deploy --resolve-s3)", Grant{Actions: []string{
		"s3:CreateBucket", "s3:PutBucketPolicy", "s3:PutBucketVersioning", "s3:PutEncryptionConfiguration",
		"s3:PutBucketPublicAccessBlock", "s3:PutBucketTagging", "s3:GetObject", "s3:PutObject", "s3:ListBucket"},
		Note: "on the SAM CLI's managed bucket aws-sam-cli-managed-default-samclisourcebucket-*; only the object actions once it exists"}},
}

// DeployerPermissions holds, for every resource type the templates declare
// or translate to, what CloudFormation does with the deployer's
// credentials to create, update and delete one: the service's actions of
// the type's create, update and delete handlers (the CloudFormation
// registry's resource schema of the type, handlers.*.permissions, which
// `aws cloudformation describe-type --type RESOURCE --type-name TYPE`
// prints). A type the templates start to use needs an entry here
// (TestDeployerPermissions), and docs/deploy.md's table is made from it.
var DeployerPermissions = map[string]Grant{
	"AWS::Serverless::Function": {Note: "the SAM transform makes AWS::Lambda::Function, Version, Alias, Permission and EventSourceMapping of it, and CodeDeploy's types with DeploymentPreference"},
	"AWS::Serverless::HttpApi":  {Note: "the SAM transform makes AWS::ApiGatewayV2::Api and Stage of it"},
	"AWS::ApiGatewayV2::Api": {Actions: []string{"apigateway:POST", "apigateway:GET", "apigateway:PUT", "apigateway:PATCH", "apigateway:DELETE", "apigateway:TagResource"},
		Note: "on arn:aws:apigateway:REGION::/apis and /apis/*"},
	"AWS::ApiGatewayV2::Stage": {Actions: []string{"apigateway:POST", "apigateway:GET", "apigateway:PATCH", "apigateway:DELETE"},
		Note: "on arn:aws:apigateway:REGION::/apis/*/stages*"},
	"AWS::CloudWatch::Alarm":     {Actions: []string{"cloudwatch:PutMetricAlarm", "cloudwatch:DescribeAlarms", "cloudwatch:DeleteAlarms", "cloudwatch:TagResource", "cloudwatch:ListTagsForResource"}},
	"AWS::CloudWatch::Dashboard": {Actions: []string{"cloudwatch:PutDashboard", "cloudwatch:GetDashboard", "cloudwatch:DeleteDashboards"}},
	"AWS::CodeDeploy::Application": {Actions: []string{"codedeploy:CreateApplication", "codedeploy:GetApplication", "codedeploy:DeleteApplication", "codedeploy:TagResource"},
		Note: "not in template.sar.yaml"},
	"AWS::CodeDeploy::DeploymentGroup": {Actions: []string{"codedeploy:CreateDeploymentGroup", "codedeploy:GetDeploymentGroup", "codedeploy:UpdateDeploymentGroup",
		"codedeploy:DeleteDeploymentGroup", "codedeploy:CreateDeployment", "codedeploy:GetDeployment", "codedeploy:GetDeploymentConfig", "codedeploy:RegisterApplicationRevision", "codedeploy:StopDeployment"},
		Note: "not in template.sar.yaml; each update's traffic shift is a deployment"},
	"AWS::DynamoDB::Table": {Actions: []string{"dynamodb:CreateTable", "dynamodb:DescribeTable", "dynamodb:UpdateTable", "dynamodb:DeleteTable",
		"dynamodb:UpdateTimeToLive", "dynamodb:DescribeTimeToLive", "dynamodb:UpdateContinuousBackups", "dynamodb:DescribeContinuousBackups",
		"dynamodb:TagResource", "dynamodb:UntagResource", "dynamodb:ListTagsOfResource"},
		Note: "with KmsKeyArn also kms:DescribeKey, kms:CreateGrant on that key"},
	"AWS::DynamoDB::GlobalTable": {Actions: []string{"dynamodb:CreateTable", "dynamodb:DescribeTable", "dynamodb:UpdateTable", "dynamodb:DeleteTable",
		"dynamodb:CreateTableReplica", "dynamodb:DeleteTableReplica", "dynamodb:UpdateTimeToLive", "dynamodb:DescribeTimeToLive",
		"dynamodb:UpdateContinuousBackups", "dynamodb:DescribeContinuousBackups", "dynamodb:TagResource", "dynamodb:ListTagsOfResource", "iam:CreateServiceLinkedRole"},
		Note: "template.full.yaml with LedgerMode=global-strong; in each Region of the table"},
	"AWS::Events::Rule": {Actions: []string{"events:PutRule", "events:DescribeRule", "events:DeleteRule", "events:PutTargets", "events:RemoveTargets", "events:ListTargetsByRule"}},
	"AWS::IAM::Role": {Actions: []string{"iam:CreateRole", "iam:GetRole", "iam:UpdateRole", "iam:DeleteRole", "iam:UpdateAssumeRolePolicy",
		"iam:PutRolePolicy", "iam:GetRolePolicy", "iam:DeleteRolePolicy", "iam:ListRolePolicies", "iam:ListAttachedRolePolicies",
		"iam:PutRolePermissionsBoundary", "iam:TagRole", "iam:PassRole"},
		Note: "on arn:aws:iam::ACCOUNT:role/STACK-*; with PermissionsBoundary, condition iam:PermissionsBoundary equal to it on CreateRole and PutRolePermissionsBoundary (capability CAPABILITY_IAM)"},
	"AWS::IAM::Policy":        {Actions: []string{"iam:PutRolePolicy", "iam:GetRolePolicy", "iam:DeleteRolePolicy"}, Note: "on the stack's roles"},
	"AWS::IAM::ManagedPolicy": {Actions: []string{"iam:CreatePolicy", "iam:GetPolicy", "iam:CreatePolicyVersion", "iam:DeletePolicyVersion", "iam:ListPolicyVersions", "iam:DeletePolicy", "iam:GetPolicyVersion"}},
	"AWS::Lambda::Function": {Actions: []string{"lambda:CreateFunction", "lambda:GetFunction", "lambda:GetFunctionConfiguration", "lambda:UpdateFunctionCode",
		"lambda:UpdateFunctionConfiguration", "lambda:DeleteFunction", "lambda:PutFunctionConcurrency", "lambda:DeleteFunctionConcurrency",
		"lambda:TagResource", "lambda:UntagResource", "lambda:ListTags"},
		Note: "iam:PassRole on the stack's roles; s3:GetObject on the artifacts bucket"},
	"AWS::Lambda::Version":            {Actions: []string{"lambda:PublishVersion", "lambda:ListVersionsByFunction", "lambda:GetFunctionConfiguration"}},
	"AWS::Lambda::Alias":              {Actions: []string{"lambda:CreateAlias", "lambda:GetAlias", "lambda:UpdateAlias", "lambda:DeleteAlias"}},
	"AWS::Lambda::Permission":         {Actions: []string{"lambda:AddPermission", "lambda:RemovePermission", "lambda:GetPolicy"}},
	"AWS::Lambda::EventSourceMapping": {Actions: []string{"lambda:CreateEventSourceMapping", "lambda:GetEventSourceMapping", "lambda:UpdateEventSourceMapping", "lambda:DeleteEventSourceMapping"}},
	"AWS::Logs::LogGroup":             {Actions: []string{"logs:CreateLogGroup", "logs:DescribeLogGroups", "logs:PutRetentionPolicy", "logs:DeleteRetentionPolicy", "logs:DeleteLogGroup", "logs:TagResource"}},
	"AWS::SES::ConfigurationSet":      {Actions: []string{"ses:CreateConfigurationSet", "ses:GetConfigurationSet", "ses:DeleteConfigurationSet", "ses:PutConfigurationSetDeliveryOptions"}, Note: "with email through SES; not in template.sar.yaml"},
	"AWS::SES::ConfigurationSetEventDestination": {Actions: []string{"ses:CreateConfigurationSetEventDestination", "ses:UpdateConfigurationSetEventDestination", "ses:DeleteConfigurationSetEventDestination", "ses:GetConfigurationSetEventDestinations"},
		Note: "with email through SES; not in template.sar.yaml"},
	"AWS::SNS::Topic":        {Actions: []string{"sns:CreateTopic", "sns:GetTopicAttributes", "sns:SetTopicAttributes", "sns:DeleteTopic", "sns:TagResource", "sns:ListTagsForResource"}, Note: "with KmsKeyArn also kms:DescribeKey on that key"},
	"AWS::SNS::TopicPolicy":  {Actions: []string{"sns:SetTopicAttributes", "sns:GetTopicAttributes"}},
	"AWS::SNS::Subscription": {Actions: []string{"sns:Subscribe", "sns:Unsubscribe", "sns:GetSubscriptionAttributes", "sns:SetSubscriptionAttributes", "sns:ListSubscriptionsByTopic"}},
	"AWS::SQS::Queue": {Actions: []string{"sqs:CreateQueue", "sqs:GetQueueAttributes", "sqs:SetQueueAttributes", "sqs:GetQueueUrl", "sqs:DeleteQueue", "sqs:TagQueue", "sqs:ListQueueTags"},
		Note: "with KmsKeyArn also kms:DescribeKey on that key"},
	"AWS::SecretsManager::Secret": {Actions: []string{"secretsmanager:CreateSecret", "secretsmanager:DescribeSecret", "secretsmanager:UpdateSecret", "secretsmanager:DeleteSecret", "secretsmanager:GetRandomPassword", "secretsmanager:TagResource"},
		Note: "the generated address-token key; not in template.sar.yaml"},
}

// DeployerTable returns docs/deploy.md's table of what a deployer needs
// for templates that declare or translate to types: DeployerBase, then
// each type's entry by service, sorted. It is an error when a type has no
// entry in DeployerPermissions.
func DeployerTable(types []string) (string, error) {
	var b strings.Builder
	b.WriteString("| for | IAM actions | where, when |\n|---|---|---|\n")
	row := func(what string, g Grant) {
		acts := "(none of its own)"
		if len(g.Actions) > 0 {
			acts = "`" + strings.Join(g.Actions, "`, `") + "`"
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", what, acts, cmp.Or(g.Note, "the stack's own"))
	}
	for _, base := range DeployerBase {
		row(base.What, base.Grant)
	}
	var missing []string
	for _, t := range slices.Compact(slices.Sorted(slices.Values(types))) {
		g, ok := DeployerPermissions[t]
		if !ok {
			missing = append(missing, t)
			continue
		}
		row("`"+t+"`", g)
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("infra: deployer permissions: no entry in DeployerPermissions for %v", missing)
	}
	return b.String(), nil
}

// Types returns the resource types of templates (SAM templates' resources
// and the CloudFormation they translate to), sorted, each once.
func Types(templates ...map[string]any) []string {
	set := map[string]bool{}
	for _, t := range templates {
		for _, r := range mapOf(t["Resources"]) {
			if ty, ok := mapOf(r)["Type"].(string); ok {
				set[ty] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(set))
}
