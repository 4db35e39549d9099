package snsprovider_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sns/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/sendonce/sendonce/internal/provider/snsprovider"
	"github.com/sendonce/sendonce/internal/testenv"
	"github.com/sendonce/sendonce/internal/testsupport"
	"github.com/sendonce/sendonce/notify"
	"github.com/sendonce/sendonce/provider"
	"github.com/sendonce/sendonce/provider/providertest"
)

func TestClassify(t *testing.T) {
	t.Parallel()
	respErr := func(status int, code string) error {
		return testsupport.AWSError(status, code, "number +15551234567 is bad")
	}
	tests := []struct {
		name string
		err  error
		want provider.Kind
	}{
		{"InvalidParameter", &types.InvalidParameterException{Message: aws.String("x")}, provider.Permanent},
		{"ParameterValueInvalid", &types.InvalidParameterValueException{}, provider.Permanent},
		{"InvalidParameterValue", &smithy.GenericAPIError{Code: "InvalidParameterValue"}, provider.Permanent},
		{"ValidationException", &types.ValidationException{}, provider.Permanent},
		{"EndpointDisabled", &types.EndpointDisabledException{}, provider.Permanent},
		{"OptedOut", &types.OptedOutException{}, provider.Permanent},
		{"NotFound", &types.NotFoundException{}, provider.Permanent},
		{"ResourceNotFound", &types.ResourceNotFoundException{}, provider.Permanent},
		{"PlatformApplicationDisabled", &types.PlatformApplicationDisabledException{}, provider.Permanent},
		{"UserError", &types.UserErrorException{}, provider.Permanent},
		{"Throttled", &types.ThrottledException{}, provider.Transient},
		{"ThrottlingException", &smithy.GenericAPIError{Code: "ThrottlingException"}, provider.Transient},
		{"Throttling", &smithy.GenericAPIError{Code: "Throttling"}, provider.Transient},
		{"KMSThrottling", &types.KMSThrottlingException{}, provider.Transient},
		// Defect 10: SNS cannot drop a repeat, and an internal error says
		// nothing about whether it published: ambiguous, not transient.
		{"InternalError", &types.InternalErrorException{}, provider.Ambiguous},
		{"InternalFailure", &smithy.GenericAPIError{Code: "InternalFailure"}, provider.Ambiguous},
		{"ServiceUnavailable", &smithy.GenericAPIError{Code: "ServiceUnavailable"}, provider.Ambiguous},
		{"ConcurrentAccess", &types.ConcurrentAccessException{}, provider.Transient},
		{"AuthorizationError", &types.AuthorizationErrorException{}, provider.Config},
		{"AccessDenied", &smithy.GenericAPIError{Code: "AccessDenied"}, provider.Config},
		{"AccessDeniedException", &smithy.GenericAPIError{Code: "AccessDeniedException"}, provider.Config},
		{"InvalidClientTokenId", &smithy.GenericAPIError{Code: "InvalidClientTokenId"}, provider.Config},
		{"UnrecognizedClientException", &smithy.GenericAPIError{Code: "UnrecognizedClientException"}, provider.Config},
		{"SignatureDoesNotMatch", &smithy.GenericAPIError{Code: "SignatureDoesNotMatch"}, provider.Config},
		{"ExpiredToken", &smithy.GenericAPIError{Code: "ExpiredToken"}, provider.Config},
		{"ExpiredTokenException", &smithy.GenericAPIError{Code: "ExpiredTokenException"}, provider.Config},
		{"InvalidSecurity", &types.InvalidSecurityException{}, provider.Config},
		{"KMSAccessDenied", &types.KMSAccessDeniedException{}, provider.Config},
		{"KMSDisabled", &types.KMSDisabledException{}, provider.Config},
		{"KMSInvalidState", &types.KMSInvalidStateException{}, provider.Config},
		{"KMSNotFound", &types.KMSNotFoundException{}, provider.Config},
		{"KMSOptInRequired", &types.KMSOptInRequired{}, provider.Config},
		{"InvalidState", &types.InvalidStateException{}, provider.Config},
		{"VerificationException", &types.VerificationException{}, provider.Config},
		{"Unknown500", respErr(500, "Weird"), provider.Ambiguous},
		{"Unknown503", respErr(503, "Weird"), provider.Ambiguous},
		{"Unknown429", respErr(429, "Weird"), provider.Transient},
		{"Unknown502", respErr(502, "Weird"), provider.Ambiguous},
		{"Unknown504", respErr(504, "Weird"), provider.Ambiguous},
		{"Unknown401", respErr(401, "Weird"), provider.Config},
		{"Unknown403", respErr(403, "Weird"), provider.Config},
		{"Unknown429", respErr(429, "Weird"), provider.Transient},
		{"Unknown400", respErr(400, "Weird"), provider.Permanent},
		{"UnknownNoStatus", &smithy.GenericAPIError{Code: "Weird"}, provider.Ambiguous},
		{"DialRefused", &smithyhttp.RequestSendError{Err: &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}}, provider.Transient},
		{"DNS", &smithyhttp.RequestSendError{Err: &net.DNSError{Err: "no such host", Name: "sns.example"}}, provider.Transient},
		{"ReadReset", &smithyhttp.RequestSendError{Err: &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")}}, provider.Ambiguous},
		{"Deadline", fmt.Errorf("operation error SNS: Publish: %w", context.DeadlineExceeded), provider.Ambiguous},
		{"EOF", &smithyhttp.RequestSendError{Err: io.ErrUnexpectedEOF}, provider.Ambiguous},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// The digits alone: a reason that dropped only the "+" still leaks it.
			providertest.CheckClassified(t, snsprovider.Classify(tt.err, "+15551234567"), tt.want, snsprovider.Name, "15551234567")
		})
	}
}

