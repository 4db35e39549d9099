package lambdaprovider_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/sendonce/sendonce/internal/provider/lambdaprovider"
	"github.com/sendonce/sendonce/internal/redact"
	"github.com/sendonce/sendonce/internal/testenv"
	"github.com/sendonce/sendonce/internal/testsupport"
	"github.com/sendonce/sendonce/provider"
	"github.com/sendonce/sendonce/provider/providertest"
)

const functionARN = "arn:aws:lambda:us-east-1:123456789012:function:sms-provider:live"

// fakeLambda is a local server of Lambda's Invoke API: each test sets how
// it answers, and it records every invocation.
type fakeLambda struct {
	url string

	mu       sync.Mutex
	handler  http.HandlerFunc
	requests []invocation
}

type invocation struct {
	path, invocationType string
	payload              []byte
}

func newFake(t *testing.T, h http.HandlerFunc) *fakeLambda {
	t.Helper()
	f := &fakeLambda{handler: h}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.requests = append(f.requests, invocation{r.URL.EscapedPath(), r.Header.Get("X-Amz-Invocation-Type"), body})
		h := f.handler
		f.mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(srv.Close)
	f.url = srv.URL
	return f
}

func (f *fakeLambda) invocations() []invocation {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]invocation(nil), f.requests...)
}

// answer replies 200 with the function's payload, as Lambda does for a
// function that returned.
func answer(payload string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Amz-Executed-Version", "7")
		io.WriteString(w, payload)
	}
}

// functionFailed replies as Lambda does for a function that failed: 200,
// X-Amz-Function-Error, the error document.
func functionFailed(errType, msg string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Amz-Function-Error", "Unhandled")
		fmt.Fprintf(w, `{"errorMessage":%q,"errorType":%q}`, msg, errType)
	}
}

// apiError replies as Lambda does when it refuses the invoke.
func apiError(status int, code, msg string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Amzn-Errortype", code)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"Type":"User","message":%q}`, msg)
	}
}

// hang reads the invoke and never answers (the function runs on).
func hang(w http.ResponseWriter, r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-time.After(10 * time.Second):
	}
}

// reset reads the invoke, then drops the connection.
func reset(w http.ResponseWriter, r *http.Request) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(err)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	conn.Close()
}

type bundle struct {
	p   provider.Adapter
	log *testsupport.Buffer
}

// setup returns an adapter of functionARN that invokes endpoint through
// the real SDK client (whose own retries are on: the adapter must turn
// them off), logging at Debug into a buffer.
func setup(t *testing.T, endpoint string, cfg lambdaprovider.Config) bundle {
	t.Helper()
	buf := &testsupport.Buffer{}
	cfg.Client = lambda.NewFromConfig(testenv.Config(), func(o *lambda.Options) { o.BaseEndpoint = aws.String(endpoint) })
	if cfg.Function == "" {
		cfg.Function = functionARN
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 2 * time.Second
	}
	cfg.Logger = buf.Logger(slog.LevelDebug)
	p, err := lambdaprovider.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return bundle{p: p, log: buf}
}

func message() provider.Message {
	return provider.Message{Key: key, Tenant: "acme", Channel: "sms", Class: "otp", To: phone, Body: "Your code is 123456",
		AttemptedAt: time.Now()}
}

// classified returns err as a *provider.Error of the lambda adapter, or
// fails t.
func classified(t *testing.T, err error) *provider.Error {
	t.Helper()
	var pe *provider.Error
	if !errors.As(err, &pe) {
		t.Fatalf("error %v (%T) is not a *provider.Error", err, err)
	}
	return pe
}

// TestSend: an accepted answer is a Receipt; the invoke is synchronous,
// names the function (ARN and qualifier) and carries the request the
// schema describes.
func TestSend(t *testing.T) {
	t.Parallel()
	f := newFake(t, answer(`{"version":1,"status":"accepted","id":"msg_42"}`))
	b := setup(t, f.url, lambdaprovider.Config{})
	r, err := b.p.Send(context.Background(), message())
	if err != nil || r.MessageID != "msg_42" {
		t.Fatalf("Send = %+v, %v; want msg_42", r, err)
	}
	inv := f.invocations()
	if len(inv) != 1 {
		t.Fatalf("%d invocations, want 1", len(inv))
	}
	if want := "/2015-03-31/functions/arn%3Aaws%3Alambda%3Aus-east-1%3A123456789012%3Afunction%3Asms-provider%3Alive/invocations"; inv[0].path != want {
		t.Errorf("path = %s, want %s", inv[0].path, want)
	}
	if inv[0].invocationType != "RequestResponse" {
		t.Errorf("X-Amz-Invocation-Type = %q, want RequestResponse", inv[0].invocationType)
	}
	if ok, err := valid(compile(t, "request"), inv[0].payload); !ok {
		t.Errorf("payload %s is refused by the schema: %v", inv[0].payload, err)
	}
	var req lambdaprovider.Request
	if err := json.Unmarshal(inv[0].payload, &req); err != nil {
		t.Fatal(err)
	}
	if req.Op != lambdaprovider.OpSend || req.Key != key || req.To != phone || req.Content.Text != "Your code is 123456" || req.Class != "otp" {
		t.Errorf("request = %+v", req)
	}
}

