package registry_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"

	"github.com/sendonce/sendonce/internal/lambdaenv"
	"github.com/sendonce/sendonce/internal/provider/registry"
	"github.com/sendonce/sendonce/internal/provider/simulator"
	"github.com/sendonce/sendonce/internal/provider/twilio/twiliotest"
	"github.com/sendonce/sendonce/internal/testenv"
	"github.com/sendonce/sendonce/internal/testsupport"
	"github.com/sendonce/sendonce/notify"
	"github.com/sendonce/sendonce/provider"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// base holds complete settings for every provider; cases add the channel
// choices and remove or break settings.
func base() map[string]string {
	return map[string]string{
		registry.EnvHTTPURL:          "http://127.0.0.1:9/",
		registry.EnvHTTPToken:        "http-token",
		registry.EnvTwilioAccountSID: "AC123",
		registry.EnvTwilioAuthToken:  "twilio-token",
		registry.EnvTwilioFrom:       "+15550001111",
		registry.EnvSMTPHost:         "127.0.0.1",
		registry.EnvSMTPFrom:         "notify@sendonce.example",
		registry.EnvSMTPTLS:          "none",
	}
}

func awsConfig(t *testing.T) aws.Config {
	t.Helper()
	cfg := testenv.Config()
	cfg.BaseEndpoint = aws.String(testenv.MotoEndpoint(t))
	return cfg
}

