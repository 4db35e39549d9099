// Package lambdaapp is the wiring of the SAM application's Lambda
// functions: the configuration they read from their environment
// (docs/configuration.md lists every variable), the clients built from
// it once per container, and the Lambda runtime. A function of your own
// starts from it too and changes what it builds: adds its own provider to
// a route, say.
//
// It is for a Lambda function's main, and it changes the process's
// globals as such a main does: LoadEnvironment makes its JSON logger
// slog's default and its redaction key the process's, and Must exits. A
// program that only sends (a worker, a service) needs none of it: build
// a sendonce.Sender from sendonce.NewDynamoLedger and the adapters of
// your choice, and the program links neither this package nor the AWS
// services it reads its configuration from (SSM, Secrets Manager) or the
// built-in providers it builds (SNS, SES, Lambda).
package lambdaapp

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sendonce/sendonce"
	"github.com/sendonce/sendonce/internal/api"
	"github.com/sendonce/sendonce/internal/api/idempotency/dynamoidempotency"
	"github.com/sendonce/sendonce/internal/api/ratelimit/dynamoratelimit"
	"github.com/sendonce/sendonce/internal/apikey"
	"github.com/sendonce/sendonce/internal/apikey/dynamoapikey"
	"github.com/sendonce/sendonce/internal/lambdaenv"
	"github.com/sendonce/sendonce/internal/metrics"
	"github.com/sendonce/sendonce/internal/sendpath"
	"github.com/sendonce/sendonce/internal/webhook"
	"github.com/sendonce/sendonce/notify"
	"github.com/sendonce/sendonce/provider"
)

// Environment is the configuration the SAM application's functions read
// from their environment (docs/configuration.md lists every variable),
// with the clients built from it once per container. A program of its
// own can start from it too, and change what it builds: add its own
// provider to SenderConfig's sendonce.Routes, say.
//
// Every problem with the variables is collected; the first config
// method that finds any returns all of them as one error.
type Environment struct {
	fn      *lambdaenv.Function
	metrics *Metrics
}

// LoadEnvironment starts the function named function: the JSON logger
// (SENDONCE_LOG_LEVEL), also slog's default; the AWS configuration, read
// the SDK's standard way; the redaction of addresses in logs; the DynamoDB
// client; and the one table, SENDONCE_TABLE.
func LoadEnvironment(ctx context.Context, function string) *Environment {
	fn := lambdaenv.Start(ctx, function)
	return &Environment{fn: fn, metrics: &Metrics{emf: fn.Metrics}}
}

// Logger returns the function's logger.
func (e *Environment) Logger() *slog.Logger { return e.fn.Log }

// RequestLogger returns the function's logger annotated with the Lambda
// request id that ctx carries.
func (e *Environment) RequestLogger(ctx context.Context) *slog.Logger {
	return lambdaenv.WithRequest(ctx, e.fn.Log)
}

// Metrics returns the function's metrics, flushed after every invocation
// by Serve.
func (e *Environment) Metrics() *Metrics { return e.metrics }

// Metrics is a function's sendonce.Metrics: EMF lines on stdout in its
// stack's own namespace, sendonce/<SENDONCE_STACK> (the namespace the
// stack's alarms read; sendonce outside a stack), dimensioned by the
// function's name. Serve flushes it after every invocation; a
// long-running program flushes it itself.
type Metrics struct {
	emf *metrics.EMF
}

// Count implements sendonce.Metrics.
func (m *Metrics) Count(name string, n int, dims ...sendonce.Dim) {
	m.emf.Count(name, n, internalDims(dims)...)
}

// Latency implements sendonce.Metrics.
func (m *Metrics) Latency(name string, d time.Duration, dims ...sendonce.Dim) {
	m.emf.Latency(name, d, internalDims(dims)...)
}

// Flush writes what was recorded since the last Flush.
func (m *Metrics) Flush() error { return m.emf.Flush() }

func internalDims(dims []sendonce.Dim) []metrics.Dim {
	out := make([]metrics.Dim, len(dims))
	for i, d := range dims {
		out[i] = metrics.Dim(d)
	}
	return out
}

// Ledger returns the ledger on the one table (SENDONCE_TABLE), keeping
// rows for SENDONCE_RETENTION.
func (e *Environment) Ledger() (*sendonce.Ledger, error) {
	retention := e.fn.Env.Duration(lambdaenv.EnvRetention, sendonce.DefaultRetention)
	if err := e.fn.Env.Err(); err != nil {
		return nil, err
	}
	return sendonce.NewDynamoLedger(e.fn.DB, e.fn.Table, retention)
}

