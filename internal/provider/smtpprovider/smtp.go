// Package smtpprovider sends email through an SMTP relay (with
// github.com/wneessen/go-mail) and translates every failure into a
// *provider.Error.
//
// Every message carries a deterministic Message-ID, <KEY@domain>, and the
// header X-Sendonce-Key: KEY, so a repeat is recognisable downstream (many
// relays and mailbox providers collapse equal Message-IDs), but SMTP itself
// takes no client key: the adapter promises neither idempotent sends nor
// lookup.
//
// # Classification
//
// SMTP makes the point of acceptance exact: the server's reply to the end
// of DATA (the final "."). Before it, nothing can have been delivered;
// after a 250 to it, the message was accepted.
//
//   - a connection, greeting or command failure before the final "." is
//     Transient (nothing was accepted), a 4xx reply Transient, a 5xx reply
//     to RCPT or DATA Permanent;
//   - 5xx to MAIL FROM, and authentication or TLS failures, are Config:
//     the deployment, not the message, is at fault;
//   - no reply to the final "." (timeout, dropped connection) is
//     Ambiguous: the server may have queued the message;
//   - an error after the 250 (RSET, QUIT) is ignored: the message was
//     accepted.
package smtpprovider

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/textproto"
	"strconv"
	"strings"
	"time"

	mail "github.com/wneessen/go-mail"

	"github.com/sendonce/sendonce/internal/decide"
	"github.com/sendonce/sendonce/internal/redact"
	"github.com/sendonce/sendonce/provider"
)

// Name is the adapter's configuration name.
const Name = "smtp"

// KeyHeader carries the idempotency key on every message.
const KeyHeader = "X-Sendonce-Key"

// TLSPolicy says whether STARTTLS is used.
type TLSPolicy string

// The TLS policies.
const (
	// TLSMandatory: STARTTLS is required; a server without it is a
	// Config error. The default.
	TLSMandatory TLSPolicy = "mandatory"
	// TLSOpportunistic: STARTTLS when the server offers it.
	TLSOpportunistic TLSPolicy = "opportunistic"
	// TLSNone: plain text; for local servers only.
	TLSNone TLSPolicy = "none"
)

// ParseTLSPolicy parses "mandatory", "opportunistic" or "none" (empty
// means mandatory). It returns an error naming the accepted values.
func ParseTLSPolicy(s string) (TLSPolicy, error) {
	switch p := TLSPolicy(strings.ToLower(strings.TrimSpace(s))); p {
	case "":
		return TLSMandatory, nil
	case TLSMandatory, TLSOpportunistic, TLSNone:
		return p, nil
	}
	return "", fmt.Errorf("smtpprovider: TLS policy %q is not one of mandatory, opportunistic, none", s)
}

// Config configures a Provider.
type Config struct {
	// Host and Port of the relay; Port zero means 587.
	Host string
	Port int
	// Username and Password enable SMTP AUTH (the best mechanism the
	// server offers; PLAIN without TLS when TLS is TLSNone).
	Username string
	Password string
	TLS      TLSPolicy
	// TLSConfig overrides the TLS settings (e.g. a test CA); nil means
	// system roots and the host name.
	TLSConfig *tls.Config
	// From is the sender address. Required.
	From string
	// MessageIDDomain is the right-hand side of Message-IDs; empty means
	// From's domain.
	MessageIDDomain string
	// Timeout bounds one send (connect to final reply); zero means 5s.
	Timeout time.Duration
	// Now is the clock for the Date header; nil means time.Now.
	Now func() time.Time
	// Logger receives one line per failed send (addresses redacted); nil
	// discards.
	Logger *slog.Logger
	// Redactor makes the tokens of the addresses in its log lines and
	// reasons; nil: redact.Default.
	Redactor *redact.Redactor
}

// Provider is the SMTP adapter. It implements provider.Adapter.
type Provider struct {
	cfg    Config
	domain string
	log    *slog.Logger
}

