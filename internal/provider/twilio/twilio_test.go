package twilio_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/provider/twilio"
	"github.com/sendonce/sendonce/internal/provider/twilio/twiliotest"
	"github.com/sendonce/sendonce/internal/testsupport"
	"github.com/sendonce/sendonce/provider"
)

const (
	from = "+15550001111"
	to   = "+15557654321"
)

type bundle struct {
	fake *twiliotest.Server
	p    *twilio.Provider
	logs *testsupport.Buffer
}

// send sends m and fails t on error.
func (b bundle) send(t *testing.T, m provider.Message) provider.Receipt {
	t.Helper()
	rc, err := b.p.Send(t.Context(), m)
	if err != nil {
		t.Fatalf("Send(%s): %v", m.Key, err)
	}
	return rc
}

func setup(t *testing.T, mod ...func(*twilio.Config)) bundle {
	t.Helper()
	fake := twiliotest.New(t)
	logs := &testsupport.Buffer{}
	cfg := twilio.Config{
		BaseURL: fake.URL, AccountSID: fake.AccountSID, AuthToken: fake.AuthToken, From: from,
		CallbackBaseURL: "https://hooks.example.com", Timeout: 2 * time.Second,
		Logger: logs.Logger(slog.LevelInfo),
	}
	for _, f := range mod {
		f(&cfg)
	}
	p, err := twilio.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return bundle{fake: fake, p: p, logs: logs}
}

func msg(key, body string) provider.Message {
	return provider.Message{Key: key, Channel: "sms", Class: "otp", To: to, Body: body, AttemptedAt: time.Now()}
}

func TestSend(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rc, err := b.p.Send(context.Background(), msg("v1_abc", "Your code is 123456"))
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	ms := b.fake.Messages()
	if len(ms) != 1 {
		t.Fatalf("fake has %d messages, want 1", len(ms))
	}
	got := ms[0]
	if got.SID != rc.MessageID || got.To != to || got.From != from || got.Body != "Your code is 123456" {
		t.Errorf("fake got %+v, receipt %q", got, rc.MessageID)
	}
	if want := "https://hooks.example.com/callbacks/twilio?key=v1_abc"; got.StatusCallback != want {
		t.Errorf("StatusCallback = %q, want %q", got.StatusCallback, want)
	}
	if c := b.p.Capabilities(); c.IdempotentSends || !c.LookupByReference {
		t.Errorf("Capabilities = %+v", c)
	}
}

func TestSendMessagingService(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *twilio.Config) { c.From, c.MessagingServiceSID = "", "MG123" })
	if _, err := b.p.Send(context.Background(), msg("v1_svc", "hello")); err != nil {
		t.Fatalf("Send: %v", err)
	}
	if got := b.fake.Messages()[0]; got.MessagingServiceSID != "MG123" || got.From != "" {
		t.Errorf("fake got %+v, want MessagingServiceSid MG123 and no From", got)
	}
	m := msg("v1_svc", "hello")
	m.ProviderMessageID = b.fake.Messages()[0].SID // as the status callback recorded it
	res, err := b.p.Lookup(context.Background(), m)
	if err != nil || res.Status != provider.LookupAccepted {
		t.Errorf("Lookup = %+v, %v; want accepted", res, err)
	}
}

func TestSendFaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		fault     twiliotest.Fault
		wantKind  provider.Kind
		wantCode  string
		wantCount int
	}{
		{"InvalidTo", twiliotest.Fault{Status: 400, Code: 21211, Message: "The 'To' number " + to + " is not a valid phone number."}, provider.Permanent, "21211", 0},
		{"OptedOut", twiliotest.Fault{Status: 400, Code: 21610, Message: "Attempt to send to unsubscribed recipient"}, provider.Permanent, "21610", 0},
		{"NotMobile", twiliotest.Fault{Status: 400, Code: 21614, Message: "not a mobile number"}, provider.Permanent, "21614", 0},
		{"GeoPermission", twiliotest.Fault{Status: 400, Code: 21408, Message: "Permission to send an SMS has not been enabled"}, provider.Config, "21408", 0},
		{"Auth", twiliotest.Fault{Status: 401, Code: 20003, Message: "Authenticate"}, provider.Config, "20003", 0},
		{"TooManyRequests", twiliotest.Fault{Status: 429, Code: 20429, Message: "Too Many Requests"}, provider.Transient, "20429", 0},
		{"Plain429", twiliotest.Fault{Status: 429}, provider.Transient, "429", 0},
		{"ServerError", twiliotest.Fault{Status: 500, Code: 20500, Message: "Internal Server Error"}, provider.Ambiguous, "20500", 0},
		{"Plain503", twiliotest.Fault{Status: 503}, provider.Ambiguous, "503", 0},
		{"TimeoutAfterAccept", twiliotest.Fault{AcceptThenHang: true}, provider.Ambiguous, "", 1},
		{"TimeoutBeforeAccept", twiliotest.Fault{HangBeforeAccept: true}, provider.Ambiguous, "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, func(c *twilio.Config) { c.Timeout = 300 * time.Millisecond })
			b.fake.Fail(tt.fault)
			body := "code " + tt.name
			_, err := b.p.Send(context.Background(), msg("v1_"+tt.name, body))
			var pe *provider.Error
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v, want *provider.Error", err)
			}
			if pe.Kind != tt.wantKind || pe.Code != tt.wantCode {
				t.Errorf("kind, code = %v, %q; want %v, %q (%v)", pe.Kind, pe.Code, tt.wantKind, tt.wantCode, pe)
			}
			if got := b.fake.Count(to, body); got != tt.wantCount {
				t.Errorf("ground truth count = %d, want %d", got, tt.wantCount)
			}
			text := pe.Error() + " " + provider.ReasonOf(pe)
			if pe.Err != nil {
				text += " " + pe.Err.Error()
			}
			if strings.Contains(text, strings.TrimPrefix(to, "+")) {
				t.Errorf("error text %q holds the raw number", text)
			}
		})
	}
}

func TestSendRealValidation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.fake.OptOut(to)
	_, err := b.p.Send(context.Background(), msg("v1_o", "x"))
	if got := provider.KindOf(err); got != provider.Permanent || provider.ReasonOf(err) != "21610: recipient unsubscribed (opted out)" {
		t.Errorf("opted out: %v %q, want permanent 21610", got, provider.ReasonOf(err))
	}
	m := msg("v1_bad", "x")
	m.To = "12345"
	if _, err := b.p.Send(context.Background(), m); provider.ReasonOf(err) != "21211: invalid 'To' phone number" {
		t.Errorf("bad number: %q, want 21211", provider.ReasonOf(err))
	}
	if _, err := b.p.Send(context.Background(), provider.Message{Channel: "email", To: "a@example.com"}); provider.KindOf(err) != provider.Permanent {
		t.Errorf("email channel: %v, want permanent", err)
	}
}

func TestConnectionRefused(t *testing.T) {
	t.Parallel()
	p, err := twilio.New(twilio.Config{BaseURL: "http://127.0.0.1:1", AccountSID: "AC1", AuthToken: "t", From: from})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Send(context.Background(), msg("v1_x", "x"))
	if got := provider.KindOf(err); got != provider.Transient {
		t.Errorf("kind = %v, want transient (%v)", got, err)
	}
}