func TestFromEnv(t *testing.T) {
	t.Parallel()
	cfg := awsConfig(t)
	tests := []struct {
		name    string
		set     map[string]string
		unset   []string
		want    map[string]string // channel → provider name
		wantErr string
	}{
		{name: "NoneConfigured", want: map[string]string{}},
		{name: "HTTPEverywhere", set: map[string]string{registry.EnvSMSProvider: "http", registry.EnvEmailProvider: "HTTP", registry.EnvPushProvider: "http"},
			want: map[string]string{"sms": "http", "email": "http", "push": "http"}},
		{name: "Mixed", set: map[string]string{registry.EnvSMSProvider: "twilio", registry.EnvEmailProvider: "smtp", registry.EnvPushProvider: "sns"},
			want: map[string]string{"sms": "twilio", "email": "smtp", "push": "sns"}},
		{name: "SNSSMS", set: map[string]string{registry.EnvSMSProvider: "sns", registry.EnvSNSSenderID: "ACME"}, want: map[string]string{"sms": "sns"}},
		{name: "SNSEmailTopic", set: map[string]string{registry.EnvEmailProvider: "sns", registry.EnvSNSEmailTopicARN: "arn:aws:sns:us-east-1:123456789012:mail"}, want: map[string]string{"email": "sns"}},
		{name: "SNSEmailNoTopic", set: map[string]string{registry.EnvEmailProvider: "sns"}, wantErr: registry.EnvSNSEmailTopicARN},
		{name: "SNSBadTopic", set: map[string]string{registry.EnvSMSProvider: "sns", registry.EnvSNSSMSTopicARN: "mytopic"}, wantErr: registry.EnvSNSSMSTopicARN},
		{name: "Unknown", set: map[string]string{registry.EnvSMSProvider: "pigeon"}, wantErr: registry.EnvSMSProvider},
		{name: "WrongChannel", set: map[string]string{registry.EnvSMSProvider: "smtp"}, wantErr: registry.EnvSMSProvider},
		{name: "PushTwilio", set: map[string]string{registry.EnvPushProvider: "twilio"}, wantErr: registry.EnvPushProvider},
		{name: "HTTPNoURL", set: map[string]string{registry.EnvSMSProvider: "http"}, unset: []string{registry.EnvHTTPURL}, wantErr: registry.EnvHTTPURL},
		{name: "HTTPNoToken", set: map[string]string{registry.EnvSMSProvider: "http"}, unset: []string{registry.EnvHTTPToken}, wantErr: registry.EnvHTTPToken},
		{name: "HTTPTokenAndParam", set: map[string]string{registry.EnvSMSProvider: "http", registry.EnvHTTPToken + "_PARAM": "/x"}, wantErr: "both set"},
		{name: "HTTPBadURL", set: map[string]string{registry.EnvSMSProvider: "http", registry.EnvHTTPURL: "ftp://x"}, wantErr: registry.EnvHTTPURL},
		{name: "TwilioNoSID", set: map[string]string{registry.EnvSMSProvider: "twilio"}, unset: []string{registry.EnvTwilioAccountSID}, wantErr: registry.EnvTwilioAccountSID},
		{name: "TwilioNoToken", set: map[string]string{registry.EnvSMSProvider: "twilio"}, unset: []string{registry.EnvTwilioAuthToken}, wantErr: registry.EnvTwilioAuthToken},
		{name: "TwilioNoFrom", set: map[string]string{registry.EnvSMSProvider: "twilio"}, unset: []string{registry.EnvTwilioFrom}, wantErr: registry.EnvTwilioFrom},
		{name: "TwilioService", set: map[string]string{registry.EnvSMSProvider: "twilio", registry.EnvTwilioService: "MG1"}, unset: []string{registry.EnvTwilioFrom}, want: map[string]string{"sms": "twilio"}},
		{name: "HTTPPlainURL", set: map[string]string{registry.EnvSMSProvider: "http", registry.EnvHTTPURL: "http://gw.example.com/"}, wantErr: registry.EnvHTTPURL + `="http://gw.example.com" is plain http`},
		{name: "HTTPPlainPrivateIP", set: map[string]string{registry.EnvSMSProvider: "http", registry.EnvHTTPURL: "http://10.0.0.5:8080"}, wantErr: registry.EnvHTTPURL},
		{name: "HTTPSURL", set: map[string]string{registry.EnvSMSProvider: "http", registry.EnvHTTPURL: "https://gw.example.com/"}, want: map[string]string{"sms": "http"}},
		{name: "HTTPLoopbackV6", set: map[string]string{registry.EnvSMSProvider: "http", registry.EnvHTTPURL: "http://[::1]:9/"}, want: map[string]string{"sms": "http"}},
		{name: "HTTPLocalhost", set: map[string]string{registry.EnvSMSProvider: "http", registry.EnvHTTPURL: "http://localhost:9/"}, want: map[string]string{"sms": "http"}},
		{name: "TwilioPlainBase", set: map[string]string{registry.EnvSMSProvider: "twilio", registry.EnvTwilioBaseURL: "http://api.twilio.com"}, wantErr: registry.EnvTwilioBaseURL},
		{name: "CallbackPlain", set: map[string]string{registry.EnvSMSProvider: "http", registry.EnvCallbackBase: "http://hooks.example.com"}, wantErr: registry.EnvCallbackBase},
		{name: "CallbackPlainNoHTTPChannel", set: map[string]string{registry.EnvCallbackBase: "http://hooks.example.com"}, wantErr: registry.EnvCallbackBase},
		{name: "CallbackLoopback", set: map[string]string{registry.EnvSMSProvider: "http", registry.EnvCallbackBase: "http://127.0.0.1:8080"}, want: map[string]string{"sms": "http"}},
		{name: "TwilioBadBase", set: map[string]string{registry.EnvSMSProvider: "twilio", registry.EnvTwilioBaseURL: "nope"}, wantErr: registry.EnvTwilioBaseURL},
		{name: "SES", set: map[string]string{registry.EnvEmailProvider: "ses", registry.EnvSESFrom: "notify@shop.example", registry.EnvSESConfigurationSet: "cs"}, want: map[string]string{"email": "ses"}},
		{name: "SESNoFrom", set: map[string]string{registry.EnvEmailProvider: "ses"}, wantErr: registry.EnvSESFrom},
		{name: "SESBadFrom", set: map[string]string{registry.EnvEmailProvider: "ses", registry.EnvSESFrom: "shop.example"}, wantErr: registry.EnvSESFrom},
		{name: "SMSViaSES", set: map[string]string{registry.EnvSMSProvider: "ses", registry.EnvSESFrom: "notify@shop.example"}, wantErr: registry.EnvSMSProvider},
		{name: "SMTPNoHost", set: map[string]string{registry.EnvEmailProvider: "smtp"}, unset: []string{registry.EnvSMTPHost}, wantErr: registry.EnvSMTPHost},
		{name: "SMTPNoFrom", set: map[string]string{registry.EnvEmailProvider: "smtp"}, unset: []string{registry.EnvSMTPFrom}, wantErr: registry.EnvSMTPFrom},
		{name: "SMTPBadPort", set: map[string]string{registry.EnvEmailProvider: "smtp", registry.EnvSMTPPort: "99999"}, wantErr: registry.EnvSMTPPort},
		{name: "SMTPBadTLS", set: map[string]string{registry.EnvEmailProvider: "smtp", registry.EnvSMTPTLS: "sometimes"}, wantErr: registry.EnvSMTPTLS},
		{name: "SMTPUserNoPassword", set: map[string]string{registry.EnvEmailProvider: "smtp", registry.EnvSMTPUsername: "u"}, wantErr: registry.EnvSMTPPassword},
		{name: "HTTPBadIdempotent", set: map[string]string{registry.EnvSMSProvider: "http", registry.EnvHTTPIdempotent: "sometimes"}, wantErr: registry.EnvHTTPIdempotent},
		{name: "BadTimeout", set: map[string]string{registry.EnvSMSProvider: "http", registry.EnvTimeout: "five"}, wantErr: registry.EnvTimeout},
		{name: "NegativeTimeout", set: map[string]string{registry.EnvSMSProvider: "http", registry.EnvTimeout: "-1s"}, wantErr: registry.EnvTimeout},
		{name: "LambdaSMS", set: map[string]string{registry.EnvSMSProvider: "lambda", registry.EnvSMSLambdaARN: "arn:aws:lambda:us-east-1:123456789012:function:sms-provider"},
			want: map[string]string{"sms": "lambda"}},
		{name: "LambdaEverywhere", set: map[string]string{registry.EnvSMSProvider: "lambda", registry.EnvEmailProvider: "Lambda", registry.EnvPushProvider: "lambda",
			registry.EnvSMSLambdaARN: "sms-provider", registry.EnvEmailLambdaARN: "arn:aws:lambda:eu-west-1:123456789012:function:mail:live",
			registry.EnvPushLambdaARN: "function"},
			want: map[string]string{"sms": "lambda", "email": "lambda", "push": "lambda"}},
		{name: "LambdaInARoute", set: map[string]string{registry.EnvSMSProvider: "lambda, twilio", registry.EnvSMSLambdaARN: "sms-provider"}, want: map[string]string{"sms": "lambda"}},
		{name: "LambdaAfterHTTP", set: map[string]string{registry.EnvEmailProvider: "http,lambda", registry.EnvEmailLambdaARN: "mail"}, want: map[string]string{"email": "http"}},
		{name: "LambdaTwice", set: map[string]string{registry.EnvSMSProvider: "lambda,lambda", registry.EnvSMSLambdaARN: "f"}, wantErr: "listed twice"},
		{name: "LambdaNoARN", set: map[string]string{registry.EnvEmailProvider: "lambda", registry.EnvSMSLambdaARN: "sms-provider"}, wantErr: registry.EnvEmailLambdaARN + " is required"},
		{name: "LambdaBadARN", set: map[string]string{registry.EnvPushProvider: "lambda", registry.EnvPushLambdaARN: "arn:aws:sns:us-east-1:123456789012:topic"}, wantErr: registry.EnvPushLambdaARN},
		{name: "LambdaBadIdempotent", set: map[string]string{registry.EnvSMSProvider: "lambda", registry.EnvSMSLambdaARN: "f", registry.EnvSMSLambdaIdempotent: "maybe"}, wantErr: registry.EnvSMSLambdaIdempotent},
		{name: "LambdaBadLookup", set: map[string]string{registry.EnvSMSProvider: "lambda", registry.EnvSMSLambdaARN: "f", registry.EnvSMSLambdaLookup: "yes please"}, wantErr: registry.EnvSMSLambdaLookup},
		{name: "HTTPChannelURLOnly", set: map[string]string{registry.EnvSMSProvider: "http", registry.EnvHTTPURLSMS: "https://sms.example.com"}, unset: []string{registry.EnvHTTPURL},
			want: map[string]string{"sms": "http"}},
		{name: "HTTPChannelURLOnlyOtherChannel", set: map[string]string{registry.EnvSMSProvider: "http", registry.EnvEmailProvider: "http", registry.EnvHTTPURLSMS: "https://sms.example.com"},
			unset: []string{registry.EnvHTTPURL}, wantErr: registry.EnvHTTPURL + " is required when a channel uses http (for email alone: " + registry.EnvHTTPURLEmail + ")"},
		{name: "HTTPChannelURLPlain", set: map[string]string{registry.EnvPushProvider: "http", registry.EnvHTTPURLPush: "http://push.example.com"}, wantErr: registry.EnvHTTPURLPush},
		{name: "MissingParam", set: map[string]string{registry.EnvSMSProvider: "twilio", registry.EnvTwilioAuthToken + "_PARAM": "/sendonce/missing-" + testenv.RandomID()}, unset: []string{registry.EnvTwilioAuthToken}, wantErr: registry.EnvTwilioAuthToken + "_PARAM"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := base()
			for k, v := range tt.set {
				m[k] = v
			}
			for _, k := range tt.unset {
				delete(m, k)
			}
			got, err := registry.FromEnv(context.Background(), env(m), cfg)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one naming %s", err, tt.wantErr)
				}
				for _, secret := range []string{"http-token", "twilio-token"} {
					if strings.Contains(err.Error(), secret) {
						t.Errorf("err %q holds a secret", err)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("FromEnv: %v", err)
			}
			if len(got) != len(tt.want) {
				t.Errorf("got %d channels, want %d", len(got), len(tt.want))
			}
			for ch, name := range tt.want {
				if s, ok := got[ch]; !ok || s.Name() != name {
					t.Errorf("channel %s: got %v, want %s", ch, s, name)
				}
			}
		})
	}
}