// New returns an SMTP adapter. It returns an error when Host or From is
// missing, From is not an address, or the TLS policy is unknown.
func New(cfg Config) (*Provider, error) {
	if cfg.Host == "" {
		return nil, errors.New("smtpprovider: new: no host")
	}
	if cfg.From == "" {
		return nil, errors.New("smtpprovider: new: no From address")
	}
	at := strings.LastIndexByte(cfg.From, '@')
	if at < 1 || at == len(cfg.From)-1 {
		return nil, errors.New("smtpprovider: new: From is not an email address")
	}
	pol, err := ParseTLSPolicy(string(cfg.TLS))
	if err != nil {
		return nil, fmt.Errorf("smtpprovider: new: %w", err)
	}
	cfg.TLS = pol
	if cfg.Port == 0 {
		cfg.Port = mail.DefaultPortTLS
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = decide.DefaultProviderTimeout
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	domain := cfg.MessageIDDomain
	if domain == "" {
		domain = strings.TrimSuffix(cfg.From[at+1:], ">")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Provider{cfg: cfg, domain: domain, log: log}, nil
}

// Name returns "smtp".
func (p *Provider) Name() string { return Name }

// Capabilities returns no idempotent sends and no lookup.
func (p *Provider) Capabilities() provider.Capabilities { return provider.Capabilities{} }

// MessageID returns the Message-ID (without angle brackets) a message
// with key gets: KEY@domain.
func (p *Provider) MessageID(key string) string { return key + "@" + p.domain }

// Send delivers m to the relay over a new connection. It returns the
// message's Message-ID as MessageID, or a *provider.Error classified as the
// package doc says.
func (p *Provider) Send(ctx context.Context, m provider.Message) (provider.Receipt, error) {
	if m.Channel != "" && m.Channel != "email" {
		return provider.Receipt{}, p.fail(ctx, m, &provider.Error{Kind: provider.Permanent, Provider: Name, Op: "send",
			Reason: fmt.Sprintf("channel %q is not served by smtp", m.Channel)})
	}
	msg, perr := p.message(m)
	if perr != nil {
		return provider.Receipt{}, p.fail(ctx, m, perr)
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	client, err := mail.NewClient(p.cfg.Host, p.options(ctx)...)
	if err != nil {
		return provider.Receipt{}, p.fail(ctx, m, &provider.Error{Kind: provider.Config, Provider: Name, Op: "send", Reason: "invalid SMTP client settings"})
	}
	sc, err := client.DialToSMTPClientWithContext(ctx)
	if err != nil {
		return provider.Receipt{}, p.fail(ctx, m, classifyDial(p.redact(), err, m.To))
	}
	defer func() { _ = client.CloseWithSMTPClient(sc) }()
	err = client.SendWithSMTPClient(sc, msg)
	if err != nil && !msg.IsDelivered() {
		return provider.Receipt{}, p.fail(ctx, m, classifySend(p.redact(), err, m.To))
	}
	// An error after the final 250 (RSET) does not undo the acceptance.
	return provider.Receipt{MessageID: p.MessageID(m.Key)}, nil
}

func (p *Provider) message(m provider.Message) (*mail.Msg, *provider.Error) {
	bad := func(reason string) *provider.Error {
		return &provider.Error{Kind: provider.Permanent, Provider: Name, Op: "send", Reason: reason}
	}
	if m.Key == "" || strings.ContainsAny(m.Key, "<>@ \r\n") {
		return nil, bad("key cannot form a Message-ID")
	}
	msg := mail.NewMsg()
	if err := msg.From(p.cfg.From); err != nil {
		return nil, &provider.Error{Kind: provider.Config, Provider: Name, Op: "send", Reason: "From is not a valid address"}
	}
	if err := msg.To(m.To); err != nil {
		return nil, bad("recipient is not a valid email address")
	}
	msg.Subject(m.Subject)
	msg.SetMessageIDWithValue(p.MessageID(m.Key))
	msg.SetGenHeader(mail.Header(KeyHeader), m.Key)
	msg.SetDateWithValue(p.cfg.Now())
	msg.SetBodyString(mail.TypeTextPlain, m.Body)
	if m.HTML != "" {
		msg.AddAlternativeString(mail.TypeTextHTML, m.HTML)
	}
	return msg, nil
}

// options builds the client options; the connection is closed when ctx
// ends, so a stalled server cannot outlive the caller's deadline.
func (p *Provider) options(ctx context.Context) []mail.Option {
	opts := []mail.Option{
		mail.WithPort(p.cfg.Port),
		mail.WithTimeout(p.cfg.Timeout),
		mail.WithDialContextFunc(func(dctx context.Context, network, addr string) (net.Conn, error) {
			var d net.Dialer
			conn, err := d.DialContext(dctx, network, addr)
			if err != nil {
				return nil, err
			}
			context.AfterFunc(ctx, func() { _ = conn.Close() })
			return conn, nil
		}),
	}
	switch p.cfg.TLS {
	case TLSNone:
		opts = append(opts, mail.WithTLSPolicy(mail.NoTLS))
	case TLSOpportunistic:
		opts = append(opts, mail.WithTLSPolicy(mail.TLSOpportunistic))
	default:
		opts = append(opts, mail.WithTLSPolicy(mail.TLSMandatory))
	}
	if p.cfg.TLSConfig != nil {
		opts = append(opts, mail.WithTLSConfig(p.cfg.TLSConfig))
	}
	if p.cfg.Username != "" {
		auth := mail.SMTPAuthAutoDiscover
		if p.cfg.TLS == TLSNone {
			auth = mail.SMTPAuthPlainNoEnc
		}
		opts = append(opts, mail.WithSMTPAuth(auth), mail.WithUsername(p.cfg.Username), mail.WithPassword(p.cfg.Password))
	}
	return opts
}

// redact returns p's Redactor, or the package default.
func (p *Provider) redact() *redact.Redactor {
	if p.cfg.Redactor != nil {
		return p.cfg.Redactor
	}
	return redact.Default()
}

func (p *Provider) fail(ctx context.Context, m provider.Message, pe *provider.Error) *provider.Error {
	p.log.WarnContext(ctx, "smtp send failed",
		"provider", Name, "key", m.Key, "to", p.redact().Address(m.To),
		"kind", pe.Kind.String(), "code", pe.Code, "reason", pe.Reason)
	return pe
}

// classifyDial classifies a failure to connect, greet, start TLS or
// authenticate: nothing was sent. Authentication and TLS failures are
// Config; the rest Transient.
func classifyDial(r *redact.Redactor, err error, to string) *provider.Error {
	pe := &provider.Error{Kind: provider.Transient, Provider: Name, Op: "send", Err: r.Error(err, to),
		Reason: "could not open an SMTP session: nothing was sent"}
	var te *textproto.Error
	if errors.As(err, &te) {
		pe.Code = strconv.Itoa(te.Code)
		switch te.Code {
		case 530, 534, 535, 538:
			pe.Kind, pe.Reason = provider.Config, "SMTP authentication failed"
			return pe
		}
		if te.Code >= 500 && te.Code < 600 {
			pe.Kind, pe.Reason = provider.Config, "SMTP server refused the session"
			return pe
		}
	}
	text := err.Error()
	var certErr *tls.CertificateVerificationError
	var recErr tls.RecordHeaderError
	switch {
	case strings.Contains(text, "SMTP AUTH") || (strings.Contains(strings.ToLower(text), "auth") && !strings.Contains(text, "authority")):
		pe.Kind, pe.Reason = provider.Config, "SMTP authentication failed or is not supported"
	case strings.Contains(text, "STARTTLS") || errors.As(err, &certErr) || errors.As(err, &recErr) || strings.Contains(text, "tls:") || strings.Contains(text, "x509:"):
		pe.Kind, pe.Reason = provider.Config, "SMTP TLS could not be established"
	}
	return pe
}

// classifySend classifies an error of sending over an open session (see
// the package doc); to is redacted by r out of any text kept.
func classifySend(r *redact.Redactor, err error, to string) *provider.Error {
	pe := &provider.Error{Kind: provider.Ambiguous, Provider: Name, Op: "send", Err: r.Error(err, to)}
	var se *mail.SendError
	if !errors.As(err, &se) {
		pe.Reason = "unrecognised SMTP failure: the message may have been accepted"
		return pe
	}
	code := se.ErrorCode()
	if code != 0 {
		pe.Code = strconv.Itoa(code)
		if esc := se.EnhancedStatusCode(); esc != "" {
			pe.Code += " " + esc
		}
	}
	reply := r.Text(se.Error(), to)
	switch se.Reason {
	case mail.ErrSMTPDataClose:
		switch {
		case code >= 500:
			pe.Kind, pe.Reason = provider.Permanent, "message rejected at end of DATA: "+reply
		case code >= 400:
			pe.Kind, pe.Reason = provider.Transient, "message deferred at end of DATA: "+reply
		default:
			pe.Kind, pe.Reason = provider.Ambiguous, "no reply to the end of DATA: the message may have been accepted"
		}
	case mail.ErrSMTPMailFrom:
		switch {
		case code >= 500:
			pe.Kind, pe.Reason = provider.Config, "sender rejected: "+reply
		default:
			pe.Kind, pe.Reason = provider.Transient, "MAIL FROM failed: "+reply
		}
	case mail.ErrSMTPRcptTo, mail.ErrSMTPData:
		switch {
		case code >= 500:
			pe.Kind, pe.Reason = provider.Permanent, "recipient or message rejected: "+reply
		default:
			pe.Kind, pe.Reason = provider.Transient, "not accepted before DATA ended: "+reply
		}
	case mail.ErrConnCheck, mail.ErrWriteContent, mail.ErrGetSender, mail.ErrGetRcpts:
		// The final "." was never written: nothing can have been accepted.
		pe.Kind, pe.Reason = provider.Transient, "session failed before the end of DATA: nothing was accepted"
		if code >= 500 && se.Reason != mail.ErrConnCheck {
			pe.Kind, pe.Reason = provider.Permanent, "rejected: "+reply
		}
	case mail.ErrNoUnencoded:
		pe.Kind, pe.Reason = provider.Config, "server does not support 8BITMIME"
	default:
		pe.Kind, pe.Reason = provider.Ambiguous, "SMTP failure of unknown stage: the message may have been accepted"
	}
	return pe
}
