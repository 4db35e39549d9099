package export

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"go.opentelemetry.io/otel"
)

// TestSigned: only AWS's endpoints are signed.
func TestSigned(t *testing.T) {
	for endpoint, want := range map[string]bool{
		"https://xray.us-east-1.amazonaws.com/v1/traces":     true,
		"https://xray.cn-north-1.amazonaws.com.cn/v1/traces": true,
		"http://127.0.0.1:4318/v1/traces":                    false,
		"https://collector.example.com/v1/traces":            false,
		"https://amazonaws.com.example.com/v1/traces":        false,
		"::not a url": false,
	} {
		if got := signed(endpoint); got != want {
			t.Errorf("signed(%q) = %v, want %v", endpoint, got, want)
		}
	}
}

// TestSigV4: a request to X-Ray's OTLP endpoint carries a SigV4
// signature for service xray in the function's Region, made with its
// credentials, and its body arrives whole.
func TestSigV4(t *testing.T) {
	var got *http.Request
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		body, _ = io.ReadAll(r.Body)
	}))
	defer srv.Close()
	cfg := aws.Config{Region: "eu-west-1", Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", "token")}
	c := &http.Client{Transport: &sigV4{cfg: cfg, next: http.DefaultTransport}}
	resp, err := c.Post(srv.URL+"/v1/traces", "application/x-protobuf", strings.NewReader("spans"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	auth := got.Header.Get("Authorization")
	if !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/") || !strings.Contains(auth, "/eu-west-1/xray/aws4_request") {
		t.Errorf("Authorization %q, want a SigV4 signature for xray in eu-west-1", auth)
	}
	if got.Header.Get("X-Amz-Date") == "" || got.Header.Get("X-Amz-Security-Token") != "token" {
		t.Errorf("headers %v lack X-Amz-Date or the session token", got.Header)
	}
	if string(body) != "spans" {
		t.Errorf("body %q, want %q", body, "spans")
	}
	if strings.Contains(auth, "secret") {
		t.Error("the secret key is in the Authorization header")
	}
}

// TestSetup: without an endpoint nothing is installed; with one, a span
// reaches it as OTLP/HTTP protobuf when flush is called (unsigned: not an
// AWS endpoint).
func TestSetup(t *testing.T) {
	before := otel.GetTracerProvider()
	flush, err := Setup(t.Context(), aws.Config{}, "sender", func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	flush(t.Context())
	if otel.GetTracerProvider() != before {
		t.Fatal("Setup without an endpoint installed a tracer provider")
	}

	var mu sync.Mutex
	var posts []*http.Request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		posts = append(posts, r)
		mu.Unlock()
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	defer srv.Close()
	env := map[string]string{EnvEndpoint: srv.URL + "/v1/traces", "AWS_LAMBDA_FUNCTION_NAME": "sendonce-sender"}
	flush, err = Setup(t.Context(), aws.Config{}, "sender", func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { otel.SetTracerProvider(before) })
	_, span := otel.Tracer("test").Start(context.Background(), "sendonce.process")
	span.End()
	flush(t.Context())
	mu.Lock()
	defer mu.Unlock()
	if len(posts) != 1 {
		t.Fatalf("the endpoint received %d requests, want 1", len(posts))
	}
	if p := posts[0]; p.URL.Path != "/v1/traces" || p.Header.Get("Content-Type") != "application/x-protobuf" || p.Header.Get("Authorization") != "" {
		t.Errorf("request %s %s, Content-Type %q, Authorization %q; want /v1/traces, protobuf, unsigned", p.Method, p.URL.Path, p.Header.Get("Content-Type"), p.Header.Get("Authorization"))
	}
}
