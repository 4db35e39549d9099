// Package lambdaenv holds what every function's main needs and nothing
// else: reading and validating configuration from the environment, the
// JSON logger, the EMF recorder flushed per invocation, and AWS clients
// built from the SDK's standard variables.
//
// Every SENDONCE_* variable is read through an Env, which collects every
// problem so that start-up fails once, naming all of them. The variables
// are a public contract, listed in docs/configuration.md.
package lambdaenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sendonce/sendonce/internal/secrets"
)

// Env reads configuration variables and collects every problem, so that
// start-up reports all of them at once.
type Env struct {
	// Getenv reads one variable (os.Getenv).
	Getenv func(string) string
	// Secrets reads the stored secrets *_PARAM variables name (Secret).
	// Nil: a set *_PARAM variable is a recorded problem.
	Secrets *secrets.Resolver
	errs    []error
}

// ParamSuffix turns a secret's variable into the one naming where it is
// stored: SENDONCE_TWILIO_AUTH_TOKEN → SENDONCE_TWILIO_AUTH_TOKEN_PARAM.
const ParamSuffix = "_PARAM"

// New returns an Env over getenv (os.Getenv when nil).
func New(getenv func(string) string) *Env {
	if getenv == nil {
		getenv = os.Getenv
	}
	return &Env{Getenv: getenv}
}

// Required returns the variable's value, recording an error if it is empty.
func (e *Env) Required(name string) string {
	v := strings.TrimSpace(e.Getenv(name))
	if v == "" {
		e.record(fmt.Errorf("%s is required", name))
	}
	return v
}

// String returns the variable's value or def when unset.
func (e *Env) String(name, def string) string {
	if v := strings.TrimSpace(e.Getenv(name)); v != "" {
		return v
	}
	return def
}

// Duration parses a Go duration ("5s", "720h"), def when unset. A value
// that does not parse or is not positive is recorded as an error.
func (e *Env) Duration(name string, def time.Duration) time.Duration {
	return read(e, name, def, positive(time.ParseDuration), "a positive Go duration such as 5s or 720h")
}

// CacheTTL parses how long a cache keeps an entry: a Go duration of zero
// or more ("1m", "0s"), zero turning the cache off; def when unset. A
// value that does not parse or is negative is recorded as an error.
func (e *Env) CacheTTL(name string, def time.Duration) time.Duration {
	return read(e, name, def, nonNegative(time.ParseDuration), "a Go duration of 0 or more such as 1m or 0s")
}

// Int parses a positive integer, def when unset.
func (e *Env) Int(name string, def int) int {
	return read(e, name, def, positive(strconv.Atoi), "a positive integer")
}

// Bool parses "true" or "false" (and the other forms strconv.ParseBool
// accepts), def when unset.
func (e *Env) Bool(name string, def bool) bool {
	return read(e, name, def, strconv.ParseBool, "true or false")
}

// Value parses the variable with parse, def when unset. parse's error is
// recorded after the variable's name.
func Value[T any](e *Env, name string, def T, parse func(string) (T, error)) T {
	return read(e, name, def, parse, "")
}

// read parses the variable name with parse, def when it is unset or parse
// fails. The failure is recorded as "name=value is not want" or, with no
// want, as parse's error after the variable's name.
func read[T any](e *Env, name string, def T, parse func(string) (T, error), want string) T {
	v := strings.TrimSpace(e.Getenv(name))
	if v == "" {
		return def
	}
	x, err := parse(v)
	switch {
	case err == nil:
		return x
	case want == "":
		e.record(fmt.Errorf("%s: %w", name, err))
	default:
		e.record(fmt.Errorf("%s=%q is not %s", name, v, want))
	}
	return def
}

// nonNegative is parse refusing a value below zero.
func nonNegative(parse func(string) (time.Duration, error)) func(string) (time.Duration, error) {
	return func(v string) (time.Duration, error) {
		x, err := parse(v)
		if err == nil && x < 0 {
			err = errors.New("negative")
		}
		return x, err
	}
}

// positive is parse refusing a value that is not above zero.
func positive[T int | time.Duration](parse func(string) (T, error)) func(string) (T, error) {
	return func(v string) (T, error) {
		x, err := parse(v)
		if err == nil && x <= 0 {
			err = errors.New("not positive")
		}
		return x, err
	}
}

// SecretSet reports whether the secret name is given, plainly (name) or
// stored (name+ParamSuffix).
func (e *Env) SecretSet(name string) bool {
	return strings.TrimSpace(e.Getenv(name)) != "" || strings.TrimSpace(e.Getenv(name+ParamSuffix)) != ""
}

// Secret returns the secret name gives: the variable's own value (local
// use), or the value stored where name+ParamSuffix points (an SSM
// SecureString or a Secrets Manager secret, see package secrets; the
// production form), read once through e.Secrets. It returns "" when
// neither is set. Setting both ("X and X_PARAM are both set"), a stored
// secret that cannot be read, or a *_PARAM variable without e.Secrets is
// recorded as a problem naming the variable, never showing the value.
func (e *Env) Secret(ctx context.Context, name string) string {
	param := name + ParamSuffix
	plain, ref := strings.TrimSpace(e.Getenv(name)), strings.TrimSpace(e.Getenv(param))
	switch {
	case plain != "" && ref != "":
		e.record(fmt.Errorf("%s and %s are both set: set one", name, param))
		return ""
	case ref == "":
		return plain
	case e.Secrets == nil:
		e.record(fmt.Errorf("%s: no secrets resolver", param))
		return ""
	}
	v, err := e.Secrets.Resolve(ctx, "", ref)
	if err != nil {
		e.record(fmt.Errorf("%s: %w", param, err))
		return ""
	}
	return v
}