func TestLookup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("Found", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		m := msg("v1_f", "Your order shipped")
		rc := b.send(t, m)
		// A content match alone proves nothing.
		res, err := b.p.Lookup(ctx, m)
		if err != nil || res.Status != provider.LookupUnproven {
			t.Errorf("Lookup without evidence = %+v, %v; want unproven", res, err)
		}
		// The SID a status callback recorded for the key proves it.
		m.ProviderMessageID = rc.MessageID
		res, err = b.p.Lookup(ctx, m)
		if err != nil || res.Status != provider.LookupAccepted || res.MessageID != rc.MessageID {
			t.Errorf("Lookup = %+v, %v; want accepted %s", res, err, rc.MessageID)
		}
	})
	// Regression (issue 21, defect 2): two logical messages with the same
	// text to one recipient. A never reached Twilio; B was sent. A's
	// lookup must not take B's message for A's: neither SENT nor, once B
	// is undelivered, FAILED.
	t.Run("IdenticalTextIsNotProof", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		a := msg("v1_a", "You have a new message")
		rcB := b.send(t, msg("v1_b", "You have a new message"))
		res, err := b.p.Lookup(ctx, a)
		if err != nil || res.Status != provider.LookupUnproven || res.MessageID != "" {
			t.Errorf("A's lookup = %+v, %v; want unproven, not B's message %s", res, err, rcB.MessageID)
		}
		b.fake.SetStatus(rcB.MessageID, "undelivered", 30007)
		res, err = b.p.Lookup(ctx, a)
		if err != nil || res.Status != provider.LookupUnproven {
			t.Errorf("A's lookup after B was undelivered = %+v, %v; want unproven", res, err)
		}
		// A's own callback evidence names a SID that is not B's: B is not
		// A's, and A's message is not listed.
		a.ProviderMessageID = "SMnot-listed"
		if res, err = b.p.Lookup(ctx, a); err != nil || res.Status != provider.LookupUnproven {
			t.Errorf("A's lookup with unlisted evidence = %+v, %v; want unproven", res, err)
		}
	})
	t.Run("AfterTheAttemptIsNotOurs", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		m := msg("v1_late", "same text")
		m.AttemptedAt = time.Now().Add(-10 * time.Minute)
		m.AttemptedUntil = time.Now().Add(-5 * time.Minute)
		b.send(t, msg("v1_b", "same text")) // created now, after A's claim ran out
		res, err := b.p.Lookup(ctx, m)
		if err != nil || res.Status != provider.LookupNotFound {
			t.Errorf("Lookup = %+v, %v; want not found (the match postdates the attempt)", res, err)
		}
	})
	// Regression (issue 21, defect 6): a search cut off at the page cap
	// is incomplete, an error, never "not found".
	t.Run("PageCapIsAnError", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for i := range 20*100 + 1 {
			if _, err := b.p.Send(ctx, msg("v1_n", fmt.Sprintf("filler %d", i))); err != nil {
				t.Fatal(err)
			}
		}
		res, err := b.p.Lookup(ctx, msg("v1_cap", "never sent"))
		if err == nil || provider.KindOf(err) != provider.Transient {
			t.Errorf("Lookup = %+v, %v; want a transient error (search incomplete)", res, err)
		}
	})
	t.Run("FoundAfterLostAnswer", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(c *twilio.Config) { c.Timeout = 300 * time.Millisecond })
		b.fake.Fail(twiliotest.Fault{AcceptThenHang: true})
		m := msg("v1_lost", "lost answer")
		if _, err := b.p.Send(ctx, m); provider.KindOf(err) != provider.Ambiguous {
			t.Fatalf("Send: %v, want ambiguous", err)
		}
		m.ProviderMessageID = b.fake.Messages()[0].SID // from the status callback
		res, err := b.p.Lookup(ctx, m)
		if err != nil || res.Status != provider.LookupAccepted || res.MessageID != b.fake.Messages()[0].SID {
			t.Errorf("Lookup = %+v, %v; want accepted", res, err)
		}
	})
	t.Run("NotFound", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		other := msg("v1_other", "another text")
		b.send(t, other)
		res, err := b.p.Lookup(ctx, msg("v1_nf", "never sent"))
		if err != nil || res.Status != provider.LookupNotFound {
			t.Errorf("Lookup = %+v, %v; want not found", res, err)
		}
	})
	t.Run("OlderSameBodyIsNotOurs", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.fake.SetNow(func() time.Time { return time.Now().Add(-10 * time.Minute) })
		m := msg("v1_old", "same text")
		b.send(t, m)
		m.AttemptedAt = time.Now()
		res, err := b.p.Lookup(ctx, m)
		if err != nil || res.Status != provider.LookupNotFound {
			t.Errorf("Lookup = %+v, %v; want not found (the match predates the attempt)", res, err)
		}
	})
	t.Run("Failed", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		m := msg("v1_fail", "will fail")
		rc := b.send(t, m)
		b.fake.SetStatus(rc.MessageID, "undelivered", 30007)
		m.ProviderMessageID = rc.MessageID
		res, err := b.p.Lookup(ctx, m)
		if err != nil || res.Status != provider.LookupRejected || res.Reason != "twilio status undelivered (error 30007)" {
			t.Errorf("Lookup = %+v, %v; want rejected 30007", res, err)
		}
	})
	t.Run("Paging", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		m := msg("v1_page", "the one")
		m.ProviderMessageID = b.send(t, m).MessageID
		for i := range 150 { // newer messages push ours to the second page
			if _, err := b.p.Send(ctx, msg("v1_n", "filler "+url.QueryEscape(string(rune('a'+i%26))))); err != nil {
				t.Fatal(err)
			}
		}
		res, err := b.p.Lookup(ctx, m)
		if err != nil || res.Status != provider.LookupAccepted {
			t.Errorf("Lookup = %+v, %v; want accepted", res, err)
		}
		if _, lists := b.fake.Requests(); lists != 2 {
			t.Errorf("list requests = %d, want 2 pages", lists)
		}
	})
	t.Run("BadToken", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(c *twilio.Config) { c.AuthToken = "wrong" })
		_, err := b.p.Lookup(ctx, msg("v1_x", "x"))
		if got := provider.KindOf(err); got != provider.Config {
			t.Errorf("kind = %v, want config", got)
		}
	})
}

