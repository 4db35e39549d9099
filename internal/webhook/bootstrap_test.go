package webhook_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"

	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/ledger/dynamoledger"
	"github.com/sendonce/sendonce/internal/provider/httpprovider"
	"github.com/sendonce/sendonce/internal/rie"
	"github.com/sendonce/sendonce/internal/testenv"
	"github.com/sendonce/sendonce/internal/webhook"
)

// The secrets the sample events in events/ are signed with.
const (
	eventsHTTPSecret  = "whsec_example"
	eventsTwilioToken = "example-twilio-auth-token"
)

// loadEvent reads a sample Function URL event from the repository's
// events/ directory.
func loadEvent(t *testing.T, name string) (events.LambdaFunctionURLRequest, []byte) {
	t.Helper()
	raw, err := os.ReadFile("../../events/" + name)
	if err != nil {
		t.Fatalf("read event: %v", err)
	}
	var req events.LambdaFunctionURLRequest
	if err := json.Unmarshal(raw, &req); err != nil {
		t.Fatalf("event %s is not a Function URL request: %v", name, err)
	}
	return req, raw
}

// claimFor creates the PENDING ledger row a sample event refers to.
func claimFor(t *testing.T, l ledger.Ledger, key string) {
	t.Helper()
	if _, err := l.Claim(context.Background(), ledger.Entry{
		Key: key, Tenant: "acme", Channel: "sms", Class: "transactional", Provider: "twilio",
		Template: "order_shipped", RecipientID: "user-42", Address: testPhone, Body: "shipped",
	}, time.Minute); err != nil {
		t.Fatalf("Claim %s: %v", key, err)
	}
}

func eventKey(t *testing.T, req events.LambdaFunctionURLRequest) string {
	t.Helper()
	if k := req.QueryStringParameters[webhook.KeyParam]; k != "" {
		return k
	}
	var cb httpprovider.Callback
	if err := json.Unmarshal([]byte(req.Body), &cb); err != nil {
		t.Fatalf("event body: %v", err)
	}
	return cb.Reference
}

// TestSampleEvents checks that the events/ files are complete, correctly
// signed callbacks: each is applied by a handler configured as their
// signatures say, at the time they were signed.
func TestSampleEvents(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, name := range []string{"webhook-http.json", "webhook-twilio.json"} {
		t.Run(name, func(t *testing.T) {
			req, _ := loadEvent(t, name)
			if req.Version != "2.0" || req.RequestContext.HTTP.Method != "POST" || req.RequestContext.DomainName == "" || req.RequestContext.RequestID == "" {
				t.Errorf("event lacks Function URL fields: %+v", req.RequestContext)
			}
			key := eventKey(t, req)
			claimFor(t, b.led, key)
			at := time.UnixMilli(req.RequestContext.TimeEpoch)
			h, err := webhook.New(webhook.Config{
				Ledger: b.led, Dedup: b.dedup, HTTPSecret: []byte(eventsHTTPSecret), TwilioAuthToken: eventsTwilioToken,
				Metrics: b.tally, Logger: b.log, Now: func() time.Time { return at },
			})
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			resp, err := h.Handle(context.Background(), req)
			if err != nil || resp.StatusCode != 200 || !strings.Contains(resp.Body, string(webhook.Applied)) {
				t.Fatalf("Handle(%s) = %d %s, %v; want 200 applied", name, resp.StatusCode, resp.Body, err)
			}
			if got := b.get(t, key).DeliveryStatus; got != "delivered" {
				t.Errorf("status = %q, want delivered", got)
			}
		})
	}
}

