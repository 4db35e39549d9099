package chaos

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/sendonce/sendonce/internal/localpipeline"
	"github.com/sendonce/sendonce/internal/provider/registry"
)

// smtpLane is the SMTP adapter against a real SMTP server (emersion/
// go-smtp) that records every message it took, by recipient, and
// sometimes stalls after DATA: the message is in, the final reply never
// comes before the adapter gives up. Its verdict also checks each
// message's MIME against its template (summarize, MIMEReport).
type smtpLane struct {
	*drawer
	srv     *smtp.Server
	port    int
	stall   time.Duration
	done    chan struct{}
	closing sync.Once

	mu   sync.Mutex
	data map[string][][]byte // recipient → every message taken, as received
}

// smtpFrom is the lane's envelope and header sender.
const smtpFrom = "chaos@sendonce.test"

func newSMTPLane(_ context.Context, o Options, seed uint64) (Counterpart, error) {
	l := &smtpLane{drawer: newDrawer(o.SendFaults, seed), stall: 2 * localpipeline.DefaultProviderTimeout, done: make(chan struct{}), data: map[string][][]byte{}}
	srv := smtp.NewServer(l)
	srv.Domain = "chaos.localhost"
	srv.ReadTimeout = 30 * time.Second
	srv.WriteTimeout = 30 * time.Second
	srv.MaxRecipients = 1
	srv.ErrorLog = log.New(io.Discard, "", 0) // stalls and killed clients are the point
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("chaos: smtp: listen: %w", err)
	}
	l.srv, l.port = srv, ln.Addr().(*net.TCPAddr).Port
	go func() { _ = srv.Serve(ln) }()
	return l, nil
}

// NewSession implements smtp.Backend.
func (l *smtpLane) NewSession(*smtp.Conn) (smtp.Session, error) { return &smtpSession{l: l}, nil }

type smtpSession struct {
	l     *smtpLane
	rcpt  string
	fault faultKind
	delay time.Duration
}

func (s *smtpSession) Mail(string, *smtp.MailOptions) error { return nil }

func (s *smtpSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.rcpt = to
	s.fault, s.delay = s.l.draw(to)
	switch s.fault {
	case fkTransient, fkOutage:
		return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 2}, Message: "Try again later"}
	case fkReject:
		return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "Mailbox unavailable"}
	case fkBefore:
		s.l.wait(s.l.stall) // no reply until the client gave up
		return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 4, 2}, Message: "Timed out"}
	}
	return nil
}

func (s *smtpSession) Data(r io.Reader) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	// The whole message is in: the server has it.
	s.l.mu.Lock()
	s.l.data[s.rcpt] = append(s.l.data[s.rcpt], data)
	s.l.mu.Unlock()
	s.l.took(s.rcpt)
	switch s.fault {
	case fkAfter, fkAfterError:
		// Stalls after DATA: the final reply comes too late. (A server
		// that answers 4xx to DATA has not taken the message, so an
		// error after accepting is a stall here too.)
		s.l.wait(s.l.stall)
	case fkSlow:
		s.l.wait(s.delay)
	}
	return nil
}

func (s *smtpSession) Reset()        { s.rcpt, s.fault = "", fkNone }
func (s *smtpSession) Logout() error { return nil }

func (l *smtpLane) wait(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-l.done:
	}
}

func (l *smtpLane) Env() map[string]string {
	return map[string]string{
		registry.EnvEmailProvider: "smtp", registry.EnvSMSProvider: "",
		registry.EnvSMTPHost: "127.0.0.1", registry.EnvSMTPPort: strconv.Itoa(l.port),
		registry.EnvSMTPFrom: smtpFrom, registry.EnvSMTPTLS: "none",
	}
}

func (l *smtpLane) Delivered(_ context.Context, w localpipeline.Workload) (map[string]int, map[string]string, error) {
	l.mu.Lock()
	count := make(map[string]int, len(l.data))
	for k, v := range l.data {
		count[k] = len(v)
	}
	l.mu.Unlock()
	return byAddress(w, count, true), nil, nil
}

func (l *smtpLane) Close() {
	l.closing.Do(func() {
		close(l.done)
		_ = l.srv.Close()
	})
}
