package localpipeline

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/provider/smtpprovider/smtptest"
	"github.com/sendonce/sendonce/internal/render"
)

// TestSMTPPhase: through the real sender bootstrap under the RIE and the
// SMTP adapter, each email enqueued three times reaches a real SMTP server
// once, with its key header, the stored template's subject and its parts
// (multipart/alternative with text and HTML for order_shipped, text alone
// for welcome).
func TestSMTPPhase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := smtptest.New(t, smtptest.Options{})
	p := StartTest(t, Options{
		SenderInstances: 2, ProviderTimeout: 5 * time.Second, ClaimTimeout: 15 * time.Second,
		SenderTimeout: 15 * time.Second, VisibilityTimeout: 20 * time.Second,
		Env: SMTPEnv(srv, "notify@sendonce.example"),
	})
	rep, err := RunSMTP(ctx, p, srv, 6, 3, 90*time.Second)
	if err != nil {
		t.Fatalf("RunSMTP: %v", err)
	}
	if !rep.OK() || rep.Sent+rep.Abandoned != 6 || rep.Email != 6 || rep.HTML != 3 || rep.Copies != 18 || rep.Received != rep.Sent+rep.AbandonedRecorded {
		var b strings.Builder
		rep.WriteSummary(&b)
		t.Fatalf("SMTP run:\n%s", b.String())
	}
}

// TestCheckEmail: the content check refuses a wrong key header, subject,
// part type or text, and a missing HTML part.
func TestCheckEmail(t *testing.T) {
	want := render.Rendered{Subject: "Welcome, Zoë", Body: "Hi Zoë,\nwelcome.", HTML: "<p>Hi Zoë</p>"}
	msg := func(key, subject, body string) []byte {
		return []byte("X-Sendonce-Key: " + key + "\r\nSubject: " + subject + "\r\nMIME-Version: 1.0\r\n" + body)
	}
	alt := "Content-Type: multipart/alternative; boundary=b\r\n\r\n" +
		"--b\r\nContent-Type: text/plain; charset=UTF-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\nHi Zo=C3=AB,\r\nwel=\r\ncome.\r\n" +
		"--b\r\nContent-Type: text/html; charset=UTF-8\r\nContent-Transfer-Encoding: base64\r\n\r\nPHA+SGkgWm/DqzwvcD4=\r\n--b--\r\n"
	plain := "Content-Type: text/plain; charset=UTF-8\r\n\r\nHi Zoë,\r\nwelcome.\r\n"
	subject := "=?UTF-8?q?Welcome,_Zo=C3=AB?="
	if err := checkEmail(msg("k1", subject, alt), "k1", want); err != nil {
		t.Fatalf("right message refused: %v", err)
	}
	textOnly := want
	textOnly.HTML = ""
	if err := checkEmail(msg("k1", subject, plain), "k1", textOnly); err != nil {
		t.Fatalf("right text-only message refused: %v", err)
	}
	for name, c := range map[string]struct {
		data []byte
		want render.Rendered
	}{
		"WrongKey":     {msg("k2", subject, alt), want},
		"WrongSubject": {msg("k1", "Welcome", alt), want},
		"NoHTML":       {msg("k1", subject, plain), want},
		"ExtraHTML":    {msg("k1", subject, alt), textOnly},
		"WrongText":    {msg("k1", subject, strings.Replace(plain, "welcome", "goodbye", 1)), textOnly},
		"Mixed":        {msg("k1", subject, strings.Replace(alt, "alternative", "mixed", 1)), want},
	} {
		if err := checkEmail(c.data, "k1", c.want); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
