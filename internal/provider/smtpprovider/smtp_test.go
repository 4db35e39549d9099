package smtpprovider_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/mail"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/sendonce/sendonce/internal/provider/smtpprovider"
	"github.com/sendonce/sendonce/internal/provider/smtpprovider/smtptest"
	"github.com/sendonce/sendonce/internal/testsupport"
	"github.com/sendonce/sendonce/provider"
)

type bundle struct {
	srv  *smtptest.Server
	logs *testsupport.Buffer
}

func setup(t *testing.T, opts smtptest.Options) bundle {
	t.Helper()
	return bundle{srv: smtptest.New(t, opts), logs: &testsupport.Buffer{}}
}

// received returns the messages the server holds, as sent.
func (b bundle) received() [][]byte {
	var out [][]byte
	for _, m := range b.srv.Messages() {
		out = append(out, m.Data)
	}
	return out
}

func (b bundle) provider(t *testing.T, mod ...func(*smtpprovider.Config)) *smtpprovider.Provider {
	t.Helper()
	cfg := smtpprovider.Config{
		Host: "127.0.0.1", Port: b.srv.Port, TLS: smtpprovider.TLSNone, From: "notify@sendonce.example",
		Timeout: 2 * time.Second, Now: func() time.Time { return time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC) },
		Logger: b.logs.Logger(slog.LevelInfo),
	}
	for _, f := range mod {
		f(&cfg)
	}
	p, err := smtpprovider.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return p
}

func email(key string) provider.Message {
	return provider.Message{Key: key, Channel: "email", Class: "transactional", To: "ana@example.com", Subject: "Shipped", Body: "Order A-1001 shipped"}
}

func TestSend(t *testing.T) {
	t.Parallel()
	b := setup(t, smtptest.Options{})
	p := b.provider(t)
	rc, err := p.Send(context.Background(), email("v1_abc123"))
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	if rc.MessageID != "v1_abc123@sendonce.example" {
		t.Errorf("MessageID = %q", rc.MessageID)
	}
	got := b.received()
	if len(got) != 1 {
		t.Fatalf("server received %d messages, want 1", len(got))
	}
	msg, err := mail.ReadMessage(bytes.NewReader(got[0]))
	if err != nil {
		t.Fatalf("parse received message: %v", err)
	}
	for h, want := range map[string]string{
		"Message-Id":     "<v1_abc123@sendonce.example>",
		"X-Sendonce-Key": "v1_abc123",
		"To":             "<ana@example.com>",
		"Subject":        "Shipped",
	} {
		if got := msg.Header.Get(h); got != want {
			t.Errorf("header %s = %q, want %q", h, got, want)
		}
	}
	body, _ := io.ReadAll(msg.Body)
	if !strings.Contains(string(body), "Order A-1001 shipped") {
		t.Errorf("body = %q", body)
	}
}

func TestSendAuth(t *testing.T) {
	t.Parallel()
	const password = "hunter2-very-secret"
	b := setup(t, smtptest.Options{Username: "relay", Password: password})
	if _, err := b.provider(t, func(c *smtpprovider.Config) { c.Username, c.Password = "relay", password }).Send(context.Background(), email("v1_auth")); err != nil {
		t.Fatalf("Send with the right password: %v", err)
	}
	if n := len(b.received()); n != 1 {
		t.Fatalf("received %d, want 1", n)
	}

	// A wrong password: Config, and neither password shows anywhere.
	const wrong = "wrong-" + password
	_, err := b.provider(t, func(c *smtpprovider.Config) { c.Username, c.Password = "relay", wrong }).Send(context.Background(), email("v1_auth2"))
	var pe *provider.Error
	if !errors.As(err, &pe) || pe.Kind != provider.Config || pe.Code != "535" {
		t.Fatalf("err = %v, want config 535", err)
	}
	logs := b.logs.String()
	if !strings.Contains(logs, "smtp send failed") {
		t.Fatalf("no failure logged: %q", logs)
	}
	for _, s := range []string{err.Error(), provider.ReasonOf(err), pe.Err.Error(), logs} {
		if strings.Contains(s, password) || strings.Contains(s, "ana@example.com") {
			t.Errorf("text leaks the password or the address: %q", s)
		}
	}
}

func TestSendFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		opts     smtptest.Options
		want     provider.Kind
		wantCode string
		received int
	}{
		{"Rcpt550", smtptest.Options{RcptErr: &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "<ana@example.com>: mailbox unavailable"}}, provider.Permanent, "550", 0},
		{"Rcpt451", smtptest.Options{RcptErr: &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "try again later"}}, provider.Transient, "451", 0},
		{"Data550", smtptest.Options{DataErr: &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 7, 1}, Message: "content rejected"}}, provider.Permanent, "550", 0},
		{"Data451", smtptest.Options{DataErr: &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "local error"}}, provider.Transient, "451", 0},
		{"StallAfterData", smtptest.Options{Stall: -1}, provider.Ambiguous, "", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, tt.opts)
			p := b.provider(t, func(c *smtpprovider.Config) { c.Timeout = 500 * time.Millisecond })
			start := time.Now()
			_, err := p.Send(context.Background(), email("v1_"+tt.name))
			var pe *provider.Error
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v, want *provider.Error", err)
			}
			if pe.Kind != tt.want || !strings.HasPrefix(pe.Code, tt.wantCode) {
				t.Errorf("kind, code = %v, %q; want %v, %q (%v)", pe.Kind, pe.Code, tt.want, tt.wantCode, pe)
			}
			t.Logf("error: %v", pe)
			if got := len(b.received()); got != tt.received {
				t.Errorf("server holds %d messages, want %d", got, tt.received)
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("Send took %v, want the 500ms timeout honoured", d)
			}
			if s := pe.Error() + " " + pe.Err.Error(); strings.Contains(s, "ana@example.com") {
				t.Errorf("error text %q holds the address", s)
			}
		})
	}
}

func TestSendCtxDeadline(t *testing.T) {
	t.Parallel()
	b := setup(t, smtptest.Options{Stall: -1})
	p := b.provider(t, func(c *smtpprovider.Config) { c.Timeout = 10 * time.Second })
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := p.Send(ctx, email("v1_ctx"))
	if got := provider.KindOf(err); got != provider.Ambiguous {
		t.Errorf("kind = %v, want ambiguous (%v)", got, err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Send took %v, want ctx's 300ms deadline honoured", d)
	}
}

func TestConnectFailures(t *testing.T) {
	t.Parallel()
	// A listener that accepts and hangs up at once: no greeting.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	closed := ln.Addr().(*net.TCPAddr).Port
	// A port nobody listens on.
	ln2, _ := net.Listen("tcp", "127.0.0.1:0")
	refused := ln2.Addr().(*net.TCPAddr).Port
	_ = ln2.Close()

	for name, port := range map[string]int{"HangUp": closed, "Refused": refused} {
		p, err := smtpprovider.New(smtpprovider.Config{Host: "127.0.0.1", Port: port, TLS: smtpprovider.TLSNone, From: "a@b.example", Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		_, err = p.Send(context.Background(), email("v1_c"))
		if got := provider.KindOf(err); got != provider.Transient {
			t.Errorf("%s: kind = %v, want transient (%v)", name, got, err)
		}
	}
}

func TestMandatoryTLSWithoutStartTLS(t *testing.T) {
	t.Parallel()
	b := setup(t, smtptest.Options{})
	p := b.provider(t, func(c *smtpprovider.Config) { c.TLS = smtpprovider.TLSMandatory })
	_, err := p.Send(context.Background(), email("v1_tls"))
	if got := provider.KindOf(err); got != provider.Config {
		t.Errorf("kind = %v, want config (%v)", got, err)
	}
	if n := len(b.received()); n != 0 {
		t.Errorf("received %d, want 0", n)
	}
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	b := setup(t, smtptest.Options{})
	p := b.provider(t)
	for _, m := range []provider.Message{
		{Key: "v1_x", Channel: "email", To: "not an address"},
		{Key: "bad key<>", Channel: "email", To: "ana@example.com"},
		{Key: "v1_x", Channel: "sms", To: "+15551234567"},
	} {
		if _, err := p.Send(context.Background(), m); provider.KindOf(err) != provider.Permanent {
			t.Errorf("Send(%+v) = %v, want permanent", m, err)
		}
	}
	for name, cfg := range map[string]smtpprovider.Config{
		"NoHost":  {From: "a@b.example"},
		"NoFrom":  {Host: "h"},
		"BadFrom": {Host: "h", From: "nobody"},
		"BadTLS":  {Host: "h", From: "a@b.example", TLS: "sometimes"},
	} {
		if _, err := smtpprovider.New(cfg); err == nil {
			t.Errorf("%s: New succeeded, want error", name)
		}
	}
}

func TestParseTLSPolicy(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]smtpprovider.TLSPolicy{"": smtpprovider.TLSMandatory, "NONE": smtpprovider.TLSNone, "opportunistic": smtpprovider.TLSOpportunistic} {
		if got, err := smtpprovider.ParseTLSPolicy(in); err != nil || got != want {
			t.Errorf("ParseTLSPolicy(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := smtpprovider.ParseTLSPolicy("maybe"); err == nil || !strings.Contains(err.Error(), "mandatory, opportunistic, none") {
		t.Errorf("ParseTLSPolicy(maybe) error = %v", err)
	}
}
