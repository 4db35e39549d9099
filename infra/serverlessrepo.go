package infra

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
)

// SARVerdict is what the AWS Serverless Application Repository's list of
// supported resources says of a resource type.
type SARVerdict string

const (
	// SARListed: on the list.
	SARListed SARVerdict = "listed"
	// SARNotListed: not on the list (as far as it could be read; see
	// SARSources).
	SARNotListed SARVerdict = "not listed"
	// SARRejected: not on the list, and reported rejected by the
	// repository when publishing.
	SARRejected SARVerdict = "rejected"
)

// SARListFile is the repository's list of supported resource types as
// this project keeps it, one a line, with its sources in its comments
// (relative to the repository root). SARTypes' SARListed verdicts are
// exactly the types on it that the templates use (TestSARListFile).
const SARListFile = "infra/testdata/sar-supported-resources.txt"

// SARSources says where the verdicts of SARTypes come from.
var SARSources = []string{
	"the list of supported resources of the Serverless Application Repository Developer Guide as awsdocs/aws-serverlessrepo-developer-guide last held it, doc_source/list-supported-resources.md at 5e8664b (2021-02-08), 150 types, the last version before that repository's content was removed in 2023",
	"the live page, https://docs.aws.amazon.com/serverlessrepo/latest/devguide/list-supported-resources.html, of which the search tool returned only the opening (AWS::AccessAnalyzer::Analyzer to AWS::AppSync::*, with types added since 2021 such as AWS::AmazonMQ::* and AWS::ApiGateway::Account): a type not on the 2021 list may have been added since, which could not be checked here",
	"aws/serverless-application-model#3402 (2023-11, closed wontfix): publishing fails with \"The template contains unsupported resource types. [AWS::Lambda::Url]\"; #2421 (2022): \"property FunctionUrlConfig not defined for resource of type AWS::Serverless::Function\"",
}

// SARTypes holds the verdict on every resource type the project's
// templates declare or translate to. A type the templates start to use
// needs a verdict here (TestServerlessRepo says so).
var SARTypes = map[string]SARVerdict{
	"AWS::ApiGatewayV2::Api":          SARListed,
	"AWS::ApiGatewayV2::Stage":        SARListed,
	"AWS::CloudWatch::Alarm":          SARListed,
	"AWS::CloudWatch::Dashboard":      SARListed,
	"AWS::DynamoDB::Table":            SARListed,
	"AWS::Events::Rule":               SARListed,
	"AWS::IAM::ManagedPolicy":         SARListed,
	"AWS::IAM::Policy":                SARListed,
	"AWS::IAM::Role":                  SARListed,
	"AWS::Lambda::Alias":              SARListed,
	"AWS::Lambda::EventSourceMapping": SARListed,
	"AWS::Lambda::Function":           SARListed,
	"AWS::Lambda::Permission":         SARListed,
	"AWS::Lambda::Version":            SARListed,
	"AWS::Logs::LogGroup":             SARListed,
	"AWS::SNS::Subscription":          SARListed,
	"AWS::SNS::Topic":                 SARListed,
	"AWS::SNS::TopicPolicy":           SARListed,
	"AWS::SQS::Queue":                 SARListed,
	"AWS::Serverless::Function":       SARListed,
	"AWS::Serverless::HttpApi":        SARListed,

	"AWS::CodeDeploy::Application":               SARNotListed,
	"AWS::CodeDeploy::DeploymentGroup":           SARNotListed,
	"AWS::DynamoDB::GlobalTable":                 SARNotListed,
	"AWS::SES::ConfigurationSet":                 SARNotListed,
	"AWS::SES::ConfigurationSetEventDestination": SARNotListed,
	"AWS::SecretsManager::Secret":                SARNotListed,

	"AWS::Lambda::Url": SARRejected,
}

