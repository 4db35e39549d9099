// Package smtptest runs a real SMTP server (emersion/go-smtp) on loopback
// that keeps every message it takes: the ground truth of email sent
// through the SMTP adapter, in its tests, the capability tests and the
// local pipeline. It can be told to refuse recipients or messages, to
// require a login, and to stall after a message is in.
//
// A message counts as received once the whole of it is in, before the
// reply to the final ".", as for a relay.
package smtptest

import (
	"fmt"
	"io"
	"log"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// Message is one message the server received.
type Message struct {
	// From and To are the envelope's sender and recipients.
	From string
	To   []string
	// Data is the message as sent (RFC 5322 headers and body).
	Data []byte
}

// Options configures a Server. The zero value accepts every message.
type Options struct {
	// Username and Password, when Username is set, make the server
	// require AUTH PLAIN with them before MAIL (over plain TCP).
	Username, Password string
	// RcptErr, when set, answers every RCPT with it.
	RcptErr error
	// RefuseTo, when set, is a recipient the server does not have: a
	// RCPT to it is answered 550 5.1.1 (mailbox unavailable), as a
	// relay answers for an unknown address; other recipients are taken.
	RefuseTo string
	// DataErr, when set, answers every message with it after reading
	// it; the message is not kept.
	DataErr error
	// Stall is how many messages (from the first) are kept and then
	// never answered: the whole message is in, the final reply does not
	// come until Close. Negative stalls every message.
	Stall int
}

// Server is a running SMTP server. Its methods are safe for concurrent
// use.
type Server struct {
	// Port is the loopback port it listens on (host 127.0.0.1).
	Port int

	opts    Options
	srv     *smtp.Server
	release chan struct{}
	once    sync.Once

	mu    sync.Mutex
	msgs  []Message
	stall int
}

// Start starts a Server with opts on a free loopback port. Close stops
// it.
func Start(opts Options) (*Server, error) {
	s := &Server{opts: opts, release: make(chan struct{}), stall: opts.Stall}
	srv := smtp.NewServer(backend{s})
	srv.Domain = "smtptest.localhost"
	srv.AllowInsecureAuth = true
	srv.ReadTimeout = 30 * time.Second
	srv.WriteTimeout = 30 * time.Second
	srv.MaxMessageBytes = 1 << 20
	srv.ErrorLog = log.New(io.Discard, "", 0) // a client a deadline cut off is not news
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("smtptest: listen: %w", err)
	}
	s.srv, s.Port = srv, ln.Addr().(*net.TCPAddr).Port
	go func() { _ = srv.Serve(ln) }()
	return s, nil
}

// New starts a Server with opts for the length of t.
func New(t testing.TB, opts Options) *Server {
	t.Helper()
	s, err := Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// Messages returns the messages received so far, in order.
func (s *Server) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.msgs...)
}

// Close releases stalled messages (their clients get their reply or a
// closed connection), stops the server and closes its connections. It is
// idempotent.
func (s *Server) Close() error {
	var err error
	s.once.Do(func() {
		close(s.release)
		if cerr := s.srv.Close(); cerr != nil {
			err = fmt.Errorf("smtptest: close: %w", cerr)
		}
	})
	return err
}

type backend struct{ s *Server }

func (b backend) NewSession(*smtp.Conn) (smtp.Session, error) { return &session{s: b.s}, nil }

type session struct {
	s      *Server
	authed bool
	from   string
	to     []string
}

func (ss *session) AuthMechanisms() []string {
	if ss.s.opts.Username == "" {
		return nil
	}
	return []string{sasl.Plain}
}

func (ss *session) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, user, pass string) error {
		if user != ss.s.opts.Username || pass != ss.s.opts.Password {
			return &smtp.SMTPError{Code: 535, EnhancedCode: smtp.EnhancedCode{5, 7, 8}, Message: "Authentication credentials invalid"}
		}
		ss.authed = true
		return nil
	}), nil
}

func (ss *session) Mail(from string, _ *smtp.MailOptions) error {
	if ss.s.opts.Username != "" && !ss.authed {
		return smtp.ErrAuthRequired
	}
	ss.from = from
	return nil
}

func (ss *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	if ss.s.opts.RcptErr != nil {
		return ss.s.opts.RcptErr
	}
	if to == ss.s.opts.RefuseTo && to != "" {
		return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "<" + to + ">: mailbox unavailable"}
	}
	ss.to = append(ss.to, to)
	return nil
}

func (ss *session) Data(r io.Reader) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if ss.s.opts.DataErr != nil {
		return ss.s.opts.DataErr
	}
	s := ss.s
	s.mu.Lock()
	s.msgs = append(s.msgs, Message{From: ss.from, To: ss.to, Data: data})
	stall := s.stall != 0
	if s.stall > 0 {
		s.stall--
	}
	s.mu.Unlock()
	if stall {
		<-s.release // the whole message is in; the final reply never comes
	}
	return nil
}

func (ss *session) Reset()        { ss.from, ss.to = "", nil }
func (ss *session) Logout() error { return nil }