// recorder wraps a Publisher and keeps the inputs it saw.
type recorder struct {
	next snsprovider.Publisher
	ins  []*sns.PublishInput
}

func (r *recorder) Publish(ctx context.Context, in *sns.PublishInput, optFns ...func(*sns.Options)) (*sns.PublishOutput, error) {
	r.ins = append(r.ins, in)
	return r.next.Publish(ctx, in, optFns...)
}

type bundle struct {
	moto string
	sns  *sns.Client
	sqs  *sqs.Client
}

func setup(t *testing.T) bundle {
	t.Helper()
	ep := testenv.MotoEndpoint(t)
	cfg := testenv.Config()
	return bundle{
		moto: ep,
		sns:  sns.NewFromConfig(cfg, func(o *sns.Options) { o.BaseEndpoint = aws.String(ep) }),
		sqs:  sqs.NewFromConfig(cfg, func(o *sqs.Options) { o.BaseEndpoint = aws.String(ep) }),
	}
}

// motoSMS reads the SMS moto_server recorded: its ground truth.
func motoSMS(t *testing.T, moto string) []struct {
	Message     string `json:"message"`
	PhoneNumber string `json:"phone_number"`
	MessageID   string `json:"message_id"`
} {
	t.Helper()
	var data struct {
		SNS struct {
			SMS []struct {
				Message     string `json:"message"`
				PhoneNumber string `json:"phone_number"`
				MessageID   string `json:"message_id"`
			} `json:"SMS"`
		} `json:"sns"`
	}
	testsupport.MotoData(t, moto, &data)
	return data.SNS.SMS
}

