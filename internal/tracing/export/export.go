// Package export installs the exporter of package tracing's spans in a
// Lambda function: OTLP/HTTP to X-Ray's OTLP endpoint, signed with the
// function's role. It is apart from package tracing so that a program
// that only enqueues or sends (the root package) links the OpenTelemetry
// API alone, not the exporter and the protobuf and gRPC packages it
// brings.
package export

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"go.opentelemetry.io/contrib/propagators/aws/xray"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
)

// EnvEndpoint is the standard OpenTelemetry variable that turns tracing
// on: the OTLP/HTTP traces endpoint. The templates set it to X-Ray's
// OTLP endpoint, https://xray.<region>.amazonaws.com/v1/traces, to which
// each request is signed with the function's role (SigV4, service
// "xray"). Unset (tests, local runs): no exporter, no span recorded.
const EnvEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"

// Setup installs, when getenv(EnvEndpoint) names an endpoint, a tracer
// provider that exports to it in batches (X-Ray trace ids, every trace
// sampled: the Lambda function's own tracing samples), and the X-Ray
// propagator; service names the function. It returns the function that
// exports what is pending (call it before an invocation returns: a Lambda
// environment may be frozen right after), a no-op without an endpoint.
// An endpoint of AWS's (its host ends in amazonaws.com) is signed.
func Setup(ctx context.Context, cfg aws.Config, service string, getenv func(string) string) (flush func(context.Context), err error) {
	endpoint := getenv(EnvEndpoint)
	if endpoint == "" {
		return func(context.Context) {}, nil
	}
	opts := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(endpoint)}
	if signed(endpoint) {
		opts = append(opts, otlptracehttp.WithHTTPClient(&http.Client{Timeout: 5 * time.Second, Transport: &sigV4{cfg: cfg, next: http.DefaultTransport}}))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("tracing export: exporter: %w", err)
	}
	res := resource.NewSchemaless(semconv.ServiceName(service), semconv.CloudProviderAWS, semconv.FaaSName(getenv("AWS_LAMBDA_FUNCTION_NAME")))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithIDGenerator(xray.NewIDGenerator()), sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample())))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(xray.Propagator{})
	return func(ctx context.Context) { _ = tp.ForceFlush(ctx) }, nil
}

func signed(endpoint string) bool {
	req, err := http.NewRequest(http.MethodPost, endpoint, nil)
	if err != nil {
		return false
	}
	h := req.URL.Hostname()
	return strings.HasSuffix(h, ".amazonaws.com") || strings.HasSuffix(h, ".amazonaws.com.cn")
}

// sigV4 signs each request to X-Ray's OTLP endpoint with the function's
// credentials, as the endpoint requires.
type sigV4 struct {
	cfg  aws.Config
	next http.RoundTripper
}

func (s *sigV4) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		body = b
	}
	req = req.Clone(req.Context())
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	req.ContentLength = int64(len(body))
	creds, err := s.cfg.Credentials.Retrieve(req.Context())
	if err != nil {
		return nil, fmt.Errorf("tracing export: credentials: %w", err)
	}
	sum := sha256.Sum256(body)
	if err := v4.NewSigner().SignHTTP(req.Context(), creds, req, hex.EncodeToString(sum[:]), "xray", s.cfg.Region, time.Now()); err != nil {
		return nil, fmt.Errorf("tracing export: sign: %w", err)
	}
	return s.next.RoundTrip(req)
}