// TestSendAnswers: each answer of the function, and each way it can fail
// while running, is classified; no error text holds the recipient.
func TestSendAnswers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		h          http.HandlerFunc
		want       provider.Kind
		code       string
		reasonHas  string
		reasonLack string
	}{
		{"Rejected", answer(`{"status":"rejected","reason":"invalid number ` + phone + ` (landline)","code":"21614"}`),
			provider.Permanent, "21614", "invalid number", phone},
		{"RejectedNoReason", answer(`{"status":"rejected"}`), provider.Permanent, "", "rejected by the function", ""},
		{"Retry", answer(`{"status":"retry","reason":"provider throttled","code":"429"}`), provider.Transient, "429", "provider throttled", ""},
		{"RetryNoReason", answer(`{"status":"retry"}`), provider.Transient, "", "retry later", ""},
		{"FunctionError", functionFailed("Error", "socket hang up sending to "+phone), provider.Ambiguous, "Error", "may have sent", phone},
		{"FunctionTimeout", functionFailed("Sandbox.Timedout", "RequestId: 1 Error: Task timed out after 3.00 seconds"),
			provider.Ambiguous, "Sandbox.Timedout", "Task timed out", ""},
		{"EmulatorErrorDocument", answer(`{"errorMessage":"boom","errorType":"errorString"}`), provider.Ambiguous, "errorString", "boom", ""},
		{"EmulatorTimeout", answer(`Task timed out after 1.00 seconds`), provider.Ambiguous, "Sandbox.Timedout", "timed out", ""},
		{"AcceptedWithoutID", answer(`{"status":"accepted"}`), provider.Ambiguous, "", "accepted without an id", ""},
		{"UnknownStatus", answer(`{"status":"queued","id":"m"}`), provider.Ambiguous, "", "not an answer to send", ""},
		{"NotFoundToASend", answer(`{"status":"not_found"}`), provider.Ambiguous, "", "not an answer to send", ""},
		{"NotJSON", answer(`ok`), provider.Ambiguous, "", "not a JSON object", ""},
		{"NullAnswer", answer(`null`), provider.Ambiguous, "", "not a JSON object", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, tt.h)
			b := setup(t, f.url, lambdaprovider.Config{})
			_, err := b.p.Send(context.Background(), message())
			pe := classified(t, err)
			providertest.CheckClassified(t, pe, tt.want, "lambda", phone)
			if pe.Code != tt.code || !strings.Contains(pe.Reason, tt.reasonHas) {
				t.Errorf("code %q, reason %q; want code %q and a reason with %q", pe.Code, pe.Reason, tt.code, tt.reasonHas)
			}
			if tt.reasonLack != "" && strings.Contains(b.log.String(), tt.reasonLack) {
				t.Errorf("the log holds %q: %s", tt.reasonLack, b.log.String())
			}
			if n := len(f.invocations()); n != 1 {
				t.Errorf("%d invocations, want 1", n)
			}
		})
	}
}

// TestSendInvokeErrors: Lambda's own refusals, by error code, each in one
// HTTP attempt (the SDK's retries are off for Invoke: a retry could run
// the function twice).
func TestSendInvokeErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		status int
		code   string
		want   provider.Kind
	}{
		{429, "TooManyRequestsException", provider.Transient},
		{409, "ResourceConflictException", provider.Transient},
		{502, "ResourceNotReadyException", provider.Transient},
		{502, "EC2ThrottledException", provider.Transient},
		{404, "ResourceNotFoundException", provider.Config},
		{403, "AccessDeniedException", provider.Config},
		{403, "UnrecognizedClientException", provider.Config},
		{400, "InvalidParameterValueException", provider.Config},
		{400, "InvalidRequestContentException", provider.Config},
		{502, "KMSAccessDeniedException", provider.Config},
		{502, "InvalidZipFileException", provider.Config},
		{400, "RecursiveInvocationException", provider.Config},
		{413, "RequestTooLargeException", provider.Permanent},
		{500, "ServiceException", provider.Ambiguous},
		{410, "EFSIOException", provider.Ambiguous},
		{400, "SomethingNewException", provider.Config},
		{429, "SomethingNewException", provider.Transient},
		{503, "SomethingNewException", provider.Ambiguous},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s_%d", tt.code, tt.status), func(t *testing.T) {
			t.Parallel()
			f := newFake(t, apiError(tt.status, tt.code, "refused for "+phone))
			b := setup(t, f.url, lambdaprovider.Config{})
			_, err := b.p.Send(context.Background(), message())
			pe := classified(t, err)
			providertest.CheckClassified(t, pe, tt.want, "lambda", phone)
			if pe.Code != tt.code {
				t.Errorf("code = %q, want %q", pe.Code, tt.code)
			}
			if n := len(f.invocations()); n != 1 {
				t.Errorf("%d HTTP attempts, want exactly 1", n)
			}
		})
	}
}

