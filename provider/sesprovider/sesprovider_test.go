package sesprovider_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"

	"github.com/sendonce/sendonce"
	"github.com/sendonce/sendonce/internal/testenv"
	"github.com/sendonce/sendonce/internal/testsupport"
	"github.com/sendonce/sendonce/notify"
	"github.com/sendonce/sendonce/provider"
	"github.com/sendonce/sendonce/provider/providertest"
	"github.com/sendonce/sendonce/provider/sesprovider"
)

// TestConformance runs the public provider conformance suite against the
// adapter and moto_server's SES, with moto's record of the emails it sent
// as the count of what the provider received. The faulty fronts pass
// each SendEmail on to moto before their answer is lost.
func TestConformance(t *testing.T) {
	t.Parallel()
	moto := testenv.MotoEndpoint(t)
	client := func(endpoint string) *sesv2.Client {
		return sesv2.NewFromConfig(testenv.Config(), func(o *sesv2.Options) { o.BaseEndpoint = aws.String(endpoint) })
	}
	from := "notify-" + testenv.RandomID() + "@shop.example"
	if _, err := client(moto).CreateEmailIdentity(t.Context(), &sesv2.CreateEmailIdentityInput{EmailIdentity: aws.String(from)}); err != nil {
		t.Fatalf("CreateEmailIdentity: %v", err)
	}
	// Moto's records are read once after each run of sends.
	records := testsupport.NewMotoRecords(moto)
	adapter := func(t *testing.T, endpoint string) provider.Adapter {
		t.Helper()
		a, err := sesprovider.New(client(endpoint), sesprovider.Options{From: from, Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return records.Track(a)
	}
	failed, timedOut := testsupport.AcceptThen(t, moto, 500), testsupport.AcceptThen(t, moto, 0)
	providertest.Run(t, providertest.Harness{
		New: func(t *testing.T) provider.Adapter { return adapter(t, moto) },
		Message: func(_ *testing.T, key string) provider.Message {
			return provider.Message{Key: key, Tenant: "acme", Channel: notify.ChannelEmail, Class: notify.ClassTransactional,
				To: "ana@example.com", Subject: "Your order", Body: "Shipped: " + key}
		},
		Received: func(t *testing.T, key string) int {
			var data struct {
				SES struct {
					Message []struct {
						Source string `json:"source"`
						Body   string `json:"body"`
					} `json:"Message"`
				} `json:"ses"`
			}
			records.Read(t, &data)
			n := 0
			for _, m := range data.SES.Message {
				if m.Source == from && strings.Contains(m.Body, key) {
					n++
				}
			}
			return n
		},
		// SES refuses a recipient that is not an address: BadRequestException
		// ("Missing final '@domain'") on AWS, InvalidParameterValue from moto;
		// both 400s, Permanent, nothing sent.
		Refused: func(_ *testing.T, key string) provider.Message {
			return provider.Message{Key: key, Tenant: "acme", Channel: notify.ChannelEmail, Class: notify.ClassTransactional,
				To: "ana-at-example.com", Subject: "Your order", Body: "Shipped: " + key}
		},
		Stalled:              func(t *testing.T) provider.Adapter { return adapter(t, testsupport.Stalled(t)) },
		Unreachable:          func(t *testing.T) provider.Adapter { return adapter(t, testsupport.Unreachable(t)) },
		AcceptedThenFailed:   func(t *testing.T) provider.Adapter { return adapter(t, failed) },
		AcceptedThenTimedOut: func(t *testing.T) provider.Adapter { return adapter(t, timedOut) },
	})
}

// TestNewRefuses: New names what is wrong with its options.
func TestNewRefuses(t *testing.T) {
	t.Parallel()
	client := sesv2.NewFromConfig(testenv.Config())
	for name, tt := range map[string]struct {
		client sesprovider.EmailSender
		opts   sesprovider.Options
		want   string
	}{
		"NoClient":      {nil, sesprovider.Options{From: "a@shop.example"}, "no SES client"},
		"NoFrom":        {client, sesprovider.Options{}, "not an email address"},
		"NegativeTime":  {client, sesprovider.Options{From: "a@shop.example", Timeout: -time.Second}, "negative"},
		"ShortRedactor": {client, sesprovider.Options{From: "a@shop.example", RedactionKey: []byte("short")}, "RedactionKey"},
	} {
		t.Run(name, func(t *testing.T) {
			a, err := sesprovider.New(tt.client, tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) || a != nil {
				t.Errorf("New = %v, %v: want a nil adapter and an error saying %q", a, err, tt.want)
			}
		})
	}
}

// The SES adapter on the email route, sending from a verified identity
// with a configuration set whose event destination publishes bounces,
// complaints and deliveries (sendonce.Callbacks.HandleSESEvents applies
// them).
func Example() {
	ctx := context.Background()
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		panic(err)
	}
	email, err := sesprovider.New(sesv2.NewFromConfig(awsCfg), sesprovider.Options{
		From:             "orders@shop.example",
		ConfigurationSet: "sendonce-events",
	})
	if err != nil {
		panic(err)
	}
	s, err := sendonce.NewSender(sendonce.SenderConfig{
		Ledger: sendonce.NewMemoryLedger(),
		Routes: sendonce.Routes{notify.ChannelEmail: {email}},
	})
	if err != nil {
		panic(err)
	}
	_ = s // s.Send(ctx, req, enqueued) for each request
	fmt.Println(email.Name())
	// Output: ses
}
