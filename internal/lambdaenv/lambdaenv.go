// Package lambdaenv holds what every function's main needs and nothing
// else: reading and validating configuration from the environment, the
// JSON logger, the EMF recorder flushed per invocation, and AWS clients
// built from the SDK's standard variables.
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
)

// Env reads configuration variables and collects every problem, so that
// start-up reports all of them at once.
type Env struct {
	Getenv func(string) string
	errs   []error
}

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
		e.errs = append(e.errs, fmt.Errorf("%s is required", name))
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
	v := strings.TrimSpace(e.Getenv(name))
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		e.errs = append(e.errs, fmt.Errorf("%s=%q is not a positive Go duration such as 5s or 720h", name, v))
		return def
	}
	return d
}

// Int parses a positive integer, def when unset.
func (e *Env) Int(name string, def int) int {
	v := strings.TrimSpace(e.Getenv(name))
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		e.errs = append(e.errs, fmt.Errorf("%s=%q is not a positive integer", name, v))
		return def
	}
	return n
}

// Fail records a problem found by the caller.
func (e *Env) Fail(err error) { e.errs = append(e.errs, err) }

// Err returns every recorded problem joined, or nil.
func (e *Env) Err() error {
	if len(e.errs) == 0 {
		return nil
	}
	return fmt.Errorf("configuration: %w", errors.Join(e.errs...))
}

// Logger returns the JSON logger every function uses. Level from
// SENDONCE_LOG_LEVEL (debug, info, warn, error; default info).
func Logger(w io.Writer, getenv func(string) string) *slog.Logger {
	var level slog.Level
	if err := level.UnmarshalText([]byte(getenv("SENDONCE_LOG_LEVEL"))); err != nil {
		level = slog.LevelInfo
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level}))
}

// WithRequest returns log annotated with the Lambda request id of ctx,
// when there is one.
func WithRequest(ctx context.Context, log *slog.Logger) *slog.Logger {
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		return log.With("request_id", lc.AwsRequestID)
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