func TestHTTPIdempotent(t *testing.T) {
	t.Parallel()
	cfg := awsConfig(t)
	tests := []struct {
		name  string
		value string
		want  bool
	}{
		{name: "Unset", value: "", want: true},
		{name: "True", value: "true", want: true},
		{name: "False", value: "false", want: false},
		{name: "FalseSpaced", value: " FALSE ", want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := base()
			m[registry.EnvSMSProvider] = "http"
			m[registry.EnvHTTPIdempotent] = tt.value
			got, err := registry.FromEnv(context.Background(), env(m), cfg)
			if err != nil {
				t.Fatalf("FromEnv: %v", err)
			}
			caps := got["sms"].Capabilities()
			if caps.IdempotentSends != tt.want || !caps.LookupByReference {
				t.Errorf("Capabilities = %+v, want IdempotentSends %v and LookupByReference", caps, tt.want)
			}
		})
	}
}

func TestSharedInstance(t *testing.T) {
	t.Parallel()
	m := base()
	m[registry.EnvSMSProvider], m[registry.EnvEmailProvider] = "http", "http"
	got, err := registry.FromEnv(context.Background(), env(m), awsConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	if got["sms"] != got["email"] {
		t.Error("sms and email got two http adapters, want one shared")
	}
	if _, ok := got["sms"].(provider.Looker); !ok {
		t.Error("http adapter is not a Looker")
	}
}

// TestTwilioTokenFromSSM: the auth token comes from an SSM SecureString on
// moto_server, and a send through the twiliotest fake (which checks basic
// auth) succeeds with it.
func TestTwilioTokenFromSSM(t *testing.T) {
	t.Parallel()
	cfg := awsConfig(t)
	ctx := context.Background()
	fake := twiliotest.New(t)
	name := "/sendonce/test/twilio-" + testenv.RandomID()
	if _, err := ssm.NewFromConfig(cfg).PutParameter(ctx, &ssm.PutParameterInput{
		Name: aws.String(name), Value: aws.String(fake.AuthToken), Type: ssmtypes.ParameterTypeSecureString,
	}); err != nil {
		t.Fatalf("PutParameter: %v", err)
	}
	m := map[string]string{
		registry.EnvSMSProvider:                "twilio",
		registry.EnvTwilioAccountSID:           fake.AccountSID,
		registry.EnvTwilioAuthToken + "_PARAM": name,
		registry.EnvTwilioFrom:                 "+15550001111",
		registry.EnvTwilioBaseURL:              fake.URL,
		registry.EnvCallbackBase:               "https://hooks.example.com/",
		registry.EnvTimeout:                    "2s",
	}
	got, err := registry.FromEnv(ctx, env(m), cfg)
	if err != nil {
		t.Fatalf("FromEnv: %v", err)
	}
	if _, err := got["sms"].Send(ctx, provider.Message{Key: "v1_reg", Channel: "sms", To: "+15557654321", Body: "from registry"}); err != nil {
		t.Fatalf("Send: %v", err)
	}
	if n := fake.Count("+15557654321", "from registry"); n != 1 {
		t.Errorf("fake count = %d, want 1", n)
	}
	if cb := fake.Messages()[0].StatusCallback; cb != "https://hooks.example.com/callbacks/twilio?key=v1_reg" {
		t.Errorf("StatusCallback = %q", cb)
	}
}

// TestFromEnvReportsEveryProblem: problems of several providers (and of
// the shared timeout) are reported together, in one error, not one per
// deployment.
func TestFromEnvReportsEveryProblem(t *testing.T) {
	t.Parallel()
	m := base()
	delete(m, registry.EnvHTTPURL)
	m[registry.EnvSMSProvider], m[registry.EnvEmailProvider], m[registry.EnvPushProvider] = "http", "smtp", "pigeon"
	m[registry.EnvSMTPPort] = "99999"
	m[registry.EnvTimeout] = "five"
	m[registry.EnvHTTPToken+"_PARAM"] = "/sendonce/token"
	_, err := registry.FromEnv(context.Background(), env(m), awsConfig(t))
	if err == nil {
		t.Fatal("FromEnv accepted five bad settings")
	}
	for _, want := range []string{
		registry.EnvHTTPURL + " is required",
		registry.EnvHTTPToken + " and " + registry.EnvHTTPToken + "_PARAM are both set",
		registry.EnvSMTPPort + `: "99999" is not a port number`,
		registry.EnvPushProvider + `: unknown provider "pigeon"`,
		registry.EnvTimeout + `="five"`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("err = %q\nwant it to say %s", err, want)
		}
	}
	if strings.Contains(err.Error(), "http-token") {
		t.Errorf("err %q holds a secret", err)
	}
}