func TestSendSMS(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tests := []struct {
		class, wantType string
	}{
		{"otp", snsprovider.SMSTransactional},
		{"transactional", snsprovider.SMSTransactional},
		{"marketing", snsprovider.SMSPromotional},
	}
	for _, tt := range tests {
		t.Run(tt.class, func(t *testing.T) {
			t.Parallel()
			rec := &recorder{next: b.sns}
			p, err := snsprovider.New(snsprovider.Config{Client: rec, SenderID: "SENDONCE", OriginationNumber: "+15550000000", Timeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			body := "Your code is " + testenv.RandomID()
			rc, err := p.Send(context.Background(), provider.Message{Key: "v1_" + testenv.RandomID(), Channel: "sms", Class: notify.Class(tt.class), To: "+15551230001", Body: body})
			if err != nil {
				t.Fatalf("Send: %v", err)
			}
			var found int
			for _, s := range motoSMS(t, b.moto) {
				if s.Message == body {
					found++
					if s.PhoneNumber != "+15551230001" || s.MessageID != rc.MessageID {
						t.Errorf("recorded SMS = %+v, want number +15551230001 and id %s", s, rc.MessageID)
					}
				}
			}
			if found != 1 {
				t.Errorf("moto recorded %d SMS with the body, want 1", found)
			}
			attrs := rec.ins[0].MessageAttributes
			if got := aws.ToString(attrs[snsprovider.AttrSMSType].StringValue); got != tt.wantType {
				t.Errorf("SMSType = %q, want %q", got, tt.wantType)
			}
			if got := aws.ToString(attrs[snsprovider.AttrSenderID].StringValue); got != "SENDONCE" {
				t.Errorf("SenderID = %q, want SENDONCE", got)
			}
			if got := aws.ToString(attrs[snsprovider.AttrOriginationNumber].StringValue); got != "+15550000000" {
				t.Errorf("OriginationNumber = %q, want +15550000000", got)
			}
		})
	}
}

func TestSendPush(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	app, err := b.sns.CreatePlatformApplication(ctx, &sns.CreatePlatformApplicationInput{
		Name: aws.String("app-" + testenv.RandomID()), Platform: aws.String("GCM"),
		Attributes: map[string]string{"PlatformCredential": "dummy"},
	})
	if err != nil {
		t.Fatalf("CreatePlatformApplication: %v", err)
	}
	newEndpoint := func(t *testing.T) string {
		ep, err := b.sns.CreatePlatformEndpoint(ctx, &sns.CreatePlatformEndpointInput{
			PlatformApplicationArn: app.PlatformApplicationArn, Token: aws.String("token-" + testenv.RandomID()),
		})
		if err != nil {
			t.Fatalf("CreatePlatformEndpoint: %v", err)
		}
		return aws.ToString(ep.EndpointArn)
	}

	t.Run("OK", func(t *testing.T) {
		t.Parallel()
		rec := &recorder{next: b.sns}
		p, _ := snsprovider.New(snsprovider.Config{Client: rec})
		target := newEndpoint(t)
		rc, err := p.Send(ctx, provider.Message{Key: "v1_k1", Channel: "push", To: target, Subject: "Shipped", Body: "Order A-1001 shipped"})
		if err != nil {
			t.Fatalf("Send: %v", err)
		}
		if rc.MessageID == "" {
			t.Error("no message id")
		}
		in := rec.ins[0]
		if aws.ToString(in.TargetArn) != target || aws.ToString(in.MessageStructure) != "json" {
			t.Errorf("TargetArn, MessageStructure = %q, %q", aws.ToString(in.TargetArn), aws.ToString(in.MessageStructure))
		}
		var doc map[string]string
		if err := json.Unmarshal([]byte(aws.ToString(in.Message)), &doc); err != nil {
			t.Fatalf("message is not JSON: %v", err)
		}
		var gcm struct {
			Notification struct{ Title, Body string }
			Data         map[string]string
		}
		if err := json.Unmarshal([]byte(doc["GCM"]), &gcm); err != nil {
			t.Fatalf("GCM is not JSON: %v", err)
		}
		if doc["default"] != "Order A-1001 shipped" || gcm.Notification.Body != "Order A-1001 shipped" || gcm.Notification.Title != "Shipped" || gcm.Data["sendonce_key"] != "v1_k1" {
			t.Errorf("message = %v, GCM = %+v", doc, gcm)
		}
		if doc["APNS"] == "" || doc["APNS_SANDBOX"] == "" {
			t.Errorf("APNS entries missing: %v", doc)
		}
	})

	t.Run("EndpointDisabled", func(t *testing.T) {
		t.Parallel()
		p, _ := snsprovider.New(snsprovider.Config{Client: b.sns})
		target := newEndpoint(t)
		if _, err := b.sns.SetEndpointAttributes(ctx, &sns.SetEndpointAttributesInput{
			EndpointArn: aws.String(target), Attributes: map[string]string{"Enabled": "false"},
		}); err != nil {
			t.Fatalf("SetEndpointAttributes: %v", err)
		}
		_, err := p.Send(ctx, provider.Message{Key: "v1_k2", Channel: "push", To: target, Body: "x"})
		var pe *provider.Error
		if !errors.As(err, &pe) || pe.Kind != provider.Permanent || pe.Code != "EndpointDisabled" {
			t.Errorf("err = %v, want permanent EndpointDisabled", err)
		}
	})
}

func TestSendTopicFanOut(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	topic, err := b.sns.CreateTopic(ctx, &sns.CreateTopicInput{Name: aws.String("fanout-" + testenv.RandomID())})
	if err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	q, err := b.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("fanout-" + testenv.RandomID())})
	if err != nil {
		t.Fatalf("CreateQueue: %v", err)
	}
	qa, err := b.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: q.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatalf("GetQueueAttributes: %v", err)
	}
	if _, err := b.sns.Subscribe(ctx, &sns.SubscribeInput{
		TopicArn: topic.TopicArn, Protocol: aws.String("sqs"), Endpoint: aws.String(qa.Attributes["QueueArn"]),
		Attributes: map[string]string{"RawMessageDelivery": "true"},
	}); err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	p, _ := snsprovider.New(snsprovider.Config{Client: b.sns, TopicARNs: map[string]string{"sms": aws.ToString(topic.TopicArn)}})
	body := "fan-out " + testenv.RandomID()
	rc, err := p.Send(ctx, provider.Message{Key: "v1_fan", Channel: "sms", To: "+15551230002", Body: body})
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	if rc.MessageID == "" {
		t.Error("no message id")
	}
	out, err := b.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 2})
	if err != nil {
		t.Fatalf("ReceiveMessage: %v", err)
	}
	if len(out.Messages) != 1 || aws.ToString(out.Messages[0].Body) != body {
		t.Fatalf("queue got %d messages (%v), want exactly the body %q", len(out.Messages), out.Messages, body)
	}
	for _, s := range motoSMS(t, b.moto) {
		if s.Message == body {
			t.Error("fan-out also sent a direct SMS")
		}
	}
}