// sendPath reads what the sender and the reconciler share: the ledger,
// the timeouts and the channels' routes (SENDONCE_<CHANNEL>_PROVIDER and
// each provider's own variables).
func (e *Environment) sendPath(ctx context.Context) (sendpath.Settings, *sendonce.Ledger, sendonce.Routes) {
	shared := sendpath.Read(e.fn.Env)
	deps := sendpath.Build(ctx, e.fn, shared)
	routes := sendonce.Routes{}
	for ch, p := range deps.Providers {
		routes[notify.Channel(ch)] = append([]provider.Adapter{p}, deps.Fallbacks[ch]...)
	}
	l, err := e.Ledger()
	if err != nil {
		e.fn.Env.Fail(err)
	}
	return shared, l, routes
}

// sendonce.SenderConfig reads the sender's configuration: the send path's
// (ledger, routes, timeouts, the classes' validity SENDONCE_VALIDITY),
// the dead-letter queue (SENDONCE_DLQ_URL), SENDONCE_CONCURRENCY and
// SENDONCE_TEMPLATE_CACHE.
func (e *Environment) SenderConfig(ctx context.Context) (sendonce.SenderConfig, error) {
	shared, l, routes := e.sendPath(ctx)
	dlqURL := e.fn.Env.Required("SENDONCE_DLQ_URL")
	concurrency := e.fn.Env.Int("SENDONCE_CONCURRENCY", 0)
	if err := e.fn.Env.Err(); err != nil {
		return sendonce.SenderConfig{}, err
	}
	return sendonce.SenderConfig{
		Ledger:           l,
		Routes:           routes,
		DeadLetters:      sendonce.NewSQSDeadLetters(sqs.NewFromConfig(e.fn.AWS), dlqURL),
		TemplateCacheTTL: shared.TemplateCache,
		Metrics:          e.Metrics(),
		Logger:           e.fn.Log,
		ProviderTimeout:  shared.ProviderTimeout,
		ClaimTimeout:     shared.ClaimTimeout,
		Settle:           shared.Settle,
		RetryBase:        shared.RetryBase,
		Concurrency:      concurrency,
		Validity:         classValidity(shared.Validity),
	}, nil
}

// sendonce.ReconcilerConfig reads the reconciler's configuration: the send path's,
// SENDONCE_MAX_AGE, SENDONCE_RECONCILE_MAX_ATTEMPTS,
// SENDONCE_RECONCILE_MAX_ROWS and SENDONCE_RECONCILE_POLICIES.
func (e *Environment) ReconcilerConfig(ctx context.Context) (sendonce.ReconcilerConfig, error) {
	shared, l, routes := e.sendPath(ctx)
	maxAttempts := e.fn.Env.Int("SENDONCE_RECONCILE_MAX_ATTEMPTS", 0)
	maxRows := e.fn.Env.Int("SENDONCE_RECONCILE_MAX_ROWS", 0)
	concurrency := e.fn.Env.Int("SENDONCE_RECONCILE_CONCURRENCY", 0)
	policies := lambdaenv.Value(e.fn.Env, "SENDONCE_RECONCILE_POLICIES", nil, sendonce.ParsePolicies)
	if err := e.fn.Env.Err(); err != nil {
		return sendonce.ReconcilerConfig{}, err
	}
	return sendonce.ReconcilerConfig{
		Ledger:          l,
		Routes:          routes,
		Policies:        policies,
		Metrics:         e.Metrics(),
		Logger:          e.fn.Log,
		ProviderTimeout: shared.ProviderTimeout,
		ClaimTimeout:    shared.ClaimTimeout,
		Settle:          shared.Settle,
		MaxAge:          shared.MaxAge,
		RetryBase:       shared.RetryBase,
		MaxAttempts:     maxAttempts,
		MaxRows:         maxRows,
		Concurrency:     concurrency,
	}, nil
}

// FinderConfig reads the configuration of a reconciler that only finds
// the work and hands it out (Reconciler.Find): the ledger, the timeouts,
// SENDONCE_RECONCILE_MAX_ROWS and SENDONCE_RECONCILE_PAGE_SIZE. It builds
// no provider and reads no provider secret.
func (e *Environment) FinderConfig() (sendonce.ReconcilerConfig, error) {
	shared := sendpath.Read(e.fn.Env)
	maxRows := e.fn.Env.Int("SENDONCE_RECONCILE_MAX_ROWS", 0)
	pageSize := e.fn.Env.Int("SENDONCE_RECONCILE_PAGE_SIZE", 0)
	l, err := e.Ledger()
	if err != nil {
		return sendonce.ReconcilerConfig{}, err
	}
	return sendonce.ReconcilerConfig{Ledger: l, Metrics: e.Metrics(), Logger: e.fn.Log,
		ProviderTimeout: shared.ProviderTimeout, ClaimTimeout: shared.ClaimTimeout, MaxRows: maxRows, PageSize: pageSize}, nil
}