// TestSendNoAnswer: an invoke that was sent and never answered, or whose
// connection broke, is ambiguous, within the adapter's timeout; one that
// could not connect is transient.
func TestSendNoAnswer(t *testing.T) {
	t.Parallel()
	closed := func(t *testing.T) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		return "http://" + addr
	}
	const timeout = 300 * time.Millisecond
	tests := []struct {
		name string
		url  func(t *testing.T) string
		want provider.Kind
		has  string
	}{
		{"Hang", func(t *testing.T) string { return newFake(t, hang).url }, provider.Ambiguous, "within the timeout"},
		{"Reset", func(t *testing.T) string { return newFake(t, reset).url }, provider.Ambiguous, "after the invoke was sent"},
		{"Refused", closed, provider.Transient, "nothing was sent"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, tt.url(t), lambdaprovider.Config{Timeout: timeout})
			start := time.Now()
			_, err := b.p.Send(context.Background(), message())
			pe := classified(t, err)
			providertest.CheckClassified(t, pe, tt.want, "lambda", phone)
			if !strings.Contains(pe.Reason, tt.has) {
				t.Errorf("reason %q, want one with %q", pe.Reason, tt.has)
			}
			if d := time.Since(start); d > timeout+2*time.Second {
				t.Errorf("Send took %s, past its %s timeout", d, timeout)
			}
		})
	}
}

func TestSendWithoutKey(t *testing.T) {
	t.Parallel()
	f := newFake(t, answer(`{"status":"accepted","id":"m"}`))
	b := setup(t, f.url, lambdaprovider.Config{})
	m := message()
	m.Key = ""
	_, err := b.p.Send(context.Background(), m)
	if k := provider.KindOf(err); k != provider.Config {
		t.Errorf("kind = %s (%v), want config", k, err)
	}
	if n := len(f.invocations()); n != 0 {
		t.Errorf("%d invocations, want none", n)
	}
}

// TestLookup: the answers to op lookup, and its failures, which are
// transient (a lookup sends nothing) unless the deployment is at fault.
func TestLookup(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		h       http.HandlerFunc
		want    provider.LookupResult
		wantErr provider.Kind
		isErr   bool
	}{
		{"Accepted", answer(`{"status":"accepted","id":"msg_1"}`), provider.LookupResult{Status: provider.LookupAccepted, MessageID: "msg_1"}, 0, false},
		{"Rejected", answer(`{"status":"rejected","id":"msg_2","reason":"undeliverable to ` + phone + `"}`),
			provider.LookupResult{Status: provider.LookupRejected, MessageID: "msg_2", Reason: "undeliverable to " + redact.Address(phone)}, 0, false},
		{"NotFound", answer(`{"status":"not_found"}`), provider.LookupResult{Status: provider.LookupNotFound}, 0, false},
		{"Retry", answer(`{"status":"retry","reason":"provider down"}`), provider.LookupResult{}, provider.Transient, true},
		{"FunctionError", functionFailed("Error", "boom"), provider.LookupResult{}, provider.Transient, true},
		{"Unreadable", answer(`{"status":"maybe"}`), provider.LookupResult{}, provider.Transient, true},
		{"Throttled", apiError(429, "TooManyRequestsException", "Rate exceeded"), provider.LookupResult{}, provider.Transient, true},
		{"ServiceException", apiError(500, "ServiceException", "oops"), provider.LookupResult{}, provider.Transient, true},
		{"AccessDenied", apiError(403, "AccessDeniedException", "no"), provider.LookupResult{}, provider.Config, true},
		{"NoSuchFunction", apiError(404, "ResourceNotFoundException", "Function not found"), provider.LookupResult{}, provider.Config, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, tt.h)
			b := setup(t, f.url, lambdaprovider.Config{Lookup: true})
			l, ok := b.p.(provider.Looker)
			if !ok {
				t.Fatal("an adapter declared to look up is not a provider.Looker")
			}
			m := message()
			m.AttemptedUntil, m.ProviderMessageID = m.AttemptedAt.Add(time.Minute), "msg_cb"
			got, err := l.Lookup(context.Background(), m)
			if tt.isErr {
				var pe *provider.Error
				if !errors.As(err, &pe) || pe.Kind != tt.wantErr || pe.Op != "lookup" || pe.Provider != "lambda" {
					t.Fatalf("Lookup = %+v, %v; want a %s lookup error", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Lookup = %+v, %v; want %+v", got, err, tt.want)
			}
			inv := f.invocations()
			var req lambdaprovider.Request
			if len(inv) != 1 || json.Unmarshal(inv[0].payload, &req) != nil {
				t.Fatalf("invocations %v", inv)
			}
			if req.Op != lambdaprovider.OpLookup || req.AttemptedUntil == "" || req.ProviderMessageID != "msg_cb" {
				t.Errorf("lookup request = %+v, want op lookup with the window and the callback's id", req)
			}
			if ok, err := valid(compile(t, "request"), inv[0].payload); !ok {
				t.Errorf("the schema refuses the lookup request: %v", err)
			}
		})
	}
}

