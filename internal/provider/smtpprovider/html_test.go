package smtpprovider_test

import (
	"bytes"
	"io"
	"mime"
	"mime/multipart"
	"net/mail"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/provider/smtpprovider/smtptest"
)

// TestSendHTMLIsMultipartAlternative: a message with an HTML part reaches
// the server as multipart/alternative, text first, HTML second; one
// without stays text/plain.
func TestSendHTMLIsMultipartAlternative(t *testing.T) {
	t.Parallel()
	b := setup(t, smtptest.Options{})
	p := b.provider(t)
	m := email("v1_html")
	m.HTML = "<p>Order <b>A-1001</b> shipped</p>"
	if _, err := p.Send(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Send(t.Context(), email("v1_plain")); err != nil {
		t.Fatal(err)
	}
	got := b.received()
	if len(got) != 2 {
		t.Fatalf("server received %d messages", len(got))
	}
	msg, err := mail.ReadMessage(bytes.NewReader(got[0]))
	if err != nil {
		t.Fatal(err)
	}
	mt, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/alternative" {
		t.Fatalf("Content-Type = %q (%v), want multipart/alternative", msg.Header.Get("Content-Type"), err)
	}
	r := multipart.NewReader(msg.Body, params["boundary"])
	var parts []string
	for {
		part, err := r.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(part)
		ct, _, _ := mime.ParseMediaType(part.Header.Get("Content-Type"))
		parts = append(parts, ct+": "+strings.TrimSpace(string(body)))
	}
	if len(parts) != 2 || parts[0] != "text/plain: Order A-1001 shipped" || parts[1] != "text/html: "+m.HTML {
		t.Errorf("parts = %q", parts)
	}
	plain, _ := mail.ReadMessage(bytes.NewReader(got[1]))
	if ct := plain.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("message without HTML: Content-Type = %q, want text/plain", ct)
	}
}