// ReconcileQueue returns the queue of the reconcile workers
// (SENDONCE_RECONCILE_QUEUE_URL), or nil when it is not set: the
// reconciler then settles the rows itself (Reconciler.Run).
func (e *Environment) ReconcileQueue() *sendonce.ReconcileQueue {
	url := e.fn.Env.String("SENDONCE_RECONCILE_QUEUE_URL", "")
	if url == "" {
		return nil
	}
	return sendonce.NewSQSReconcileQueue(sqs.NewFromConfig(e.fn.AWS), url)
}

// sendonce.CallbacksConfig reads the callbacks' configuration: the ledger,
// SENDONCE_CALLBACK_DEDUP_TTL and, when secrets is true, the callback
// secrets (SENDONCE_HTTP_PROVIDER_CALLBACK_SECRET,
// SENDONCE_TWILIO_AUTH_TOKEN) and SENDONCE_CALLBACK_BASE_URL. The SES
// events function, which serves no HTTP route, reads none.
func (e *Environment) CallbacksConfig(ctx context.Context, secrets bool) (sendonce.CallbacksConfig, error) {
	cfg := sendonce.CallbacksConfig{
		DedupTTL: e.fn.Env.Duration("SENDONCE_CALLBACK_DEDUP_TTL", webhook.DefaultDedupTTL),
		Metrics:  e.Metrics(),
		Logger:   e.fn.Log,
	}
	if secrets {
		cfg.HTTPSecret = []byte(e.fn.Env.Secret(ctx, "SENDONCE_HTTP_PROVIDER_CALLBACK_SECRET"))
		cfg.TwilioAuthToken = e.fn.Env.Secret(ctx, "SENDONCE_TWILIO_AUTH_TOKEN")
		cfg.PublicBaseURL = e.fn.Env.URL("SENDONCE_CALLBACK_BASE_URL") // https, or http to a loopback host
	}
	// Ledger reads SENDONCE_RETENTION, then reports every problem found.
	l, err := e.Ledger()
	if err != nil {
		return sendonce.CallbacksConfig{}, err
	}
	cfg.Ledger = l
	return cfg, nil
}

// APIHandler reads the HTTP API's configuration (SENDONCE_QUEUE_URL, the
// API's retention and rate limits) and returns the handler of
// POST /v1/notifications and GET /v1/notifications/{id}, for API
// Gateway's HTTP API (payload format 2.0). Callers authenticate with the
// API keys `sendonce apikey create` stores in the table.
func (e *Environment) APIHandler() (func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error), error) {
	env := api.ReadEnv(e.fn.Env)
	l := e.fn.Ledger()
	if err := e.fn.Env.Err(); err != nil {
		return nil, err
	}
	h, err := api.New(api.Config{
		Keys:          apikey.New(dynamoapikey.New(e.fn.DB, e.fn.Table), apikey.Config{}),
		Ledger:        l,
		Queue:         sqs.NewFromConfig(e.fn.AWS),
		QueueURL:      env.QueueURL,
		Idempotency:   dynamoidempotency.New(e.fn.DB, e.fn.Table),
		RateWindows:   dynamoratelimit.New(e.fn.DB, e.fn.Table),
		Retention:     env.Retention,
		TenantRate:    env.TenantRate,
		RecipientRate: env.RecipientRate,
		Metrics:       e.fn.Metrics,
		Logger:        e.fn.Log,
	})
	if err != nil {
		return nil, fmt.Errorf("sendonce: api: %w", err)
	}
	return h.Handle, nil
}

// Must ends start-up when err is not nil: it logs err as the function's
// start-up failure and exits, so that Lambda reports an init error.
func (e *Environment) Must(err error) {
	e.fn.Must(err)
}

// Serve hands h to the Lambda runtime with the function's metrics flushed
// after every invocation. It does not return.
func Serve[In, Out any](e *Environment, h func(context.Context, In) (Out, error)) {
	lambdaenv.Serve(e.fn, h) // flushes e.fn.Metrics, which Metrics records to
}

// classValidity keys the validity SENDONCE_VALIDITY parsed by class.
func classValidity(in map[string]time.Duration) map[notify.Class]time.Duration {
	if in == nil {
		return nil
	}
	out := make(map[notify.Class]time.Duration, len(in))
	for class, v := range in {
		out[notify.Class(class)] = v
	}
	return out
}