// TestBootstrapUnderRIE runs the real bootstrap of functions/webhook under
// the Lambda Runtime Interface Emulator, against DynamoDB Local, with the
// Twilio auth token read from SSM (moto_server) through the _PARAM form.
func TestBootstrapUnderRIE(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := testenv.DynamoDB(t)
	table := testenv.NewTable(t, c)
	l, err := dynamoledger.New(c, table, dynamoledger.Config{})
	if err != nil {
		t.Fatalf("dynamoledger.New: %v", err)
	}
	moto := testenv.MotoEndpoint(t)
	param := "/sendonce/test/" + testenv.RandomID() + "/twilio-token"
	sc := ssm.NewFromConfig(testenv.Config(), func(o *ssm.Options) { o.BaseEndpoint = aws.String(moto) })
	if _, err := sc.PutParameter(ctx, &ssm.PutParameterInput{
		Name: aws.String(param), Value: aws.String(eventsTwilioToken), Type: ssmtypes.ParameterTypeSecureString,
	}); err != nil {
		t.Fatalf("PutParameter: %v", err)
	}

	fn := rie.Start(t, rie.Build(t, "webhook"), map[string]string{
		"AWS_LAMBDA_FUNCTION_NAME":               "sendonce-webhook",
		"SENDONCE_TABLE":                         table,
		"AWS_ENDPOINT_URL_DYNAMODB":              testenv.DynamoDBEndpoint(t),
		"AWS_ENDPOINT_URL_SSM":                   moto,
		"SENDONCE_HTTP_PROVIDER_CALLBACK_SECRET": eventsHTTPSecret,
		"SENDONCE_TWILIO_AUTH_TOKEN_PARAM":       param,
	})
	invoke := func(t *testing.T, req events.LambdaFunctionURLRequest) events.LambdaFunctionURLResponse {
		t.Helper()
		payload, _ := json.Marshal(req)
		out, err := fn.Invoke(ctx, payload)
		if err != nil {
			t.Fatalf("Invoke: %v (%s)", err, out)
		}
		var resp events.LambdaFunctionURLResponse
		if err := json.Unmarshal(out, &resp); err != nil {
			t.Fatalf("response %s: %v", out, err)
		}
		return resp
	}

	httpReq, _ := loadEvent(t, "webhook-http.json")
	twReq, _ := loadEvent(t, "webhook-twilio.json")
	for _, req := range []events.LambdaFunctionURLRequest{httpReq, twReq} {
		claimFor(t, l, eventKey(t, req))
	}
	// The sample is signed at a fixed time; the function runs on the real
	// clock, so sign the same body now.
	httpReq.Headers[strings.ToLower(httpprovider.SignatureHeader)] = httpprovider.Sign([]byte(eventsHTTPSecret), time.Now(), []byte(httpReq.Body))

	steps := []struct {
		name string
		req  events.LambdaFunctionURLRequest
		code int
		want string
	}{
		{"HTTPApplied", httpReq, 200, `"applied"`},
		{"HTTPDuplicate", httpReq, 200, `"duplicate"`},
		{"TwilioApplied", twReq, 200, `"applied"`},
		{"TwilioDuplicate", twReq, 200, `"duplicate"`},
		{"StaleSignature", func() events.LambdaFunctionURLRequest {
			r, _ := loadEvent(t, "webhook-http.json")
			return r
		}(), 401, `"invalid signature"`},
		{"WrongMethod", func() events.LambdaFunctionURLRequest {
			r, _ := loadEvent(t, "webhook-twilio.json")
			r.RequestContext.HTTP.Method = "GET"
			return r
		}(), 405, `"method not allowed"`},
	}
	for _, s := range steps {
		resp := invoke(t, s.req)
		if resp.StatusCode != s.code || !strings.Contains(resp.Body, s.want) {
			t.Errorf("%s: %d %s, want %d %s", s.name, resp.StatusCode, resp.Body, s.code, s.want)
		}
	}
	for _, req := range []events.LambdaFunctionURLRequest{httpReq, twReq} {
		r, err := l.Get(ctx, eventKey(t, req))
		if err != nil || r.DeliveryStatus != "delivered" {
			t.Errorf("row %s: %q, %v; want delivered", eventKey(t, req), r.DeliveryStatus, err)
		}
	}
	logs := fn.Logs()
	if !strings.Contains(logs, `"CallbacksApplied":2`) && strings.Count(logs, `"CallbacksApplied":1`) != 2 {
		t.Errorf("no EMF CallbacksApplied lines in the function's output:\n%s", logs)
	}
	if !strings.Contains(logs, `"DuplicateCallbacks":1`) || !strings.Contains(logs, `"_aws"`) {
		t.Errorf("no EMF DuplicateCallbacks line in the function's output:\n%s", logs)
	}
	for _, raw := range []string{testPhone, "15551234567", "15557654321"} {
		if strings.Contains(logs, raw) {
			t.Errorf("function output contains raw phone number %q", raw)
		}
	}
}
