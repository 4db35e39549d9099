// Package httpprovider is the adapter for the generic HTTP provider protocol
// (docs/http-provider.md) and the signing scheme of its delivery callbacks.
//
// Send classifies every outcome into a provider.Kind:
//
//	200, 201, 202 with an "id"           accepted: a Receipt
//	200, 201, 202 without a usable id     Ambiguous (it was accepted, perhaps)
//	other 2xx                             Ambiguous
//	3xx (redirects are never followed)    Config: the base URL is wrong
//	400, 404, 413, 422, other 4xx         Permanent, with the provider's reason
//	401, 403, 407                         Config
//	408, 409, 425, 429                    Transient: the provider did not take it
//	503, idempotent provider              Transient: the provider took nothing
//	other 5xx                             Ambiguous (it may have taken the message; a repeat
//	                                      with the same key is harmless, another provider is not)
//	5xx, DisableIdempotency               Ambiguous: the provider may have accepted
//	                                      before failing, and a retry would duplicate
//	any other status                      Ambiguous
//	no answer, request written            Ambiguous (timeout, reset, EOF)
//	no answer, request not written        Transient (DNS, refused, TLS)
//
// An error answer's Retry-After header is kept in the error's chain
// (package retryafter), where the pacer finds it.
//
// "Written" is known from net/http/httptrace: once the transport reports
// the request written (even with an error), the provider may have taken it.
//
// Lookup asks GET {base}/messages?reference={key}. A lookup sends nothing,
// so what would be Ambiguous for a send is Transient for a lookup.
//
// The bearer token never appears in an error, a reason or a log line, and
// a recipient address the provider echoes in its reason is redacted.
package httpprovider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/sendonce/sendonce/internal/decide"
	"github.com/sendonce/sendonce/internal/redact"
	"github.com/sendonce/sendonce/internal/retryafter"
	"github.com/sendonce/sendonce/provider"
)

// ProviderName is the adapter's configuration name (SENDONCE_*_PROVIDER=http).
const ProviderName = "http"

// DefaultTimeout is one call's timeout when Config.Timeout is zero.
const DefaultTimeout = decide.DefaultProviderTimeout

const (
	// maxResponse bounds how much of an answer is read.
	maxResponse = 1 << 20
	// maxReason bounds a reason's length in bytes.
	maxReason = 200
)

// ErrInvalidConfig is wrapped by New's errors.
var ErrInvalidConfig = errors.New("httpprovider: invalid config")

// Config configures a Provider.
type Config struct {
	// BaseURL is the provider's base URL, http or https, without query,
	// fragment or user info; "/messages" is appended. Required.
	BaseURL string
	// Token is the bearer token. Required. It is never logged and never
	// part of an error.
	Token string
	// HTTPClient makes the calls. Nil means a client with a dedicated
	// transport (5s dial and TLS handshake timeouts, keep-alives). The
	// adapter uses a copy that never follows redirects.
	HTTPClient *http.Client
	// Timeout bounds one call (Send or Lookup), on top of ctx's deadline.
	// Zero means DefaultTimeout; negative is invalid.
	Timeout time.Duration
	// CallbackURL, if set, is sent as callback_url so the provider posts
	// delivery callbacks there. It must be an absolute http(s) URL.
	CallbackURL string
	// Logger receives one line per failed call (Warn) and per success
	// (Debug). Nil discards.
	Logger *slog.Logger
	// DisableIdempotency declares that the provider ignores the
	// Idempotency-Key header (an in-house gateway that delivers every
	// POST anew). Capabilities then reports IdempotentSends false, so an
	// ambiguous outcome is recorded UNCERTAIN and resolved by lookup
	// instead of being repeated. The header is still sent.
	DisableIdempotency bool
	// Redactor makes the tokens of the addresses in its log lines and
	// reasons; nil: redact.Default.
	Redactor *redact.Redactor
}

// Provider is the generic HTTP provider adapter. It implements
// provider.Adapter and provider.Looker and is safe for concurrent use.
type Provider struct {
	messagesURL string
	token       string
	client      *http.Client
	timeout     time.Duration
	callbackURL string
	log         *slog.Logger
	idempotent  bool
	redactor    *redact.Redactor
}

var (
	_ provider.Adapter = (*Provider)(nil)
	_ provider.Looker  = (*Provider)(nil)
)