// TestNoSecretsInLogsOrErrors: a failing send with a wrong token logs and
// returns errors that hold neither the token nor the raw number.
func TestNoSecretsInLogsOrErrors(t *testing.T) {
	t.Parallel()
	const secret = "s3cr3t-auth-token-value"
	b := setup(t, func(c *twilio.Config) { c.AuthToken = secret })
	var texts []string
	_, err := b.p.Send(context.Background(), msg("v1_s", "hi"))
	if provider.KindOf(err) != provider.Config {
		t.Fatalf("err = %v, want config", err)
	}
	texts = append(texts, err.Error(), provider.ReasonOf(err))
	_, err = b.p.Lookup(context.Background(), msg("v1_s", "hi"))
	texts = append(texts, err.Error(), provider.ReasonOf(err))
	logs := b.logs.String()
	if !strings.Contains(logs, "twilio send failed") {
		t.Fatalf("no failure logged: %q", logs)
	}
	for _, s := range append(texts, logs) {
		if strings.Contains(s, secret) || strings.Contains(s, "7654321") {
			t.Errorf("text leaks the token or the number: %q", s)
		}
	}
}

func TestNewErrors(t *testing.T) {
	t.Parallel()
	for name, cfg := range map[string]twilio.Config{
		"NoSID":       {AuthToken: "t", From: from},
		"NoToken":     {AccountSID: "AC1", From: from},
		"NoFrom":      {AccountSID: "AC1", AuthToken: "t"},
		"BadBase":     {AccountSID: "AC1", AuthToken: "t", From: from, BaseURL: "not a url"},
		"BadCallback": {AccountSID: "AC1", AuthToken: "t", From: from, CallbackBaseURL: "/relative"},
	} {
		if _, err := twilio.New(cfg); err == nil {
			t.Errorf("%s: New succeeded, want an error", name)
		}
	}
}

func TestClassifyUnknown(t *testing.T) {
	t.Parallel()
	tests := []struct {
		status int
		body   string
		want   provider.Kind
	}{
		{400, `{"code":29999,"message":"odd +15557654321"}`, provider.Permanent},
		{403, ``, provider.Config},
		{502, `<html>`, provider.Ambiguous},
		{404, `{"code":20404}`, provider.Config},
		{503, `{"code":21211}`, provider.Ambiguous},
	}
	for _, tt := range tests {
		got := twilio.Classify(tt.status, []byte(tt.body), to)
		if got.Kind != tt.want {
			t.Errorf("Classify(%d, %s) = %v, want %v", tt.status, tt.body, got.Kind, tt.want)
		}
		if strings.Contains(got.Error(), "7654321") {
			t.Errorf("Classify(%d, %s) text %q holds the number", tt.status, tt.body, got.Error())
		}
	}
}

// FuzzClassify: any status and body yield a classified error whose text
// never holds the recipient's number.
func FuzzClassify(f *testing.F) {
	f.Add(400, []byte(`{"code":21211,"message":"The 'To' number +15557654321 is not a valid phone number."}`))
	f.Add(500, []byte(`<html>oops</html>`))
	f.Add(429, []byte(``))
	f.Add(401, []byte(`{"code":"x"}`))
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		got := twilio.Classify(status, body, to)
		if got == nil || got.Provider != "twilio" || got.Reason == "" {
			t.Fatalf("Classify(%d, %q) = %+v", status, body, got)
		}
		if strings.Contains(got.Error(), to) {
			t.Errorf("text %q holds the number", got.Error())
		}
	})
}