var (
	sarName     = regexp.MustCompile(`^[a-zA-Z0-9-]{1,140}$`)
	sarAuthor   = regexp.MustCompile(`^[a-z0-9]([a-z0-9]|-[a-z0-9])*$`)
	sarLabel    = regexp.MustCompile(`^[a-zA-Z0-9+\-_:/@]{1,127}$`)
	semver      = regexp.MustCompile(`^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)
	httpsURL    = regexp.MustCompile(`^https://[^\s]+$`)
	sarRequired = []string{"Name", "Description", "Author", "SpdxLicenseId", "LicenseUrl", "ReadmeUrl", "Labels", "SemanticVersion", "SourceCodeUrl", "HomePageUrl"}
)

// CheckSARMetadata returns what is wrong with a template's
// AWS::ServerlessRepo::Application metadata (m) by the repository's rules:
// every field this project publishes present, the name, author and labels
// in the repository's patterns and limits, a description of at most 256
// characters, a semantic version, https source and home page URLs, and
// local license and readme files (sam package uploads them) that exist,
// as fileExists says.
func CheckSARMetadata(m map[string]any, fileExists func(string) bool) []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if m == nil {
		return []error{fmt.Errorf("no AWS::ServerlessRepo::Application metadata")}
	}
	for _, k := range sarRequired {
		if m[k] == nil {
			bad("AWS::ServerlessRepo::Application has no %s", k)
		}
	}
	str := func(k string) string { s, _ := m[k].(string); return s }
	if !sarName.MatchString(str("Name")) {
		bad("Name %q: 1 to 140 of [a-zA-Z0-9-]", str("Name"))
	}
	if d := str("Description"); len(d) == 0 || len(d) > 256 {
		bad("Description of %d characters: 1 to 256", len(d))
	}
	if a := str("Author"); len(a) > 127 || !sarAuthor.MatchString(a) {
		bad("Author %q: lower-case letters, digits and single hyphens inside, at most 127", a)
	}
	labels, _ := m["Labels"].([]any)
	if len(labels) == 0 || len(labels) > 10 {
		bad("%d labels: 1 to 10", len(labels))
	}
	for _, l := range labels {
		if s, _ := l.(string); !sarLabel.MatchString(s) {
			bad("label %v: 1 to 127 of [a-zA-Z0-9+-_:/@]", l)
		}
	}
	if !semver.MatchString(str("SemanticVersion")) {
		bad("SemanticVersion %q is not a semantic version", str("SemanticVersion"))
	}
	for _, k := range []string{"SourceCodeUrl", "HomePageUrl"} {
		if !httpsURL.MatchString(str(k)) {
			bad("%s %q is not an https URL", k, str(k))
		}
	}
	for _, k := range []string{"LicenseUrl", "ReadmeUrl"} {
		if !fileExists(str(k)) {
			bad("%s %q is not a file of the repository (sam package uploads it)", k, str(k))
		}
	}
	return errs
}

// CheckSARTypes returns an error for each resource type of a SAM
// template (its resources, sam) or of the CloudFormation it translates to
// (cfn) that the repository does not accept (SARTypes), or that has no
// verdict. The transform's types count too: whether the repository checks
// only the SAM template it is given is not documented, so the published
// template makes nothing that is not on the list (no DeploymentPreference,
// whose AWS::CodeDeploy::* are not).
func CheckSARTypes(sam, cfn map[string]any) []error {
	var errs []error
	check := func(where string, res map[string]any) {
		types := map[string]bool{}
		for _, r := range res {
			if t, ok := mapOf(r)["Type"].(string); ok {
				types[t] = true
			}
		}
		for _, t := range slices.Sorted(maps.Keys(types)) {
			v, ok := SARTypes[t]
			switch {
			case !ok:
				errs = append(errs, fmt.Errorf("%s: %s has no verdict in infra.SARTypes: check the repository's list of supported resources and add one", where, t))
			case v == SARListed:
			default:
				errs = append(errs, fmt.Errorf("%s: %s is %s", where, t, v))
			}
		}
	}
	check("the template", mapOf(sam["Resources"]))
	check("its translation", mapOf(cfn["Resources"]))
	return errs
}