// New validates cfg and returns a Provider. Its error wraps
// ErrInvalidConfig and names the bad field (never the token's value).
func New(cfg Config) (*Provider, error) {
	base, err := checkURL(cfg.BaseURL)
	if err != nil {
		return nil, fmt.Errorf("%w: BaseURL: %v", ErrInvalidConfig, err)
	}
	if base.RawQuery != "" || base.Fragment != "" {
		return nil, fmt.Errorf("%w: BaseURL: must have no query or fragment", ErrInvalidConfig)
	}
	if cfg.Token == "" {
		return nil, fmt.Errorf("%w: Token is required", ErrInvalidConfig)
	}
	for _, r := range cfg.Token {
		if r <= ' ' || r == 0x7f || r > unicode.MaxASCII {
			return nil, fmt.Errorf("%w: Token holds a space, control or non-ASCII character", ErrInvalidConfig)
		}
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("%w: Timeout %s is negative", ErrInvalidConfig, cfg.Timeout)
	}
	if cfg.CallbackURL != "" {
		if _, err := checkURL(cfg.CallbackURL); err != nil {
			return nil, fmt.Errorf("%w: CallbackURL: %v", ErrInvalidConfig, err)
		}
	}
	p := &Provider{
		messagesURL: strings.TrimRight(base.String(), "/") + "/messages",
		token:       cfg.Token,
		timeout:     cfg.Timeout,
		callbackURL: cfg.CallbackURL,
		log:         cfg.Logger,
		idempotent:  !cfg.DisableIdempotency,
		redactor:    cfg.Redactor,
	}
	if p.timeout == 0 {
		p.timeout = DefaultTimeout
	}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	var c http.Client
	if cfg.HTTPClient != nil {
		c = *cfg.HTTPClient
	} else {
		c.Transport = DefaultTransport()
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	p.client = &c
	return p, nil
}

// DefaultTransport returns the transport New uses when Config.HTTPClient is
// nil: proxy from the environment, 5s dial and TLS handshake timeouts,
// keep-alives with up to 32 idle connections per host.
func DefaultTransport() *http.Transport {
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:   5 * time.Second,
		MaxIdleConns:          64,
		MaxIdleConnsPerHost:   32,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
		ForceAttemptHTTP2:     true,
	}
}

