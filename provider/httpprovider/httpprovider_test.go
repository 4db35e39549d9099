package httpprovider_test

import (
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce"
	"github.com/sendonce/sendonce/internal/provider/simulator"
	"github.com/sendonce/sendonce/internal/redact"
	"github.com/sendonce/sendonce/internal/testsupport"
	"github.com/sendonce/sendonce/notify"
	"github.com/sendonce/sendonce/provider"
	"github.com/sendonce/sendonce/provider/httpprovider"
	"github.com/sendonce/sendonce/provider/providertest"
)

const (
	token = "tok-s3cr3t-0123456789"
	phone = "+15551234567"
)

// TestConformance runs the public provider conformance suite against the
// adapter and the provider simulator (the generic protocol's reference
// gateway), with the simulators' own records as the count of what the
// provider received: one answers, the others accept each message and
// then drop the connection or hang, or hang before accepting.
func TestConformance(t *testing.T) {
	t.Parallel()
	sim := func(f simulator.FaultKind) (*simulator.Simulator, string) {
		s, url := testsupport.Simulator(t, simulator.Options{Token: token})
		if f != "" {
			s.AddFault(simulator.Fault{Kind: f})
		}
		return s, url
	}
	ok, okURL := sim("")
	failed, failedURL := sim(simulator.FaultResetAfterAccept)
	timedOut, timedOutURL := sim(simulator.FaultTimeoutAfterAccept)
	stalled, stalledURL := sim(simulator.FaultTimeoutBeforeAccept)
	adapter := func(t *testing.T, url string) provider.Adapter {
		t.Helper()
		a, err := httpprovider.New(nil, httpprovider.Options{BaseURL: url, Token: token, Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	message := func(key string) provider.Message {
		return provider.Message{Key: key, Tenant: "acme", Channel: notify.ChannelSMS, Class: notify.ClassTransactional, To: phone, Body: "Your order shipped"}
	}
	providertest.Run(t, providertest.Harness{
		New:     func(t *testing.T) provider.Adapter { return adapter(t, okURL) },
		Message: func(_ *testing.T, key string) provider.Message { return message(key) },
		Received: func(_ *testing.T, key string) int {
			n := 0
			for _, s := range []*simulator.Simulator{ok, failed, timedOut, stalled} {
				for _, m := range s.Messages() {
					if m.Reference == key {
						n++
					}
				}
			}
			return n
		},
		Refused: func(_ *testing.T, key string) provider.Message {
			ok.AddFault(simulator.Fault{Kind: simulator.FaultStatus, Status: 400, Reference: key}) // refused for good
			return message(key)
		},
		Undeliverable: func(_ *testing.T, key string) provider.Message {
			ok.AddFault(simulator.Fault{Kind: simulator.FaultUndeliverable, Reference: key})
			return message(key)
		},
		Stalled:              func(t *testing.T) provider.Adapter { return adapter(t, stalledURL) },
		Unreachable:          func(t *testing.T) provider.Adapter { return adapter(t, testsupport.Unreachable(t)) },
		AcceptedThenFailed:   func(t *testing.T) provider.Adapter { return adapter(t, failedURL) },
		AcceptedThenTimedOut: func(t *testing.T) provider.Adapter { return adapter(t, timedOutURL) },
	})
}

// TestNewRefuses: New names what is wrong with its options, never the
// token.
func TestNewRefuses(t *testing.T) {
	t.Parallel()
	for name, tt := range map[string]struct {
		opts httpprovider.Options
		want string
	}{
		"NoURL":         {httpprovider.Options{Token: token}, "BaseURL"},
		"Query":         {httpprovider.Options{BaseURL: "https://gw.example?x=1", Token: token}, "BaseURL"},
		"NoToken":       {httpprovider.Options{BaseURL: "https://gw.example"}, "Token"},
		"NegativeTime":  {httpprovider.Options{BaseURL: "https://gw.example", Token: token, Timeout: -time.Second}, "negative"},
		"ShortRedactor": {httpprovider.Options{BaseURL: "https://gw.example", Token: token, RedactionKey: []byte("short")}, "RedactionKey"},
	} {
		t.Run(name, func(t *testing.T) {
			a, err := httpprovider.New(nil, tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), token) || a != nil {
				t.Errorf("New = %v, %v: want a nil adapter and an error saying %q", a, err, tt.want)
			}
		})
	}
}

// TestRedactionKey: the adapter's log lines carry the recipient as a
// token under its own RedactionKey, not the process's.
func TestRedactionKey(t *testing.T) {
	t.Parallel()
	key := []byte(strings.Repeat("k", 32))
	var logs testsupport.Buffer
	a, err := httpprovider.New(nil, httpprovider.Options{BaseURL: testsupport.Unreachable(t), Token: token,
		Logger: logs.Logger(slog.LevelInfo), RedactionKey: key})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Send(t.Context(), provider.Message{Key: "v1_" + strings.Repeat("0", 64), Channel: notify.ChannelSMS, To: phone, Body: "hi"}); err == nil {
		t.Fatal("Send to an unreachable gateway succeeded")
	}
	r, _ := redact.New(key)
	out := logs.String()
	if want := r.Address(phone); !strings.Contains(out, want) || strings.Contains(out, redact.Address(phone)) || strings.Contains(out, phone) {
		t.Errorf("log lines %q: want the recipient as %s (its RedactionKey's token), never raw or as the process's token", out, want)
	}
}

// An in-house gateway that speaks the generic protocol, first on the sms
// route; its delivery callbacks come back to the stack's callback route.
func Example() {
	gw, err := httpprovider.New(&http.Client{Timeout: 10 * time.Second}, httpprovider.Options{
		BaseURL:     "https://sms-gateway.internal.example",
		Token:       "gw-token", // from your secret store
		CallbackURL: "https://notify.shop.example/callbacks/http",
	})
	if err != nil {
		panic(err)
	}
	s, err := sendonce.NewSender(sendonce.SenderConfig{
		Ledger: sendonce.NewMemoryLedger(),
		Routes: sendonce.Routes{notify.ChannelSMS: {gw}},
	})
	if err != nil {
		panic(err)
	}
	_ = s // s.Send(ctx, req, enqueued) for each request
	fmt.Println(gw.Name())
	// Output: http
}