// TestCapabilities: the adapter claims what the configuration declares,
// and implements provider.Looker only when lookup is declared.
func TestCapabilities(t *testing.T) {
	t.Parallel()
	for _, c := range []provider.Capabilities{{}, {IdempotentSends: true}, {LookupByReference: true}, {IdempotentSends: true, LookupByReference: true}} {
		b := setup(t, "http://127.0.0.1:9", lambdaprovider.Config{Idempotent: c.IdempotentSends, Lookup: c.LookupByReference})
		if got := b.p.Capabilities(); got != c {
			t.Errorf("Capabilities = %+v, want %+v", got, c)
		}
		if _, ok := b.p.(provider.Looker); ok != c.LookupByReference {
			t.Errorf("declared %+v: implements Looker = %v", c, ok)
		}
		if b.p.Name() != "lambda" {
			t.Errorf("Name = %q", b.p.Name())
		}
	}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	client := lambda.NewFromConfig(testenv.Config())
	tests := []struct {
		name string
		cfg  lambdaprovider.Config
		has  string
	}{
		{"NoClient", lambdaprovider.Config{Function: "f"}, "Client"},
		{"NoFunction", lambdaprovider.Config{Client: client}, "Function"},
		{"BadFunction", lambdaprovider.Config{Client: client, Function: "arn:aws:sns:us-east-1:123456789012:topic"}, "Function"},
		{"NegativeTimeout", lambdaprovider.Config{Client: client, Function: "f", Timeout: -time.Second}, "Timeout"},
	}
	for _, tt := range tests {
		_, err := lambdaprovider.New(tt.cfg)
		if !errors.Is(err, lambdaprovider.ErrInvalidConfig) || !strings.Contains(err.Error(), tt.has) {
			t.Errorf("%s: New = %v, want ErrInvalidConfig naming %s", tt.name, err, tt.has)
		}
	}
}

func TestCheckFunction(t *testing.T) {
	t.Parallel()
	for fn, ok := range map[string]bool{
		"arn:aws:lambda:us-east-1:123456789012:function:sms-provider":         true,
		"arn:aws:lambda:eu-central-1:123456789012:function:sms_provider:live": true,
		"arn:aws:lambda:us-east-1:123456789012:function:sms:$LATEST":          true,
		"arn:aws:lambda:us-east-1:123456789012:function:sms:12":               true,
		"arn:aws-us-gov:lambda:us-gov-west-1:123456789012:function:sms":       true,
		"arn:aws-cn:lambda:cn-north-1:123456789012:function:sms":              true,
		"function":          true,
		"sms-provider:live": true,
		"":                  false,
		"arn:aws:lambda:us-east-1:123456789012:function:":               false,
		"arn:aws:lambda:us-east-1:1234:function:sms":                    false,
		"arn:aws:sns:us-east-1:123456789012:sms":                        false,
		"arn:aws:lambda:us-east-1:123456789012:layer:sms":               false,
		"arn:aws:lambda:us-east-1:123456789012:function:sms:live:extra": false,
		"sms provider": false,
		"https://lambda.us-east-1.amazonaws.com/sms":                                false,
		strings.Repeat("f", 65):                                                     false,
		"arn:aws:lambda:us-east-1:123456789012:function:" + strings.Repeat("f", 64): true,
	} {
		if err := lambdaprovider.CheckFunction(fn); (err == nil) != ok {
			t.Errorf("CheckFunction(%q) = %v, want ok %v", fn, err, ok)
		}
	}
}