func checkURL(s string) (*url.URL, error) {
	if s == "" {
		return nil, errors.New("is required")
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, errors.New("is not a URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, errors.New("scheme must be http or https")
	}
	if u.Host == "" {
		return nil, errors.New("has no host")
	}
	if u.User != nil {
		return nil, errors.New("must not hold user info")
	}
	return u, nil
}

// Name returns "http".
func (p *Provider) Name() string { return ProviderName }

// Capabilities reports lookup by reference and, unless
// Config.DisableIdempotency is set, idempotent sends (the Idempotency-Key
// header).
func (p *Provider) Capabilities() provider.Capabilities {
	return provider.Capabilities{IdempotentSends: p.idempotent, LookupByReference: true}
}

// Send posts m to {base}/messages with m.Key as Idempotency-Key and
// reference, and m.HTML, when set, as "html". It returns the provider's message id, or a *provider.Error
// classified as the package documentation describes. A message without a
// key is refused (Config: the caller is miswired) before any call.
func (p *Provider) Send(ctx context.Context, m provider.Message) (provider.Receipt, error) {
	const op = "send"
	if m.Key == "" {
		return provider.Receipt{}, p.fail(op, m, &provider.Error{Kind: provider.Config, Reason: "message has no idempotency key"})
	}
	body, err := json.Marshal(SendRequest{
		Channel: string(m.Channel), To: m.To, Subject: m.Subject, Body: m.Body, HTML: m.HTML,
		Reference: m.Key, CallbackURL: p.callbackURL,
	})
	if err != nil {
		return provider.Receipt{}, p.fail(op, m, &provider.Error{Kind: provider.Permanent, Reason: "cannot encode request", Err: err})
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	var written atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		// Called once the request was flushed, or failed while being
		// written: either way part of it may have reached the provider.
		WroteRequest: func(httptrace.WroteRequestInfo) { written.Store(true) },
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.messagesURL, bytes.NewReader(body))
	if err != nil {
		return provider.Receipt{}, p.fail(op, m, &provider.Error{Kind: provider.Config, Reason: "cannot build request", Err: err})
	}
	// net/http treats a POST carrying Idempotency-Key as replayable and
	// silently sends it again when a reused connection breaks after the
	// request was written. That hides an ambiguous outcome, and a provider
	// that ignores the key delivers twice: never let the transport replay
	// a send (the sender decides, by the provider's capabilities).
	req.GetBody = nil
	req.Header.Set("Authorization", "Bearer "+p.token)
	req.Header.Set("Idempotency-Key", m.Key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")

	start := time.Now()
	resp, err := p.client.Do(req)
	if err != nil {
		if written.Load() {
			return provider.Receipt{}, p.fail(op, m, &provider.Error{Kind: provider.Ambiguous, Reason: "no answer after the request was written: " + netCause(err), Err: err})
		}
		return provider.Receipt{}, p.fail(op, m, &provider.Error{Kind: provider.Transient, Reason: "request not delivered: " + netCause(err), Err: err})
	}
	defer resp.Body.Close()
	data, readErr := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	code := strconv.Itoa(resp.StatusCode)

	switch resp.StatusCode {
	case http.StatusOK, http.StatusCreated, http.StatusAccepted:
		if readErr != nil {
			return provider.Receipt{}, p.fail(op, m, &provider.Error{Kind: provider.Ambiguous, Code: code, Reason: "accepted answer cut short: " + netCause(readErr), Err: readErr})
		}
		var info MessageInfo
		if err := json.Unmarshal(data, &info); err != nil || strings.TrimSpace(info.ID) == "" {
			return provider.Receipt{}, p.fail(op, m, &provider.Error{Kind: provider.Ambiguous, Code: code, Reason: "accepted answer without a message id"})
		}
		p.log.Debug("provider send accepted", "provider", ProviderName, "key", m.Key, "to", p.redact().Address(m.To),
			"message_id", info.ID, "status", resp.StatusCode, "elapsed_ms", time.Since(start).Milliseconds())
		return provider.Receipt{MessageID: info.ID}, nil
	}
	kind := statusKind(resp.StatusCode)
	if kind == provider.Transient && resp.StatusCode >= 500 && (!p.idempotent || resp.StatusCode != http.StatusServiceUnavailable) {
		// The protocol lets a provider fail after it accepted: a 5xx may
		// hide an accepted message. Only 503 says it took nothing. A
		// repeat through a provider that honours Idempotency-Key is
		// harmless, so the reconciler repeats it (with a lookup first);
		// but the message must never go to another provider of the route.
		kind = provider.Ambiguous
	}
	// A Retry-After (the simulator sends one with its 429 and 503) rides
	// in the error's chain: the pacer pauses the provider until then.
	return provider.Receipt{}, p.fail(op, m, &provider.Error{Kind: kind, Code: code, Reason: p.reason(resp.StatusCode, data, m), Err: retryafter.From(resp.Header, time.Now())})
}

// statusKind classifies a status that is not an accepted answer.
func statusKind(status int) provider.Kind {
	switch {
	case status >= 200 && status < 300:
		return provider.Ambiguous
	case status >= 300 && status < 400:
		return provider.Config
	}
	switch status {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusProxyAuthRequired:
		return provider.Config
	case http.StatusRequestTimeout, http.StatusConflict, http.StatusTooEarly, http.StatusTooManyRequests:
		return provider.Transient
	}
	switch {
	case status >= 400 && status < 500:
		return provider.Permanent
	case status >= 500 && status < 600:
		return provider.Transient
	}
	return provider.Ambiguous
}

// Lookup asks the provider for messages with reference m.Key. An empty
// list is LookupNotFound; an accepted, queued, sent or delivered message
// is LookupAccepted (preferred when several exist); a failed, undelivered
// or rejected one is LookupRejected with its reason. Errors are
// *provider.Error: Config for 401/403/407/3xx, Permanent for 400/404/413/
// 422 and other 4xx, Transient for everything else (network failures,
// timeouts, 5xx, an unreadable answer, an unknown status).
func (p *Provider) Lookup(ctx context.Context, m provider.Message) (provider.LookupResult, error) {
	const op = "lookup"
	if m.Key == "" {
		return provider.LookupResult{}, p.fail(op, m, &provider.Error{Kind: provider.Config, Reason: "message has no idempotency key"})
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.messagesURL+"?reference="+url.QueryEscape(m.Key), nil)
	if err != nil {
		return provider.LookupResult{}, p.fail(op, m, &provider.Error{Kind: provider.Config, Reason: "cannot build request", Err: err})
	}
	req.Header.Set("Authorization", "Bearer "+p.token)
	req.Header.Set("Accept", "application/json")
	resp, err := p.client.Do(req)
	if err != nil {
		return provider.LookupResult{}, p.fail(op, m, &provider.Error{Kind: provider.Transient, Reason: "no answer: " + netCause(err), Err: err})
	}
	defer resp.Body.Close()
	data, readErr := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	code := strconv.Itoa(resp.StatusCode)
	if resp.StatusCode != http.StatusOK {
		kind := statusKind(resp.StatusCode)
		if kind == provider.Ambiguous {
			kind = provider.Transient
		}
		return provider.LookupResult{}, p.fail(op, m, &provider.Error{Kind: kind, Code: code, Reason: p.reason(resp.StatusCode, data, m)})
	}
	if readErr != nil {
		return provider.LookupResult{}, p.fail(op, m, &provider.Error{Kind: provider.Transient, Code: code, Reason: "answer cut short: " + netCause(readErr), Err: readErr})
	}
	var lr LookupResponse
	if err := json.Unmarshal(data, &lr); err != nil {
		return provider.LookupResult{}, p.fail(op, m, &provider.Error{Kind: provider.Transient, Code: code, Reason: "unreadable lookup answer"})
	}
	return p.lookupResult(op, m, lr)
}

func (p *Provider) lookupResult(op string, m provider.Message, lr LookupResponse) (provider.LookupResult, error) {
	var rejected *MessageInfo
	for i := range lr.Messages {
		msg := &lr.Messages[i]
		switch {
		case msg.Status.Accepted():
			if strings.TrimSpace(msg.ID) == "" {
				return provider.LookupResult{}, p.fail(op, m, &provider.Error{Kind: provider.Transient, Code: "200", Reason: "lookup answer without a message id"})
			}
			p.log.Debug("provider lookup", "provider", ProviderName, "key", m.Key, "result", provider.LookupAccepted.String(), "message_id", msg.ID)
			return provider.LookupResult{Status: provider.LookupAccepted, MessageID: msg.ID}, nil
		case msg.Status.Failed():
			if rejected == nil {
				rejected = msg
			}
		default:
			return provider.LookupResult{}, p.fail(op, m, &provider.Error{Kind: provider.Transient, Code: "200",
				Reason: "unknown message status " + strconv.Quote(p.sanitize(string(msg.Status), m))})
		}
	}
	if rejected != nil {
		reason := p.sanitize(rejected.Reason, m)
		if reason == "" {
			reason = string(rejected.Status)
		}
		p.log.Debug("provider lookup", "provider", ProviderName, "key", m.Key, "result", provider.LookupRejected.String(), "message_id", rejected.ID)
		return provider.LookupResult{Status: provider.LookupRejected, MessageID: rejected.ID, Reason: reason}, nil
	}
	p.log.Debug("provider lookup", "provider", ProviderName, "key", m.Key, "result", provider.LookupNotFound.String())
	return provider.LookupResult{Status: provider.LookupNotFound}, nil
}

// redact returns p's Redactor, or the package default.
func (p *Provider) redact() *redact.Redactor {
	if p.redactor != nil {
		return p.redactor
	}
	return redact.Default()
}

// fail completes e, logs it and returns it.
func (p *Provider) fail(op string, m provider.Message, e *provider.Error) error {
	e.Provider, e.Op = ProviderName, op
	p.log.Warn("provider call failed", "provider", ProviderName, "op", op, "key", m.Key,
		"to", p.redact().Address(m.To), "kind", e.Kind.String(), "code", e.Code, "reason", e.Reason)
	return e
}

// reason extracts a short explanation from an error answer's body: the
// "error" (string, or object with "message"), "message" or "reason" field
// of a JSON body, else the status text.
func (p *Provider) reason(status int, body []byte, m provider.Message) string {
	var v struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Reason  string          `json:"reason"`
	}
	var s string
	if json.Unmarshal(body, &v) == nil {
		var es string
		var eo struct {
			Message string `json:"message"`
		}
		switch {
		case len(v.Error) > 0 && json.Unmarshal(v.Error, &es) == nil && es != "":
			s = es
		case len(v.Error) > 0 && json.Unmarshal(v.Error, &eo) == nil && eo.Message != "":
			s = eo.Message
		case v.Message != "":
			s = v.Message
		default:
			s = v.Reason
		}
	}
	s = p.sanitize(s, m)
	if s == "" {
		s = http.StatusText(status)
	}
	if s == "" {
		s = "status " + strconv.Itoa(status)
	}
	return s
}

// sanitize makes provider text safe to store and log: the token and the
// recipient's address are replaced, control characters become spaces, and
// the result is cut to maxReason bytes on a rune boundary.
func (p *Provider) sanitize(s string, m provider.Message) string {
	if s == "" {
		return ""
	}
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "?")
	}
	s = strings.ReplaceAll(s, p.token, "[redacted]")
	if m.To != "" {
		s = strings.ReplaceAll(s, m.To, p.redact().Address(m.To))
	}
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	s = strings.TrimSpace(s)
	if len(s) > maxReason {
		cut := maxReason
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "..."
	}
	return s
}

// netCause names a transport failure without the URL: "timeout",
// "connection reset", "connection refused", "connection closed", "dns",
// "tls", "canceled", or "network error".
func netCause(err error) string {
	var dnsErr *net.DNSError
	var opErr *net.OpError
	msg := err.Error()
	switch {
	case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.As(err, &dnsErr):
		return "dns lookup failed"
	case strings.Contains(msg, "connection reset"):
		return "connection reset"
	case strings.Contains(msg, "connection refused"):
		return "connection refused"
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || strings.Contains(msg, "server closed"):
		return "connection closed"
	case strings.Contains(msg, "tls:") || strings.Contains(msg, "x509:") || strings.Contains(msg, "certificate"):
		return "tls handshake failed"
	case errors.As(err, &opErr):
		return "network error (" + opErr.Op + ")"
	}
	return "network error"
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}
