package sesprovider_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/aws/aws-sdk-go-v2/service/sesv2/types"
	"github.com/aws/smithy-go"

	"github.com/sendonce/sendonce/internal/provider/sesprovider"
	"github.com/sendonce/sendonce/internal/testenv"
	"github.com/sendonce/sendonce/internal/testsupport"
	"github.com/sendonce/sendonce/provider"
	"github.com/sendonce/sendonce/provider/providertest"
)

var quiet = slog.New(slog.DiscardHandler)

func TestClassify(t *testing.T) {
	t.Parallel()
	respErr := func(status int, code string) error {
		return testsupport.AWSError(status, code, "address ana@example.com is bad")
	}
	tests := []struct {
		name string
		err  error
		want provider.Kind
	}{
		{"MessageRejected", &types.MessageRejected{Message: aws.String("Email address is not verified.")}, provider.Permanent},
		{"MailFromDomainNotVerified", &types.MailFromDomainNotVerifiedException{}, provider.Permanent},
		{"BadRequest", &types.BadRequestException{}, provider.Permanent},
		{"TooManyRequests", &types.TooManyRequestsException{}, provider.Transient},
		{"Throttling", &smithy.GenericAPIError{Code: "Throttling"}, provider.Transient},
		{"ThrottlingException", &smithy.GenericAPIError{Code: "ThrottlingException"}, provider.Transient},
		{"LimitExceeded", &types.LimitExceededException{}, provider.Transient},
		{"AccountSuspended", &types.AccountSuspendedException{}, provider.Config},
		{"SendingPaused", &types.SendingPausedException{}, provider.Config},
		{"NotFound", &types.NotFoundException{}, provider.Config},
		{"AccessDenied", &smithy.GenericAPIError{Code: "AccessDeniedException"}, provider.Config},
		{"Unknown500", respErr(500, "InternalFailure"), provider.Ambiguous},
		{"Unknown502", respErr(502, "BadGateway"), provider.Ambiguous},
		{"Unknown429", respErr(429, "SlowDown"), provider.Transient},
		{"Unknown403", respErr(403, "Forbidden"), provider.Config},
		{"Unknown400", respErr(400, "Weird"), provider.Permanent},
		{"DialFailed", &net.OpError{Op: "dial", Err: errors.New("connection refused")}, provider.Transient},
		{"DNS", &net.DNSError{Err: "no such host", Name: "email.us-east-1.amazonaws.com"}, provider.Transient},
		{"Deadline", fmt.Errorf("send: %w", context.DeadlineExceeded), provider.Ambiguous},
		{"Reset", &net.OpError{Op: "read", Err: errors.New("connection reset by peer")}, provider.Ambiguous},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			providertest.CheckClassified(t, sesprovider.Classify(tt.err, "ana@example.com"), tt.want, sesprovider.Name, "ana@example.com")
		})
	}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	c := &sesv2.Client{}
	for _, tc := range []struct {
		name string
		cfg  sesprovider.Config
	}{
		{"NoClient", sesprovider.Config{From: "a@example.com"}},
		{"NoFrom", sesprovider.Config{Client: c}},
		{"NotAnAddress", sesprovider.Config{Client: c, From: "example.com"}},
		{"DisplayName", sesprovider.Config{Client: c, From: "Shop <a@example.com>"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if _, err := sesprovider.New(tc.cfg); err == nil {
				t.Errorf("New(%+v) = nil error, want one", tc.cfg)
			}
		})
	}
}

func TestInputCarriesKeyAndParts(t *testing.T) {
	t.Parallel()
	p, err := sesprovider.New(sesprovider.Config{Client: &sesv2.Client{}, From: "notify@shop.example", ConfigurationSet: "cs"})
	if err != nil {
		t.Fatal(err)
	}
	m := provider.Message{Key: "v1_" + strings.Repeat("a", 64), Channel: "email", To: "ana@example.com", Subject: "S", Body: "text", HTML: "<p>html</p>"}
	in, err := p.Input(m)
	if err != nil {
		t.Fatal(err)
	}
	simple := in.Content.Simple
	if got := aws.ToString(simple.Body.Text.Data); got != "text" {
		t.Errorf("text part = %q", got)
	}
	if got := aws.ToString(simple.Body.Html.Data); got != "<p>html</p>" {
		t.Errorf("html part = %q", got)
	}
	if len(in.EmailTags) != 1 || aws.ToString(in.EmailTags[0].Name) != sesprovider.TagKey || aws.ToString(in.EmailTags[0].Value) != m.Key {
		t.Errorf("tags = %+v, want %s=%s", in.EmailTags, sesprovider.TagKey, m.Key)
	}
	if len(simple.Headers) != 1 || aws.ToString(simple.Headers[0].Name) != sesprovider.HeaderKey || aws.ToString(simple.Headers[0].Value) != m.Key {
		t.Errorf("headers = %+v, want %s: %s", simple.Headers, sesprovider.HeaderKey, m.Key)
	}
	if aws.ToString(in.ConfigurationSetName) != "cs" || aws.ToString(in.FromEmailAddress) != "notify@shop.example" {
		t.Errorf("configuration set %q, from %q", aws.ToString(in.ConfigurationSetName), aws.ToString(in.FromEmailAddress))
	}
	m.HTML = ""
	if in, _ = p.Input(m); in.Content.Simple.Body.Html != nil {
		t.Errorf("text-only message has an HTML part")
	}
	for _, bad := range []provider.Message{{Channel: "sms", To: "+15551234567"}, {Channel: "email"}} {
		if _, err := p.Input(bad); provider.KindOf(err) != provider.Permanent {
			t.Errorf("Input(%+v) error = %v, want Permanent", bad, err)
		}
	}
}

