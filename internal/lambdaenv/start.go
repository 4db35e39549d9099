package lambdaenv

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"regexp"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sendonce/sendonce/internal/buildinfo"
	"github.com/sendonce/sendonce/internal/ledger/dynamoledger"
	"github.com/sendonce/sendonce/internal/metrics"
	"github.com/sendonce/sendonce/internal/secrets"
	"github.com/sendonce/sendonce/internal/tracing"
	"github.com/sendonce/sendonce/internal/tracing/export"
	"go.opentelemetry.io/otel/trace"
)

// Function is what every function's main starts from, built once per
// container by Start: the logger, the environment reader, the AWS
// configuration and the clients every function uses.
type Function struct {
	// Log is the JSON logger (Logger), also slog's default.
	Log *slog.Logger
	// Env reads the function's variables and collects their problems
	// until Ready.
	Env *Env
	// AWS is the SDK's configuration from its standard variables
	// (AWS_REGION, AWS_ENDPOINT_URL_<SERVICE>, ...).
	AWS aws.Config
	// DB is the DynamoDB client (DynamoDB) every function's table uses.
	DB *dynamodb.Client
	// Metrics is the EMF recorder, flushed after every invocation (Serve).
	Metrics *metrics.EMF
	// Table is the one table every record lives in (EnvTable).
	Table string
	// flushTraces exports the spans pending (export.Setup), after
	// every invocation (Serve).
	flushTraces func(context.Context)
}

// The variables every function reads.
const (
	// EnvTable names the one table of ledger rows, callback and API
	// records, API keys and templates. Required.
	EnvTable = "SENDONCE_TABLE"
	// EnvRetention is how long ledger rows are kept (their TTL), default
	// dynamoledger.DefaultRetention.
	EnvRetention = "SENDONCE_RETENTION"
	// EnvStack names the CloudFormation stack the function belongs to
	// (the template sets it to AWS::StackName): its metrics go to the
	// stack's own namespace, metrics.StackNamespace, the one the stack's
	// alarms and dashboard read. Unset (a local run): metrics.Namespace.
	EnvStack = "SENDONCE_STACK"
)

// stackName matches a CloudFormation stack name: a letter, then letters,
// digits and hyphens, 128 characters at most (the AWS CloudFormation API
// Reference, CreateStack's StackName: [a-zA-Z][-a-zA-Z0-9]*, 128 at most).
var stackName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9-]{0,127}$`)

// parseStack accepts a stack name (stackName).
func parseStack(v string) (string, error) {
	if !stackName.MatchString(v) {
		return "", fmt.Errorf("%q is not a CloudFormation stack name (a letter, then letters, digits and hyphens, at most 128)", v)
	}
	return v, nil
}

// Start begins a function's start-up over the process environment and
// stdout: see StartWith.
func Start(ctx context.Context, service string) *Function {
	return StartWith(ctx, service, os.Getenv, os.Stdout)
}

// StartWith builds the logger (level SENDONCE_LOG_LEVEL) writing to out
// and makes it slog's default, loads the AWS configuration the SDK's
// standard way, reads the address-redaction key (Redactor: plain, or
// stored where SENDONCE_REDACT_KEY_PARAM points) and makes it redact's
// default, logs "starting" with the module version (buildinfo.Version),
// and builds the DynamoDB client, the secrets resolver of
// f.Env.Secret and the EMF recorder named service, writing in the
// namespace of the stack EnvStack names. It reads EnvTable and EnvStack.
//
// A problem is recorded in f.Env, not reported: read the function's own
// variables through f.Env, then check f.Env.Err (Must).
func StartWith(ctx context.Context, service string, getenv func(string) string, out io.Writer) *Function {
	f := &Function{Log: ServiceLogger(out, service, getenv), Env: New(getenv)}
	slog.SetDefault(f.Log) // libraries that log through slog.Default write JSON too
	Value(f.Env, EnvLogLevel, slog.LevelInfo, parseLevel)
	f.Metrics = metrics.NewEMF(out, metrics.StackNamespace(Value(f.Env, EnvStack, "", parseStack)), service)
	f.Table = f.Env.Required(EnvTable)
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		f.Env.Fail(fmt.Errorf("load AWS configuration: %w", err))
		return f
	}
	f.AWS = cfg
	// Traces (package tracing), exported only where
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT names an endpoint.
	flush, err := export.Setup(ctx, cfg, service, getenv)
	f.Env.Fail(err)
	f.flushTraces = flush
	f.Env.Secrets = secrets.NewFromConfig(cfg)
	f.DB = DynamoDB(cfg, getenv)
	if r := f.Env.Redactor(ctx); r != nil {
		install(f.Log, r)
	}
	f.Log.Info("starting", "function", service, "version", buildinfo.Version())
	return f
}

// Ledger returns the ledger on f.DB in f.Table, keeping rows for
// EnvRetention. A problem is recorded in f.Env and the ledger is then nil
// (Must exits before it is used).
func (f *Function) Ledger() *dynamoledger.Ledger {
	retention := f.Env.Duration(EnvRetention, dynamoledger.DefaultRetention)
	if f.DB == nil || f.Table == "" { // recorded already
		return nil
	}
	l, err := dynamoledger.New(f.DB, f.Table, dynamoledger.Config{Retention: retention})
	f.Env.Fail(err)
	return l
}

// Must exits as Fatal does when err, a step of start-up, is not nil.
func (f *Function) Must(err error) {
	if err != nil {
		Fatal(f.Log, err)
	}
}

// Serve hands h to the Lambda runtime (lambda.Start) with f.Metrics
// flushed after every invocation (FlushAfter) and the invocation's keys
// on every log line (Invocation). It does not return.
func Serve[In, Out any](f *Function, h func(context.Context, In) (Out, error)) {
	lambda.Start(Invocation(f.Log, FlushAfter(f.Metrics, f.Log, traced(f, h))))
}

// traced runs h in the invocation's X-Ray trace (the header the runtime
// passes: Lambda's own segment, with Tracing Active) and exports the
// spans it recorded before the invocation returns.
func traced[In, Out any](f *Function, h func(context.Context, In) (Out, error)) func(context.Context, In) (Out, error) {
	return func(ctx context.Context, in In) (Out, error) {
		if hdr, _ := ctx.Value("x-amzn-trace-id").(string); hdr != "" {
			if sc := tracing.FromHeader(hdr); sc.IsValid() {
				ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
			}
		}
		out, err := h(ctx, in)
		if f.flushTraces != nil {
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			f.flushTraces(fctx)
			cancel()
		}
		return out, err
	}
}
