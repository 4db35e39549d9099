package localpipeline

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/mail"
	"strconv"
	"strings"
	"time"

	"github.com/sendonce/sendonce/internal/provider/registry"
	"github.com/sendonce/sendonce/internal/provider/smtpprovider"
	"github.com/sendonce/sendonce/internal/provider/smtpprovider/smtptest"
	"github.com/sendonce/sendonce/internal/render"
	"github.com/sendonce/sendonce/internal/templates/dynamotemplates"
	"github.com/sendonce/sendonce/internal/testenv"
	"github.com/sendonce/sendonce/notify"
)

// SMTPEnv returns the Options.Env of a pipeline whose functions send
// email through the SMTP adapter to srv, from the address from, without
// TLS (a loopback server only), and no SMS.
func SMTPEnv(srv *smtptest.Server, from string) map[string]string {
	return map[string]string{
		registry.EnvEmailProvider: "smtp", registry.EnvSMSProvider: "",
		registry.EnvSMTPHost: "127.0.0.1", registry.EnvSMTPPort: strconv.Itoa(srv.Port),
		registry.EnvSMTPFrom: from, registry.EnvSMTPTLS: "none",
	}
}

// SMTPReport is what RunSMTP found in the SMTP server's received
// messages: its ground truth.
type SMTPReport struct {
	// Email counts the logical messages, HTML those with an HTML part;
	// Received the messages the server took in all.
	Email, HTML, Received int
	// Sent counts the messages received once with the right content.
	Sent int
	// BadContent lists the keys received once with the wrong key header,
	// subject or parts, with what is wrong.
	BadContent []string
	PhaseVerdicts
}

// OK reports whether no message was received twice, every message is SENT
// and received once with the right content (or abandoned by policy after
// an ambiguous send), and no address reached a log.
func (r SMTPReport) OK() bool {
	return r.PhaseVerdicts.OK() && len(r.BadContent) == 0
}

// WriteSummary prints r.
func (r SMTPReport) WriteSummary(w io.Writer) {
	fmt.Fprintf(w, "Email through SMTP (go-smtp server ground truth) in %s:\n", r.Elapsed.Round(10*time.Millisecond))
	fmt.Fprintf(w, "  email through SMTP: %d messages (%d with an HTML part), %d received once with the right subject and parts\n",
		r.Email, r.HTML, r.Sent)
	fmt.Fprintf(w, "  SQS copies sent: %d; messages received: %d; delivered twice: %d; lost: %d; wrong content: %d; other final states: %d; address leaks in logs: %d\n",
		r.Copies, r.Received, len(r.Twice), len(r.Lost), len(r.BadContent), len(r.NotSent), r.Leaks)
	fmt.Fprintf(w, "  ambiguous sends abandoned by class policy: %d (the server had received %d of them: SMTP cannot be asked)\n",
		r.Abandoned, r.AbandonedRecorded)
	r.writeDetail(w)
	for _, k := range r.BadContent {
		fmt.Fprintf(w, "  wrong content: %s\n", k)
	}
}