// TestLambdaCapabilities: each channel's function has the capabilities its
// own variables declare (none by default), implements provider.Looker
// exactly when lookup is declared, and is an adapter of its own.
func TestLambdaCapabilities(t *testing.T) {
	t.Parallel()
	m := map[string]string{
		registry.EnvSMSProvider: "lambda", registry.EnvEmailProvider: "lambda", registry.EnvPushProvider: "lambda",
		registry.EnvSMSLambdaARN: "arn:aws:lambda:us-east-1:123456789012:function:sms", registry.EnvSMSLambdaIdempotent: "true",
		registry.EnvEmailLambdaARN: "arn:aws:lambda:us-east-1:123456789012:function:email", registry.EnvEmailLambdaLookup: "TRUE",
		registry.EnvPushLambdaARN: "arn:aws:lambda:us-east-1:123456789012:function:push:3",
	}
	got, err := registry.FromEnv(context.Background(), env(m), awsConfig(t))
	if err != nil {
		t.Fatalf("FromEnv: %v", err)
	}
	tests := []struct {
		channel, function string
		caps              provider.Capabilities
	}{
		{"sms", m[registry.EnvSMSLambdaARN], provider.Capabilities{IdempotentSends: true}},
		{"email", m[registry.EnvEmailLambdaARN], provider.Capabilities{LookupByReference: true}},
		{"push", m[registry.EnvPushLambdaARN], provider.Capabilities{}},
	}
	for _, tt := range tests {
		a := got[tt.channel]
		if a == nil || a.Name() != "lambda" {
			t.Fatalf("%s: adapter %v, want lambda", tt.channel, a)
		}
		if c := a.Capabilities(); c != tt.caps {
			t.Errorf("%s: capabilities %+v, want %+v", tt.channel, c, tt.caps)
		}
		if _, ok := a.(provider.Looker); ok != tt.caps.LookupByReference {
			t.Errorf("%s: implements Looker = %v, want %v", tt.channel, ok, tt.caps.LookupByReference)
		}
		fn := a.(interface{ Function() string })
		if fn.Function() != tt.function {
			t.Errorf("%s: invokes %q, want %q", tt.channel, fn.Function(), tt.function)
		}
	}
}

