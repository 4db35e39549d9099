package snsprovider_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sns"

	"github.com/sendonce/sendonce"
	"github.com/sendonce/sendonce/internal/testenv"
	"github.com/sendonce/sendonce/internal/testsupport"
	"github.com/sendonce/sendonce/notify"
	"github.com/sendonce/sendonce/provider"
	"github.com/sendonce/sendonce/provider/providertest"
	"github.com/sendonce/sendonce/provider/snsprovider"
)

// TestConformance runs the public provider conformance suite against the
// adapter and moto_server's SNS, with moto's record of the SMS it sent
// as the count of what the provider received. The faulty fronts pass
// each Publish on to moto before their answer is lost.
func TestConformance(t *testing.T) {
	t.Parallel()
	moto := testenv.MotoEndpoint(t)
	// Moto's records are read once after each run of sends.
	records := testsupport.NewMotoRecords(moto)
	adapter := func(t *testing.T, endpoint string) provider.Adapter {
		t.Helper()
		client := sns.NewFromConfig(testenv.Config(), func(o *sns.Options) { o.BaseEndpoint = aws.String(endpoint) })
		a, err := snsprovider.New(client, snsprovider.Options{Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return records.Track(a)
	}
	failed, timedOut := testsupport.AcceptThen(t, moto, 500), testsupport.AcceptThen(t, moto, 0)
	providertest.Run(t, providertest.Harness{
		New: func(t *testing.T) provider.Adapter { return adapter(t, moto) },
		Message: func(_ *testing.T, key string) provider.Message {
			return provider.Message{Key: key, Tenant: "acme", Channel: notify.ChannelSMS, Class: notify.ClassOTP,
				To: fmt.Sprintf("+1555%07d", rand.IntN(10_000_000)), Body: "Your code, " + key}
		},
		Received: func(t *testing.T, key string) int {
			var data struct {
				SNS struct {
					SMS []struct {
						Message string `json:"message"`
					} `json:"SMS"`
				} `json:"sns"`
			}
			records.Read(t, &data)
			n := 0
			for _, s := range data.SNS.SMS {
				if strings.Contains(s.Message, key) {
					n++
				}
			}
			return n
		},
		Refused: func(_ *testing.T, key string) provider.Message { // SNS refuses a number that is not E.164
			return provider.Message{Key: key, Tenant: "acme", Channel: notify.ChannelSMS, Class: notify.ClassOTP, To: "+1-555-not-a-number", Body: "Your code, " + key}
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
	client := sns.NewFromConfig(testenv.Config())
	for name, tt := range map[string]struct {
		client snsprovider.Publisher
		opts   snsprovider.Options
		want   string
	}{
		"NoClient":      {nil, snsprovider.Options{}, "no SNS client"},
		"TopicNotARN":   {client, snsprovider.Options{Topics: map[notify.Channel]string{notify.ChannelEmail: "news"}}, "not a topic ARN"},
		"NoChannel":     {client, snsprovider.Options{Topics: map[notify.Channel]string{"fax": "arn:aws:sns:us-east-1:123456789012:t"}}, "not a channel"},
		"NegativeTime":  {client, snsprovider.Options{Timeout: -time.Second}, "negative"},
		"ShortRedactor": {client, snsprovider.Options{RedactionKey: []byte("short")}, "RedactionKey"},
	} {
		t.Run(name, func(t *testing.T) {
			a, err := snsprovider.New(tt.client, tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) || a != nil {
				t.Errorf("New = %v, %v: want a nil adapter and an error saying %q", a, err, tt.want)
			}
		})
	}
}

// The SNS adapter first on the sms route, publishing with the SDK's
// configuration read the standard way; every SMS from the number given.
func Example() {
	ctx := context.Background()
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		panic(err)
	}
	sms, err := snsprovider.New(sns.NewFromConfig(awsCfg), snsprovider.Options{
		OriginationNumber: "+15550100",
		Timeout:           3 * time.Second,
	})
	if err != nil {
		panic(err)
	}
	s, err := sendonce.NewSender(sendonce.SenderConfig{
		Ledger: sendonce.NewMemoryLedger(),
		Routes: sendonce.Routes{notify.ChannelSMS: {sms}},
	})
	if err != nil {
		panic(err)
	}
	_ = s // s.Send(ctx, req, enqueued) for each request
	fmt.Println(sms.Name())
	// Output: sns
}
