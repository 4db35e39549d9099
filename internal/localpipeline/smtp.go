package localpipeline

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/sendonce/sendonce/internal/notify"
	"github.com/sendonce/sendonce/internal/provider/registry"
	"github.com/sendonce/sendonce/internal/provider/smtpprovider"
	"github.com/sendonce/sendonce/internal/render"
	"github.com/sendonce/sendonce/internal/templates/dynamotemplates"
	"github.com/sendonce/sendonce/internal/testenv"
)

// SMTPServer is a real SMTP server (emersion/go-smtp) on loopback that
// accepts every message and keeps it: the ground truth of the email sent
// through the SMTP adapter (SENDONCE_EMAIL_PROVIDER=smtp). A message
// counts as received once the whole of it is in, before the reply to the
// final ".", as for a relay.
type SMTPServer struct {
	srv  *smtp.Server
	port int

	mu   sync.Mutex
	msgs []SMTPMessage
}

// SMTPMessage is one message an SMTPServer received.
type SMTPMessage struct {
	// From and To are the envelope's sender and recipients.
	From string
	To   []string
	// Data is the message as sent (RFC 5322 headers and body).
	Data []byte
}

// StartSMTPServer starts an SMTPServer on a free loopback port. Close
// stops it.
func StartSMTPServer() (*SMTPServer, error) {
	s := &SMTPServer{}
	srv := smtp.NewServer(smtpBackend{s})
	srv.Domain = "localpipeline.localhost"
	srv.ReadTimeout = 30 * time.Second
	srv.WriteTimeout = 30 * time.Second
	srv.MaxMessageBytes = 1 << 20
	srv.ErrorLog = log.New(io.Discard, "", 0) // a client the sender's deadline cut off is not news
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("localpipeline: smtp server: listen: %w", err)
	}
	s.srv, s.port = srv, ln.Addr().(*net.TCPAddr).Port
	go func() { _ = srv.Serve(ln) }()
	return s, nil
}

// Env returns the Options.Env of a pipeline whose functions send email
// through the SMTP adapter to s, from the address from, without TLS (a
// loopback server only), and no SMS.
func (s *SMTPServer) Env(from string) map[string]string {
	return map[string]string{
		registry.EnvEmailProvider: "smtp", registry.EnvSMSProvider: "",
		registry.EnvSMTPHost: "127.0.0.1", registry.EnvSMTPPort: strconv.Itoa(s.port),
		registry.EnvSMTPFrom: from, registry.EnvSMTPTLS: "none",
	}
}

// Messages returns the messages received so far, in order.
func (s *SMTPServer) Messages() []SMTPMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]SMTPMessage(nil), s.msgs...)
}

// Close stops the server and closes its connections.
func (s *SMTPServer) Close() error {
	if err := s.srv.Close(); err != nil {
		return fmt.Errorf("localpipeline: smtp server: close: %w", err)
	}
	return nil
}

type smtpBackend struct{ s *SMTPServer }

func (b smtpBackend) NewSession(*smtp.Conn) (smtp.Session, error) {
	return &smtpSession{s: b.s}, nil
}

type smtpSession struct {
	s    *SMTPServer
	from string
	to   []string
}

func (ss *smtpSession) Mail(from string, _ *smtp.MailOptions) error {
	ss.from = from
	return nil
}

func (ss *smtpSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	ss.to = append(ss.to, to)
	return nil
}

func (ss *smtpSession) Data(r io.Reader) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	ss.s.mu.Lock()
	ss.s.msgs = append(ss.s.msgs, SMTPMessage{From: ss.from, To: ss.to, Data: data})
	ss.s.mu.Unlock()
	return nil
}

func (ss *smtpSession) Reset()        { ss.from, ss.to = "", nil }
func (ss *smtpSession) Logout() error { return nil }

// SMTPReport is what RunSMTP found in the SMTP server's received
// messages: its ground truth.
type SMTPReport struct {
	Elapsed time.Duration
	// Email counts the logical messages, HTML those with an HTML part;
	// Copies the SQS messages sent for them; Received the messages the
	// server took in all.
	Email, HTML, Copies, Received int
	// Sent counts the messages received once with the right content.
	Sent int
	// Twice lists the keys received more than once; Lost those SENT (or
	// never final) but never received; NotSent those whose row is final
	// but not SENT, with state and reason; BadContent those received once
	// with the wrong key header, subject or parts, with what is wrong.
	Twice, Lost, NotSent, BadContent []string
	// Abandoned counts rows the reconciler gave up on by class policy
	// after an ambiguous send (SMTP can neither drop a repeat nor be
	// asked); AbandonedRecorded those the server did receive.
	Abandoned, AbandonedRecorded int
	// Leaks counts log lines of any function holding a raw address.
	Leaks int
}

// OK reports whether no message was received twice, every message is SENT
// and received once with the right content (or abandoned by policy after
// an ambiguous send), and no address reached a log.
func (r SMTPReport) OK() bool {
	return len(r.Twice) == 0 && len(r.Lost) == 0 && len(r.NotSent) == 0 && len(r.BadContent) == 0 && r.Leaks == 0
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
	for _, k := range r.NotSent {
		fmt.Fprintf(w, "  not SENT: %s\n", k)
	}
	for _, k := range r.BadContent {
		fmt.Fprintf(w, "  wrong content: %s\n", k)
	}
}

// RunSMTP sends n emails through p (started with srv.Env), each enqueued
// copies times: even ones from the order_shipped template (a text and an
// HTML part), odd ones from welcome (text only). It waits until every row
// is final or timeout passes, and checks srv's received messages: each
// message exactly once, with its key header, the subject and the parts
// the stored template renders (multipart/alternative when there is HTML).
func RunSMTP(ctx context.Context, p *Pipeline, srv *SMTPServer, n, copies int, timeout time.Duration) (SMTPReport, error) {
	start := time.Now()
	run := testenv.RandomID()[:8]
	rend := render.New(dynamotemplates.New(p.ddb, p.Table), render.WithCacheTTL(0))
	var (
		msgs []nativeMessage
		reqs []notify.Request
		want = map[string]render.Message{}
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
	st, err := settle(ctx, p, msgs, reqs, copies, timeout)
	rep.Copies, rep.NotSent = st.copies, st.notSentList
	if err != nil {
		return rep, err
	}
	received := srv.Messages()
	rep.Received = len(received)
	byRcpt := map[string][]SMTPMessage{}
	for _, r := range received {
		for _, to := range r.To {
			byRcpt[to] = append(byRcpt[to], r)
		}
	}
	for _, m := range msgs {
		got := byRcpt[m.address]
		switch st.judge(m.key, len(got)) {
		case verdictTwice:
			rep.Twice = append(rep.Twice, m.key)
		case verdictLost:
			rep.Lost = append(rep.Lost, m.key)
		case verdictAbandoned:
			rep.Abandoned++
			rep.AbandonedRecorded += len(got)
		case verdictOnce:
			if err := checkEmail(got[0].Data, m.key, want[m.key]); err != nil {
				rep.BadContent = append(rep.BadContent, fmt.Sprintf("%s: %v", m.key, err))
			} else {
				rep.Sent++
			}
		}
	}
	rep.Leaks = addressLeaks(p, msgs)
	rep.Elapsed = time.Since(start)
	return rep, nil
}

// checkEmail checks that data, a received message, carries key in its
// key header and want's subject and parts: text/plain alone, or
// multipart/alternative with text/plain and text/html.
func checkEmail(data []byte, key string, want render.Message) error {
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