// TestNoSDKRetry proves the adapter makes exactly one attempt, even on an
// error the SDK would retry, and classifies the answer.
func TestNoSDKRetry(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, code string
		status     int
		want       provider.Kind
	}{
		{"InternalError", "InternalError", 500, provider.Ambiguous},
		{"Throttled", "Throttled", 400, provider.Transient},
		{"OptedOut", "OptedOut", 400, provider.Permanent},
		{"AuthorizationError", "AuthorizationError", 403, provider.Config},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var hits atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				hits.Add(1)
				w.Header().Set("Content-Type", "text/xml")
				w.WriteHeader(tt.status)
				fmt.Fprintf(w, `<ErrorResponse><Error><Type>Sender</Type><Code>%s</Code><Message>no</Message></Error><RequestId>r1</RequestId></ErrorResponse>`, tt.code)
			}))
			t.Cleanup(srv.Close)
			c := sns.NewFromConfig(testenv.Config(), func(o *sns.Options) { o.BaseEndpoint = aws.String(srv.URL); o.RetryMaxAttempts = 5 })
			p, _ := snsprovider.New(snsprovider.Config{Client: c})
			_, err := p.Send(context.Background(), provider.Message{Key: "v1_x", Channel: "sms", To: "+15551230003", Body: "x"})
			if got := provider.KindOf(err); got != tt.want {
				t.Errorf("kind = %v, want %v (%v)", got, tt.want, err)
			}
			if got := hits.Load(); got != 1 {
				t.Errorf("SNS saw %d attempts, want 1", got)
			}
		})
	}
}

// TestTimeoutAmbiguous: SNS reads the request and never answers.
func TestTimeoutAmbiguous(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = io.ReadAll(r.Body)
		<-release
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	c := sns.NewFromConfig(testenv.Config(), func(o *sns.Options) { o.BaseEndpoint = aws.String(srv.URL) })
	p, _ := snsprovider.New(snsprovider.Config{Client: c, Timeout: 300 * time.Millisecond})
	_, err := p.Send(context.Background(), provider.Message{Key: "v1_x", Channel: "sms", To: "+15551230004", Body: "x"})
	if got := provider.KindOf(err); got != provider.Ambiguous {
		t.Errorf("kind = %v, want ambiguous (%v)", got, err)
	}
	if got := hits.Load(); got != 1 {
		t.Errorf("attempts = %d, want 1", got)
	}
}

func TestSendBadInput(t *testing.T) {
	t.Parallel()
	p, _ := snsprovider.New(snsprovider.Config{Client: &recorder{}})
	for _, m := range []provider.Message{
		{Channel: "email", To: "a@example.com"},
		{Channel: "push", To: "not-an-arn"},
		{Channel: "sms"},
	} {
		if _, err := p.Send(context.Background(), m); provider.KindOf(err) != provider.Permanent {
			t.Errorf("Send(%s) = %v, want permanent", m.Channel, err)
		}
	}
	if _, err := snsprovider.New(snsprovider.Config{}); err == nil {
		t.Error("New without client: no error")
	}
}