// TestLambdaInvokes: the lambda adapter FromEnv builds invokes the
// configured function through the Lambda client made from the AWS
// configuration, at its endpoint (here a fake of the Invoke API).
func TestLambdaInvokes(t *testing.T) {
	t.Parallel()
	paths := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths <- r.URL.EscapedPath()
		io.WriteString(w, `{"status":"accepted","id":"fn-1"}`)
	}))
	t.Cleanup(srv.Close)
	cfg := testenv.Config()
	cfg.BaseEndpoint = aws.String(srv.URL)
	m := map[string]string{registry.EnvSMSProvider: "lambda", registry.EnvSMSLambdaARN: "arn:aws:lambda:us-east-1:123456789012:function:sms-provider"}
	got, err := registry.FromEnv(context.Background(), env(m), cfg)
	if err != nil {
		t.Fatalf("FromEnv: %v", err)
	}
	r, err := got["sms"].Send(context.Background(), provider.Message{Key: "v1_reg", Tenant: "acme", Channel: "sms", To: "+15557654321", Body: "from registry"})
	if err != nil || r.MessageID != "fn-1" {
		t.Fatalf("Send = %+v, %v; want fn-1", r, err)
	}
	if p, want := <-paths, "/2015-03-31/functions/arn%3Aaws%3Alambda%3Aus-east-1%3A123456789012%3Afunction%3Asms-provider/invocations"; p != want {
		t.Errorf("invoked %s, want %s", p, want)
	}
}

