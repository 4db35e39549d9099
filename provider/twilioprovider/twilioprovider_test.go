package twilioprovider_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce"
	"github.com/sendonce/sendonce/internal/provider/twilio/twiliotest"
	"github.com/sendonce/sendonce/internal/testsupport"
	"github.com/sendonce/sendonce/notify"
	"github.com/sendonce/sendonce/provider"
	"github.com/sendonce/sendonce/provider/providertest"
	"github.com/sendonce/sendonce/provider/twilioprovider"
)

const phone = "+15551230001"

// TestConformance runs the public provider conformance suite against the
// adapter and a stand-in of Twilio's Messages API (twiliotest), with the
// stand-ins' records of the messages they accepted as the count of what
// the provider received: one answers, one refuses an opted-out number,
// the others accept each message and then fail, hang, or hang before
// accepting.
func TestConformance(t *testing.T) {
	t.Parallel()
	fake := func(f twiliotest.Fault) *twiliotest.Server {
		s := twiliotest.New(t)
		if f != (twiliotest.Fault{}) {
			s.SetDecide(func(string) twiliotest.Fault { return f })
		}
		return s
	}
	ok := fake(twiliotest.Fault{})
	failed := fake(twiliotest.Fault{AcceptThenStatus: 500, Code: 20500, Message: "Internal Server Error"})
	timedOut := fake(twiliotest.Fault{AcceptThenHang: true})
	stalled := fake(twiliotest.Fault{HangBeforeAccept: true})
	adapter := func(t *testing.T, s *twiliotest.Server) provider.Adapter {
		t.Helper()
		a, err := twilioprovider.New(nil, twilioprovider.Options{
			BaseURL: s.URL, AccountSID: s.AccountSID, AuthToken: s.AuthToken, From: "+15550100", Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	message := func(key, to string) provider.Message {
		return provider.Message{Key: key, Tenant: "acme", Channel: notify.ChannelSMS, Class: notify.ClassOTP, To: to, Body: "Your code, " + key}
	}
	optedOut := "+15551239999"
	ok.OptOut(optedOut)
	providertest.Run(t, providertest.Harness{
		New:     func(t *testing.T) provider.Adapter { return adapter(t, ok) },
		Message: func(_ *testing.T, key string) provider.Message { return message(key, phone) },
		Received: func(_ *testing.T, key string) int {
			n := 0
			for _, s := range []*twiliotest.Server{ok, failed, timedOut, stalled} {
				for _, m := range s.Messages() {
					if strings.Contains(m.Body, key) {
						n++
					}
				}
			}
			return n
		},
		Refused:              func(_ *testing.T, key string) provider.Message { return message(key, optedOut) },
		Stalled:              func(t *testing.T) provider.Adapter { return adapter(t, stalled) },
		Unreachable:          func(t *testing.T) provider.Adapter { return unreachable(t) },
		AcceptedThenFailed:   func(t *testing.T) provider.Adapter { return adapter(t, failed) },
		AcceptedThenTimedOut: func(t *testing.T) provider.Adapter { return adapter(t, timedOut) },
	})
}

func unreachable(t *testing.T) provider.Adapter {
	a, err := twilioprovider.New(nil, twilioprovider.Options{
		BaseURL: testsupport.Unreachable(t), AccountSID: "AC0", AuthToken: "token", From: "+15550100"})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestNewRefuses: New names what is wrong with its options, never the
// token.
func TestNewRefuses(t *testing.T) {
	t.Parallel()
	valid := twilioprovider.Options{AccountSID: "AC0", AuthToken: "secret-token", From: "+15550100"}
	for name, tt := range map[string]struct {
		mod  func(*twilioprovider.Options)
		want string
	}{
		"NoAccount":     {func(o *twilioprovider.Options) { o.AccountSID = "" }, "account SID"},
		"NoToken":       {func(o *twilioprovider.Options) { o.AuthToken = "" }, "auth token"},
		"NoSender":      {func(o *twilioprovider.Options) { o.From = "" }, "From"},
		"RelativeURL":   {func(o *twilioprovider.Options) { o.BaseURL = "/api" }, "base URL"},
		"NegativeTime":  {func(o *twilioprovider.Options) { o.Timeout = -time.Second }, "negative"},
		"ShortRedactor": {func(o *twilioprovider.Options) { o.RedactionKey = []byte("short") }, "RedactionKey"},
	} {
		t.Run(name, func(t *testing.T) {
			opts := valid
			tt.mod(&opts)
			a, err := twilioprovider.New(nil, opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "secret-token") || a != nil {
				t.Errorf("New = %v, %v: want a nil adapter and an error saying %q", a, err, tt.want)
			}
		})
	}
}

// The Twilio adapter on the sms route, through a Messaging Service, with
// status callbacks to the stack's callback route; the reconciler looks
// uncertain attempts up through the same adapter.
func Example() {
	sms, err := twilioprovider.New(&http.Client{}, twilioprovider.Options{
		AccountSID:          "AC00000000000000000000000000000000",
		AuthToken:           "…", // from your secret store
		MessagingServiceSID: "MG00000000000000000000000000000000",
		CallbackBaseURL:     "https://notify.shop.example",
	})
	if err != nil {
		panic(err)
	}
	_, looks := sms.(provider.Looker)
	routes := sendonce.Routes{notify.ChannelSMS: {sms}}
	_ = routes // the same routes for sendonce.NewSender and sendonce.NewReconciler
	fmt.Println(sms.Name(), looks)
	// Output: twilio true
}
