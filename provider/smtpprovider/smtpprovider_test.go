package smtpprovider_test

import (
	"bytes"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce"
	"github.com/sendonce/sendonce/internal/provider/smtpprovider/smtptest"
	"github.com/sendonce/sendonce/notify"
	"github.com/sendonce/sendonce/provider"
	"github.com/sendonce/sendonce/provider/providertest"
	"github.com/sendonce/sendonce/provider/smtpprovider"
)

// TestConformance runs the public provider conformance suite against the
// adapter and a real SMTP server (smtptest, on go-smtp), with the
// servers' own records of the messages whose DATA they took as the count
// of what the provider received: one answers, the other takes each
// message and never replies to the end of DATA (stalled, and accepted
// then timed out alike: SMTP accepts at that reply). The answering one
// has no mailbox for one address: a message to it is refused (550 5.1.1
// at RCPT, before any DATA).
func TestConformance(t *testing.T) {
	t.Parallel()
	const unknown = "nobody@shop.example" // a mailbox the server does not have
	ok, stalled := smtptest.New(t, smtptest.Options{RefuseTo: unknown}), smtptest.New(t, smtptest.Options{Stall: -1})
	adapter := func(t *testing.T, port int) provider.Adapter {
		t.Helper()
		a, err := smtpprovider.New(smtpprovider.Options{Host: "127.0.0.1", Port: port, TLS: smtpprovider.TLSNone,
			From: "orders@shop.example", Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	providertest.Run(t, providertest.Harness{
		New: func(t *testing.T) provider.Adapter { return adapter(t, ok.Port) },
		Message: func(_ *testing.T, key string) provider.Message {
			return provider.Message{Key: key, Tenant: "acme", Channel: notify.ChannelEmail, Class: notify.ClassTransactional,
				To: "ana@example.com", Subject: "Your order", Body: "Shipped."}
		},
		Received: func(_ *testing.T, key string) int {
			n := 0
			for _, s := range []*smtptest.Server{ok, stalled} {
				for _, m := range s.Messages() {
					if bytes.Contains(m.Data, []byte(key)) { // in its Message-ID and X-Sendonce-Key
						n++
					}
				}
			}
			return n
		},
		Refused: func(_ *testing.T, key string) provider.Message {
			return provider.Message{Key: key, Tenant: "acme", Channel: notify.ChannelEmail, Class: notify.ClassTransactional,
				To: unknown, Subject: "Your order", Body: "Shipped."}
		},
		Stalled: func(t *testing.T) provider.Adapter { return adapter(t, stalled.Port) },
		Unreachable: func(t *testing.T) provider.Adapter {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			_, port, _ := net.SplitHostPort(l.Addr().String())
			l.Close()
			p, _ := strconv.Atoi(port)
			return adapter(t, p)
		},
		AcceptedThenTimedOut: func(t *testing.T) provider.Adapter { return adapter(t, stalled.Port) },
	})
}

// TestNewRefuses: New names what is wrong with its options, never the
// password.
func TestNewRefuses(t *testing.T) {
	t.Parallel()
	valid := smtpprovider.Options{Host: "smtp.example", From: "orders@shop.example", Username: "u", Password: "s3cr3t-pass"}
	for name, tt := range map[string]struct {
		mod  func(*smtpprovider.Options)
		want string
	}{
		"NoHost":        {func(o *smtpprovider.Options) { o.Host = "" }, "host"},
		"NoFrom":        {func(o *smtpprovider.Options) { o.From = "" }, "From"},
		"FromNotEmail":  {func(o *smtpprovider.Options) { o.From = "orders" }, "From"},
		"UnknownTLS":    {func(o *smtpprovider.Options) { o.TLS = "sometimes" }, "TLS policy"},
		"NegativeTime":  {func(o *smtpprovider.Options) { o.Timeout = -time.Second }, "negative"},
		"ShortRedactor": {func(o *smtpprovider.Options) { o.RedactionKey = []byte("short") }, "RedactionKey"},
	} {
		t.Run(name, func(t *testing.T) {
			opts := valid
			tt.mod(&opts)
			a, err := smtpprovider.New(opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "s3cr3t-pass") || a != nil {
				t.Errorf("New = %v, %v: want a nil adapter and an error saying %q", a, err, tt.want)
			}
		})
	}
}

// Email through Amazon SES's SMTP interface (any relay alike), with
// STARTTLS required, the SMTP credentials from your secret store.
func Example() {
	email, err := smtpprovider.New(smtpprovider.Options{
		Host:     "email-smtp.eu-west-1.amazonaws.com",
		Port:     587,
		Username: "AKIA…",
		Password: "…",
		TLS:      smtpprovider.TLSMandatory,
		From:     "orders@shop.example",
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
	// Output: smtp
}