// TestHTTPChannelURL: a channel with its own URL sends to its own gateway;
// the channels without one share the adapter of SENDONCE_HTTP_PROVIDER_URL.
func TestHTTPChannelURL(t *testing.T) {
	t.Parallel()
	shared, sharedURL := testsupport.Simulator(t, simulator.Options{Token: "http-token"})
	own, ownURL := testsupport.Simulator(t, simulator.Options{Token: "http-token"})
	m := base()
	m[registry.EnvHTTPURL], m[registry.EnvHTTPURLSMS] = sharedURL, ownURL
	m[registry.EnvSMSProvider], m[registry.EnvEmailProvider], m[registry.EnvPushProvider] = "http", "http", "http"
	got, err := registry.FromEnv(context.Background(), env(m), awsConfig(t))
	if err != nil {
		t.Fatalf("FromEnv: %v", err)
	}
	if got["sms"] == got["email"] || got["email"] != got["push"] {
		t.Error("want sms on an adapter of its own, email and push sharing one")
	}
	ctx := context.Background()
	for _, ch := range []string{"sms", "email", "push"} {
		if _, err := got[ch].Send(ctx, provider.Message{Key: "v1_" + ch, Tenant: "acme", Channel: notify.Channel(ch), To: "x-" + ch, Body: "hi"}); err != nil {
			t.Fatalf("Send %s: %v", ch, err)
		}
	}
	if own.Delivered("v1_sms") != 1 || shared.Delivered("v1_sms") != 0 {
		t.Errorf("sms went to the shared gateway (own %d, shared %d), want its own", own.Delivered("v1_sms"), shared.Delivered("v1_sms"))
	}
	for _, ch := range []string{"email", "push"} {
		if shared.Delivered("v1_"+ch) != 1 || own.Delivered("v1_"+ch) != 0 {
			t.Errorf("%s: shared %d, own %d; want the shared gateway", ch, shared.Delivered("v1_"+ch), own.Delivered("v1_"+ch))
		}
	}
}

// TestReadRoutes: a channel's variable may list a route, tried in order;
// each provider is built once, and a route that lists an unknown provider,
// one that cannot serve the channel, or one twice is a start-up error
// naming the variable.
func TestReadRoutes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		sms     string
		email   string
		want    []string
		wantErr string
	}{
		{name: "One", sms: "twilio", want: []string{"twilio"}},
		{name: "Two", sms: "twilio, http", email: "smtp,http", want: []string{"twilio", "http"}},
		{name: "Twice", sms: "twilio,twilio", wantErr: "listed twice"},
		{name: "CannotServe", sms: "twilio,smtp", wantErr: `provider "smtp" cannot send sms`},
		{name: "Empty", sms: "twilio,", wantErr: "an empty provider name"},
		{name: "Unknown", sms: "twilio,vonage", wantErr: `unknown provider "vonage"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := base()
			m[registry.EnvSMSProvider], m[registry.EnvEmailProvider] = tc.sms, tc.email
			e := lambdaenv.New(env(m))
			routes := registry.ReadRoutes(context.Background(), e, registry.Options{Logger: nil})
			err := e.Err()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), registry.EnvSMSProvider) {
					t.Fatalf("err = %v, want one naming %s: %s", err, registry.EnvSMSProvider, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range routes["sms"] {
				got = append(got, p.Name())
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("sms route = %v, want %v", got, tc.want)
			}
			if tc.email != "" && routes["email"][1] != routes["sms"][1] {
				t.Error("the http provider was built twice for two routes")
			}
		})
	}
}