// RunSMTP sends n emails through p (started with SMTPEnv(srv, ...)), each enqueued
// copies times: even ones from the order_shipped template (a text and an
// HTML part), odd ones from welcome (text only). It waits until every row
// is final or timeout passes, and checks srv's received messages: each
// message exactly once, with its key header, the subject and the parts
// the stored template renders (multipart/alternative when there is HTML).
func RunSMTP(ctx context.Context, p *Pipeline, srv *smtptest.Server, n, copies int, timeout time.Duration) (SMTPReport, error) {
	start := time.Now()
	run := testenv.RandomID()[:8]
	rend := render.New(dynamotemplates.New(p.ddb, p.Table, dynamotemplates.Config{}), render.Config{CacheTTL: -1})
	var (
		msgs []nativeMessage
		reqs []notify.Request
		want = map[string]render.Rendered{}
		rep  SMTPReport
	)
	for i := range n {
		req := notify.Request{
			TenantID: nativeTenant, EventID: fmt.Sprintf("evt_smtp_%s_%d", run, i), Channel: notify.ChannelEmail,
			Recipient: notify.Recipient{ID: fmt.Sprintf("user-%d", i), Email: fmt.Sprintf("user%d-%s@example.com", i, run)},
			Class:     notify.ClassTransactional, Template: "order_shipped",
			Data: map[string]any{"order_id": fmt.Sprintf("S-%s-%d", run, i), "name": "José"},
		}
		if i%2 == 1 {
			// A name outside ASCII in welcome's subject: it travels
			// RFC 2047-encoded.
			req.Template, req.Data = "welcome", map[string]any{"name": "Zoë", "product": "sendonce"}
		}
		m, err := rend.RenderRequest(ctx, req)
		if err != nil {
			return rep, fmt.Errorf("localpipeline: render the expected email: %w", err)
		}
		if m.HTML != "" {
			rep.HTML++
		}
		rep.Email++
		nm := nativeMessage{key: req.Key(), channel: "email", address: req.Recipient.Email}
		want[nm.key] = m
		msgs, reqs = append(msgs, nm), append(reqs, req)
	}
	st, err := settle(ctx, p, msgs, reqs, copies, timeout, &rep.PhaseVerdicts)
	if err != nil {
		return rep, err
	}
	received := srv.Messages()
	rep.Received = len(received)
	byRcpt := map[string][]smtptest.Message{}
	for _, r := range received {
		for _, to := range r.To {
			byRcpt[to] = append(byRcpt[to], r)
		}
	}
	st.judgeAll(p, &rep.PhaseVerdicts, msgs, func(m nativeMessage) int { return len(byRcpt[m.address]) }, func(m nativeMessage) {
		if err := checkEmail(byRcpt[m.address][0].Data, m.key, want[m.key]); err != nil {
			rep.BadContent = append(rep.BadContent, fmt.Sprintf("%s: %v", m.key, err))
		} else {
			rep.Sent++
		}
	})
	rep.Elapsed = time.Since(start)
	return rep, nil
}

// checkEmail checks that data, a received message, carries key in its
// key header and want's subject and parts: text/plain alone, or
// multipart/alternative with text/plain and text/html.
func checkEmail(data []byte, key string, want render.Rendered) error {
	msg, err := mail.ReadMessage(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("parse message: %w", err)
	}
	if got := msg.Header.Get(smtpprovider.KeyHeader); got != key {
		return fmt.Errorf("%s %q", smtpprovider.KeyHeader, got)
	}
	subject, err := new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject"))
	if err != nil {
		return fmt.Errorf("decode subject: %w", err)
	}
	if subject != want.Subject {
		return fmt.Errorf("subject %q, want %q", subject, want.Subject)
	}
	parts, err := textParts(msg.Header.Get("Content-Type"), msg.Header.Get("Content-Transfer-Encoding"), msg.Body)
	if err != nil {
		return err
	}
	wantParts := []textPart{{"text/plain", want.Body}}
	if want.HTML != "" {
		wantParts = append(wantParts, textPart{"text/html", want.HTML})
	}
	if len(parts) != len(wantParts) {
		return fmt.Errorf("%d parts, want %d", len(parts), len(wantParts))
	}
	for i, p := range parts {
		if p.typ != wantParts[i].typ || normalize(p.body) != normalize(wantParts[i].body) {
			return fmt.Errorf("part %d is %s %q, want %s %q", i, p.typ, p.body, wantParts[i].typ, wantParts[i].body)
		}
	}
	return nil
}

// textPart is one decoded text part of a message.
type textPart struct{ typ, body string }

// textParts decodes a body of content type ct: one text part, or the
// parts of a multipart/alternative one. It refuses multipart/mixed and
// other kinds: a message of the demo has no attachments.
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
