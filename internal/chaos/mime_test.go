package chaos

import (
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/render"
)

// TestCheckEmail: the smtp lane's content check refuses a wrong key
// header, subject, part type or text, and a missing HTML part.
func TestCheckEmail(t *testing.T) {
	t.Parallel()
	want := render.Rendered{Subject: "Welcome, Zoë", Body: "Hi Zoë,\nwelcome.", HTML: "<p>Hi Zoë</p>"}
	msg := func(key, subject, body string) []byte {
		return []byte("X-Sendonce-Key: " + key + "\r\nSubject: " + subject + "\r\nMIME-Version: 1.0\r\n" + body)
	}
	alt := "Content-Type: multipart/alternative; boundary=b\r\n\r\n" +
		"--b\r\nContent-Type: text/plain; charset=UTF-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\nHi Zo=C3=AB,\r\nwel=\r\ncome.\r\n" +
		"--b\r\nContent-Type: text/html; charset=UTF-8\r\nContent-Transfer-Encoding: base64\r\n\r\nPHA+SGkgWm/DqzwvcD4=\r\n--b--\r\n"
	plain := "Content-Type: text/plain; charset=UTF-8\r\n\r\nHi Zoë,\r\nwelcome.\r\n"
	subject := "=?UTF-8?q?Welcome,_Zo=C3=AB?="
	if encoded, err := checkEmail(msg("k1", subject, alt), "k1", want); err != nil || !encoded {
		t.Fatalf("right message refused (%v) or its encoded subject not seen (%v)", err, encoded)
	}
	textOnly := want
	textOnly.HTML = ""
	if _, err := checkEmail(msg("k1", subject, plain), "k1", textOnly); err != nil {
		t.Fatalf("right text-only message refused: %v", err)
	}
	if encoded, _ := checkEmail(msg("k1", "Welcome", plain), "k1", textOnly); encoded {
		t.Errorf("an ASCII subject counted as RFC 2047-encoded")
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
		"Latin1":       {msg("k1", subject, strings.Replace(plain, "UTF-8", "ISO-8859-1", 1)), textOnly},
	} {
		if _, err := checkEmail(c.data, "k1", c.want); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
