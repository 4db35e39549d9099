package chaos

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/mail"
	"strings"

	"github.com/sendonce/sendonce/internal/localpipeline"
	"github.com/sendonce/sendonce/internal/provider/smtpprovider"
	"github.com/sendonce/sendonce/internal/render"
	"github.com/sendonce/sendonce/notify"
)

// MIMEReport is the smtp lane's check of the whole path from a stored
// template (or a request's own content) to the MIME an SMTP server
// receives: every message the server took carries its key header, the
// subject (RFC 2047-decoded) and the parts the template renders on its
// data: text/plain alone, or multipart/alternative with text/plain and
// text/html.
type MIMEReport struct {
	// Checked counts the messages the server took and the check read;
	// HTML those with an HTML part, Encoded those whose subject travelled
	// RFC 2047-encoded (outside ASCII).
	Checked, HTML, Encoded int
	// Wrong counts the messages with a wrong key header, subject or
	// parts (each a violation, "wrong content").
	Wrong int
}

// summarize checks every message the smtp lane's server took for a valid
// message of ln against what its request renders with the templates in
// the lane's table, into lr.MIME; it returns a violation per wrong one.
func (l *smtpLane) summarize(ctx context.Context, ln *lane, lr *LaneReport) ([]Violation, error) {
	rend := render.New(ln.p.Templates(), render.Config{CacheTTL: -1})
	l.mu.Lock()
	data := maps.Clone(l.data)
	l.mu.Unlock()
	rep := &MIMEReport{}
	var vs []Violation
	for _, m := range ln.w.Messages {
		if !m.Valid || len(data[m.Address]) == 0 {
			continue
		}
		want, err := rend.RenderRequest(ctx, request(m))
		if err != nil {
			return vs, fmt.Errorf("chaos: smtp: render %s: %w", m.Key, err)
		}
		for _, d := range data[m.Address] {
			rep.Checked++
			if want.HTML != "" {
				rep.HTML++
			}
			encoded, err := checkEmail(d, m.Key, want)
			if encoded {
				rep.Encoded++
			}
			if err != nil {
				rep.Wrong++
				vs = append(vs, Violation{Lane: ln.def.Name, Kind: "wrong content", Key: m.Key, Detail: err.Error()})
			}
		}
	}
	lr.MIME = rep
	return vs, nil
}

// request is a valid message's request.
func request(m localpipeline.Message) notify.Request {
	var r notify.Request
	_ = json.Unmarshal([]byte(m.Body), &r) // a valid message's body is a request
	return r
}

// checkEmail checks that data, a received message, carries key in its
// key header and want's subject and parts: text/plain alone, or
// multipart/alternative with text/plain and text/html. encoded reports
// whether its subject travelled RFC 2047-encoded.
func checkEmail(data []byte, key string, want render.Rendered) (encoded bool, err error) {
	msg, err := mail.ReadMessage(bytes.NewReader(data))
	if err != nil {
		return false, fmt.Errorf("parse message: %w", err)
	}
	raw := msg.Header.Get("Subject")
	encoded = strings.Contains(raw, "=?")
	if got := msg.Header.Get(smtpprovider.KeyHeader); got != key {
		return encoded, fmt.Errorf("%s %q", smtpprovider.KeyHeader, got)
	}
	subject, err := new(mime.WordDecoder).DecodeHeader(raw)
	if err != nil {
		return encoded, fmt.Errorf("decode subject: %w", err)
	}
	if subject != want.Subject {
		return encoded, fmt.Errorf("subject %q, want %q", subject, want.Subject)
	}
	parts, err := textParts(msg.Header.Get("Content-Type"), msg.Header.Get("Content-Transfer-Encoding"), msg.Body)
	if err != nil {
		return encoded, err
	}
	wantParts := []textPart{{"text/plain", want.Body}}
	if want.HTML != "" {
		wantParts = append(wantParts, textPart{"text/html", want.HTML})
	}
	if len(parts) != len(wantParts) {
		return encoded, fmt.Errorf("%d parts, want %d", len(parts), len(wantParts))
	}
	for i, p := range parts {
		if p.typ != wantParts[i].typ || normalize(p.body) != normalize(wantParts[i].body) {
			return encoded, fmt.Errorf("part %d is %s %q, want %s %q", i, p.typ, p.body, wantParts[i].typ, wantParts[i].body)
		}
	}
	return encoded, nil
}

// textPart is one decoded text part of a message.
type textPart struct{ typ, body string }

// textParts decodes a body of content type ct: one text part, or the
// parts of a multipart/alternative one. It refuses multipart/mixed and
// other kinds: a message of the workload has no attachments.
func textParts(ct, cte string, body io.Reader) ([]textPart, error) {
	typ, params, err := mime.ParseMediaType(ct)
	if err != nil {
		return nil, fmt.Errorf("content type %q: %w", ct, err)
	}
	switch {
	case typ == "multipart/alternative":
		var out []textPart
		mr := multipart.NewReader(body, params["boundary"])
		for {
			part, err := mr.NextRawPart() // raw: the transfer encoding is checked below
			if err == io.EOF {
				return out, nil
			}
			if err != nil {
				return nil, fmt.Errorf("read part: %w", err)
			}
			sub, err := textParts(part.Header.Get("Content-Type"), part.Header.Get("Content-Transfer-Encoding"), part)
			if err != nil {
				return nil, err
			}
			if len(sub) != 1 {
				return nil, fmt.Errorf("nested multipart inside multipart/alternative")
			}
			out = append(out, sub[0])
		}
	case typ == "text/plain" || typ == "text/html":
		if cs := params["charset"]; cs != "" && !strings.EqualFold(cs, "utf-8") && !strings.EqualFold(cs, "us-ascii") {
			return nil, fmt.Errorf("%s charset %q, want UTF-8", typ, cs)
		}
		var r io.Reader = body
		switch strings.ToLower(strings.TrimSpace(cte)) {
		case "quoted-printable":
			r = quotedprintable.NewReader(body)
		case "base64":
			r = base64.NewDecoder(base64.StdEncoding, body) // it skips line ends
		case "", "7bit", "8bit":
		default:
			return nil, fmt.Errorf("%s transfer encoding %q", typ, cte)
		}
		b, err := io.ReadAll(r)
		if err != nil {
			return nil, fmt.Errorf("decode %s part: %w", typ, err)
		}
		return []textPart{{typ, string(b)}}, nil
	}
	return nil, fmt.Errorf("content type %s, want text/plain or multipart/alternative", typ)
}

// normalize makes line ends and trailing space immaterial.
func normalize(s string) string {
	return strings.TrimSpace(strings.ReplaceAll(s, "\r\n", "\n"))
}