// moto is one test's SESv2 client on moto_server, with a verified sender.
type moto struct {
	url  string
	ses  *sesv2.Client
	from string
}

func setupMoto(t *testing.T) moto {
	t.Helper()
	ep := testenv.MotoEndpoint(t)
	c := sesv2.NewFromConfig(testenv.Config(), func(o *sesv2.Options) { o.BaseEndpoint = aws.String(ep) })
	from := "notify-" + testenv.RandomID() + "@shop.example"
	if _, err := c.CreateEmailIdentity(context.Background(), &sesv2.CreateEmailIdentityInput{EmailIdentity: aws.String(from)}); err != nil {
		t.Fatalf("CreateEmailIdentity: %v", err)
	}
	return moto{url: ep, ses: c, from: from}
}

// motoMessage is one email moto_server recorded: its ground truth.
type motoMessage struct {
	ID           string `json:"id"`
	Source       string `json:"source"`
	Destinations struct {
		ToAddresses []string `json:"ToAddresses"`
	} `json:"destinations"`
	Subject string `json:"subject"`
	Body    string `json:"body"`
}

// sent returns the emails moto recorded from m.from.
func (m moto) sent(t *testing.T) []motoMessage {
	t.Helper()
	var data struct {
		SES struct {
			Message []motoMessage `json:"Message"`
		} `json:"ses"`
	}
	testsupport.MotoData(t, m.url, &data)
	var out []motoMessage
	for _, msg := range data.SES.Message {
		if msg.Source == m.from {
			out = append(out, msg)
		}
	}
	return out
}

func (m moto) provider(t *testing.T, from string) *sesprovider.Provider {
	t.Helper()
	p, err := sesprovider.New(sesprovider.Config{Client: m.ses, From: from, Timeout: 5 * time.Second, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSendRecordedByMoto(t *testing.T) {
	t.Parallel()
	m := setupMoto(t)
	p := m.provider(t, m.from)
	key := "v1_" + strings.Repeat("b", 64)
	rc, err := p.Send(context.Background(), provider.Message{
		Key: key, Channel: "email", To: "ana@example.com", Subject: "Your order A-1", Body: "shipped", HTML: "<p>shipped</p>",
	})
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	if _, err := p.Send(context.Background(), provider.Message{
		Key: key, Channel: "email", To: "bo@example.com", Subject: "Text only", Body: "plain text",
	}); err != nil {
		t.Fatalf("Send text only: %v", err)
	}
	got := m.sent(t)
	if len(got) != 2 {
		t.Fatalf("moto recorded %d emails from %s, want 2: %+v", len(got), m.from, got)
	}
	// With both parts moto keeps the HTML part as the body.
	if got[0].ID != rc.MessageID || got[0].Subject != "Your order A-1" || got[0].Body != "<p>shipped</p>" ||
		len(got[0].Destinations.ToAddresses) != 1 || got[0].Destinations.ToAddresses[0] != "ana@example.com" {
		t.Errorf("recorded %+v, want id %s, subject, HTML body and one recipient", got[0], rc.MessageID)
	}
	if got[1].Subject != "Text only" || got[1].Body != "plain text" {
		t.Errorf("recorded %+v, want the text part as the body", got[1])
	}
}

func TestUnverifiedSenderIsPermanent(t *testing.T) {
	t.Parallel()
	m := setupMoto(t)
	p := m.provider(t, "nobody-"+testenv.RandomID()+"@unverified.example")
	_, err := p.Send(context.Background(), provider.Message{Key: "v1_" + strings.Repeat("c", 64), Channel: "email", To: "ana@example.com", Subject: "s", Body: "b"})
	var pe *provider.Error
	if !errors.As(err, &pe) || pe.Kind != provider.Permanent || pe.Code != "MessageRejected" {
		t.Fatalf("Send from an unverified identity: %v, want Permanent MessageRejected", err)
	}
}

// stalled accepts connections, reads each request and never answers.
func stalled(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				_, _ = io.Copy(io.Discard, c) // read until the client gives up
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

func TestTimeoutAfterWriteIsAmbiguous(t *testing.T) {
	t.Parallel()
	ep := stalled(t)
	c := sesv2.NewFromConfig(testenv.Config(), func(o *sesv2.Options) { o.BaseEndpoint = aws.String(ep) })
	p, err := sesprovider.New(sesprovider.Config{Client: c, From: "a@shop.example", Timeout: 300 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Send(context.Background(), provider.Message{Key: "v1_" + strings.Repeat("d", 64), Channel: "email", To: "ana@example.com", Subject: "s", Body: "b"})
	if k := provider.KindOf(err); k != provider.Ambiguous {
		t.Fatalf("Send to a provider that stalls after the request: %v (kind %s), want Ambiguous", err, k)
	}
}

func TestRefusedConnectionIsTransient(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ep := "http://" + ln.Addr().String()
	ln.Close() // nothing listens: the dial fails, nothing is written
	c := sesv2.NewFromConfig(testenv.Config(), func(o *sesv2.Options) { o.BaseEndpoint = aws.String(ep) })
	p, err := sesprovider.New(sesprovider.Config{Client: c, From: "a@shop.example", Timeout: time.Second, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Send(context.Background(), provider.Message{Key: "v1_" + strings.Repeat("e", 64), Channel: "email", To: "ana@example.com", Subject: "s", Body: "b"})
	if k := provider.KindOf(err); k != provider.Transient {
		t.Fatalf("Send with the connection refused: %v (kind %s), want Transient", err, k)
	}
}

// The real sender (its bootstrap under the RIE, over DynamoDB Local) with
// this adapter against moto, every message redelivered, faults injected:
// internal/chaos's ses lane (TestChaosSmall).