// Fail records a problem found by the caller; a nil err is ignored.
func (e *Env) Fail(err error) {
	if err != nil {
		e.record(err)
	}
}

// record records err unless the same problem is recorded already (a
// variable read twice is reported once).
func (e *Env) record(err error) {
	for _, r := range e.errs {
		if r.Error() == err.Error() {
			return
		}
	}
	e.errs = append(e.errs, err)
}

// Problems returns how many problems are recorded so far, so that a
// reader can skip work that depends on a value found wrong.
func (e *Env) Problems() int { return len(e.errs) }

// Err returns every recorded problem joined, or nil.
func (e *Env) Err() error {
	if len(e.errs) == 0 {
		return nil
	}
	return fmt.Errorf("configuration: %w", errors.Join(e.errs...))
}

// Logger returns the JSON logger every function uses. Level from
// SENDONCE_LOG_LEVEL (debug, info, warn, error; default info).
// A level that does not parse is info here; Start records it as a
// problem.
//
// Every line carries Powertools for AWS Lambda's standard keys where the
// meaning is the same (see KeyService and the other Key constants):
// "message" and "timestamp" for slog's "msg" and "time", the function's
// name and memory, and, within an invocation (Invocation,
// which Serve applies), its request id, ARN, X-Ray trace id and whether
// it is the container's cold start.
func Logger(w io.Writer, getenv func(string) string) *slog.Logger {
	return ServiceLogger(w, "", getenv)
}

// ServiceLogger is Logger with every line's service key (KeyService) set
// to service.
func ServiceLogger(w io.Writer, service string, getenv func(string) string) *slog.Logger {
	level, err := parseLevel(getenv(EnvLogLevel))
	if err != nil {
		level = slog.LevelInfo
	}
	json := slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level, ReplaceAttr: powertoolsKeys})
	return slog.New(&contextHandler{Handler: json, static: staticKeys(service, getenv), inv: &invocations{}})
}

// EnvLogLevel is the variable of the log level (Logger).
const EnvLogLevel = "SENDONCE_LOG_LEVEL"

func parseLevel(v string) (slog.Level, error) {
	var level slog.Level
	err := level.UnmarshalText([]byte(strings.TrimSpace(v)))
	return level, err
}

// WithRequest returns log annotated with the Lambda request id of ctx,
// when there is one. A Logger's lines carry it already (as
// KeyFunctionRequestID): log is then returned as it is.
func WithRequest(ctx context.Context, log *slog.Logger) *slog.Logger {
	if _, ok := log.Handler().(*contextHandler); ok {
		return log
	}
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		return log.With(KeyFunctionRequestID, lc.AwsRequestID)
	}
	return log
}

// DynamoDB returns a DynamoDB client for cfg. When AWS_ENDPOINT_URL_DYNAMODB
// points the SDK at an emulator, response checksum validation is turned
// off: DynamoDB Local's error responses carry a wrong CRC32, and every
// conditional-check failure would log a checksum warning. The client keeps
// up to DynamoDBIdleConns idle connections (the SDK keeps 10), so that a
// batch with more calls in flight (SENDONCE_CONCURRENCY) does not close
// and re-dial connections on every call.
func DynamoDB(cfg aws.Config, getenv func(string) string) *dynamodb.Client {
	local := getenv("AWS_ENDPOINT_URL_DYNAMODB") != "" || getenv("AWS_ENDPOINT_URL") != ""
	return dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		if local {
			o.DisableValidateResponseChecksum = true
		}
		if c, ok := o.HTTPClient.(*awshttp.BuildableClient); ok || o.HTTPClient == nil {
			if c == nil {
				c = awshttp.NewBuildableClient()
			}
			o.HTTPClient = c.WithTransportOptions(func(t *http.Transport) { t.MaxIdleConnsPerHost = DynamoDBIdleConns })
		}
	})
}

// DynamoDBIdleConns is the idle connections per host a DynamoDB client
// keeps: as many as the calls a container may have in flight.
const DynamoDBIdleConns = 64

// Fatal logs err as the reason start-up failed and exits: the Lambda
// runtime reports an init error and retries the cold start.
func Fatal(log *slog.Logger, err error) {
	log.Error("start-up failed", "error", err)
	os.Exit(1)
}

// Flusher writes the metrics recorded so far (metrics.EMF).
type Flusher interface{ Flush() error }

// FlushAfter wraps a Lambda handler so that m's metrics are written at the
// end of every invocation, whatever the handler returns.
func FlushAfter[In, Out any](m Flusher, log *slog.Logger, h func(context.Context, In) (Out, error)) func(context.Context, In) (Out, error) {
	return func(ctx context.Context, in In) (Out, error) {
		defer func() {
			if err := m.Flush(); err != nil {
				log.Error("flush metrics", "error", err)
			}
		}()
		return h(ctx, in)
	}
}
