// Package twilio sends SMS through Twilio's Messages API (or any service
// that speaks it) and asks it, during reconciliation, whether a message
// went out.
//
// Send is one form-encoded POST {base}/2010-04-01/Accounts/{AccountSid}/
// Messages.json with basic auth. Twilio takes no idempotency key, so a
// timeout or a 5xx after the request was written is Ambiguous. The status
// callback URL carries the message's key, so delivery callbacks map back to
// the ledger row by primary key.
//
// Lookup lists the messages sent to the recipient since the claim's day
// and finds those that match by body (and sender) within the attempt's
// window: Twilio has no client reference to search by, so a match is this
// key's message only with evidence (a status callback's SID), else the
// answer is "unproven" (provider.Attribute).
package twilio

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sendonce/sendonce/internal/decide"
	"github.com/sendonce/sendonce/internal/redact"
	"github.com/sendonce/sendonce/internal/retryafter"
	"github.com/sendonce/sendonce/provider"
)

// Name is the adapter's configuration name.
const Name = "twilio"

// DefaultBaseURL is Twilio's API.
const DefaultBaseURL = "https://api.twilio.com"

// clockSkew is how much earlier than the attempt a message may carry a
// date_created and still be ours (clocks differ).
const clockSkew = time.Minute

// maxLookupPages bounds the pages one Lookup reads.
const maxLookupPages = 20

// Config configures a Provider.
type Config struct {
	// BaseURL is the API's base; empty means DefaultBaseURL.
	BaseURL    string
	AccountSID string
	AuthToken  string
	// From is the sender number (or alphanumeric id); either it or
	// MessagingServiceSID is required.
	From                string
	MessagingServiceSID string
	// CallbackBaseURL, when set, makes every message carry
	// StatusCallback = {CallbackBaseURL}/callbacks/twilio?key={key}.
	CallbackBaseURL string
	// Timeout bounds one API call; zero means 5s.
	Timeout time.Duration
	// HTTPClient is used for the calls; nil means a new client.
	HTTPClient *http.Client
	// Logger receives one line per failure (addresses redacted); nil
	// discards.
	Logger *slog.Logger
	// Redactor makes the tokens of the addresses in its log lines and
	// reasons; nil: redact.Default.
	Redactor *redact.Redactor
}

// Provider is the Twilio adapter. It implements provider.Adapter and
// provider.Looker.
type Provider struct {
	cfg  Config
	base string
	http *http.Client
	log  *slog.Logger
}

// New returns a Twilio adapter. It returns an error naming the missing
// setting when AccountSID, AuthToken, or both From and
// MessagingServiceSID are empty, or when a URL is not absolute.
func New(cfg Config) (*Provider, error) {
	switch {
	case cfg.AccountSID == "":
		return nil, errors.New("twilio: new: no account SID")
	case cfg.AuthToken == "":
		return nil, errors.New("twilio: new: no auth token")
	case cfg.From == "" && cfg.MessagingServiceSID == "":
		return nil, errors.New("twilio: new: neither From nor MessagingServiceSid is set")
	}
	base := cfg.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	if u, err := url.Parse(base); err != nil || u.Scheme == "" || u.Host == "" {
		return nil, errors.New("twilio: new: base URL is not an absolute URL")
	}
	if cfg.CallbackBaseURL != "" {
		if u, err := url.Parse(cfg.CallbackBaseURL); err != nil || u.Scheme == "" || u.Host == "" {
			return nil, errors.New("twilio: new: callback base URL is not an absolute URL")
		}
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = decide.DefaultProviderTimeout
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Provider{cfg: cfg, base: strings.TrimRight(base, "/"), http: hc, log: log}, nil
}

// Name returns "twilio".
func (p *Provider) Name() string { return Name }

// Capabilities: no idempotent sends; lookup (by recipient, body and time,
// proven by a status callback's SID: Lookup).
func (p *Provider) Capabilities() provider.Capabilities {
	return provider.Capabilities{IdempotentSends: false, LookupByReference: true}
}

func (p *Provider) messagesURL() string {
	return p.base + "/2010-04-01/Accounts/" + url.PathEscape(p.cfg.AccountSID) + "/Messages.json"
}

// CallbackURL returns the status callback URL for key, or "" when no
// callback base is configured.
func (p *Provider) CallbackURL(key string) string {
	if p.cfg.CallbackBaseURL == "" {
		return ""
	}
	return strings.TrimRight(p.cfg.CallbackBaseURL, "/") + "/callbacks/twilio?key=" + url.QueryEscape(key)
}

// message is the part of Twilio's Message resource the adapter reads.
type message struct {
	SID                 string `json:"sid"`
	To                  string `json:"to"`
	From                string `json:"from"`
	MessagingServiceSID string `json:"messaging_service_sid"`
	Body                string `json:"body"`
	Status              string `json:"status"`
	ErrorCode           *int   `json:"error_code"`
	DateCreated         string `json:"date_created"`
}

// apiError is Twilio's error body.
type apiError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Status  int    `json:"status"`
}

// Send creates the message. It returns Twilio's message SID, or a
// *provider.Error: see Classify for HTTP answers; a failure to connect is
// Transient, a timeout or dropped connection after the request was
// written is Ambiguous.
func (p *Provider) Send(ctx context.Context, m provider.Message) (provider.Receipt, error) {
	if m.Channel != "" && m.Channel != "sms" {
		return provider.Receipt{}, p.fail(ctx, m, "send", &provider.Error{Kind: provider.Permanent, Provider: Name, Op: "send",
			Reason: fmt.Sprintf("channel %q is not served by twilio", m.Channel)})
	}
	form := url.Values{"To": {m.To}, "Body": {m.Body}}
	if p.cfg.MessagingServiceSID != "" {
		form.Set("MessagingServiceSid", p.cfg.MessagingServiceSID)
	} else {
		form.Set("From", p.cfg.From)
	}
	if cb := p.CallbackURL(m.Key); cb != "" {
		form.Set("StatusCallback", cb)
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.messagesURL(), strings.NewReader(form.Encode()))
	if err != nil {
		return provider.Receipt{}, p.fail(ctx, m, "send", &provider.Error{Kind: provider.Config, Provider: Name, Op: "send", Reason: "cannot build request: bad base URL"})
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	req.SetBasicAuth(p.cfg.AccountSID, p.cfg.AuthToken)
	resp, err := p.http.Do(req)
	if err != nil {
		return provider.Receipt{}, p.fail(ctx, m, "send", transportError(p.redact(), "send", err, m.To))
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		// The status line came back but the body broke off.
		if resp.StatusCode/100 == 2 {
			return provider.Receipt{}, p.fail(ctx, m, "send", &provider.Error{Kind: provider.Ambiguous, Provider: Name, Op: "send",
				Code: strconv.Itoa(resp.StatusCode), Reason: "accepted, but the answer broke off: no message SID", Err: p.redact().Error(err, m.To)})
		}
		raw = nil
	}
	if resp.StatusCode/100 != 2 {
		pe := classify(p.redact(), resp.StatusCode, raw, m.To)
		// A Retry-After rides in the error's chain: the pacer pauses
		// Twilio until then.
		pe.Err = retryafter.From(resp.Header, time.Now())
		return provider.Receipt{}, p.fail(ctx, m, "send", pe)
	}
	var msg message
	if err := json.Unmarshal(raw, &msg); err != nil || msg.SID == "" {
		return provider.Receipt{}, p.fail(ctx, m, "send", &provider.Error{Kind: provider.Ambiguous, Provider: Name, Op: "send",
			Code: strconv.Itoa(resp.StatusCode), Reason: "accepted, but the answer holds no message SID"})
	}
	return provider.Receipt{MessageID: msg.SID}, nil
}

// redact returns p's Redactor, or the package default.
func (p *Provider) redact() *redact.Redactor {
	if p.cfg.Redactor != nil {
		return p.cfg.Redactor
	}
	return redact.Default()
}

func (p *Provider) fail(ctx context.Context, m provider.Message, op string, pe *provider.Error) *provider.Error {
	p.log.WarnContext(ctx, "twilio "+op+" failed",
		"provider", Name, "key", m.Key, "to", p.redact().Address(m.To),
		"kind", pe.Kind.String(), "code", pe.Code, "reason", pe.Reason)
	return pe
}

// codeKinds classifies Twilio's documented error codes
// (https://www.twilio.com/docs/api/errors).
var codeKinds = map[int]struct {
	kind   provider.Kind
	reason string
}{
	21211: {provider.Permanent, "invalid 'To' phone number"},
	21214: {provider.Permanent, "'To' number cannot be reached"},
	21408: {provider.Config, "account has no permission to send to this region (geo permissions)"},
	21602: {provider.Permanent, "message body is required"},
	21604: {provider.Permanent, "'To' number is required"},
	21610: {provider.Permanent, "recipient unsubscribed (opted out)"},
	21612: {provider.Permanent, "cannot route this 'To'/'From' combination"},
	21614: {provider.Permanent, "'To' number is not a mobile number"},
	21617: {provider.Permanent, "message body exceeds the concatenated length limit"},
	21635: {provider.Permanent, "'To' number cannot receive this message (landline or unreachable)"},
	21212: {provider.Config, "invalid 'From' number"},
	21603: {provider.Config, "'From' number is required"},
	21606: {provider.Config, "'From' number is not message-capable for this destination or account"},
	21608: {provider.Config, "trial account: 'To' number is not verified"},
	21659: {provider.Config, "'From' is not a Twilio number"},
	21703: {provider.Config, "messaging service has no sender"},
	20003: {provider.Config, "authentication failed"},
	20005: {provider.Config, "account is not active"},
	20008: {provider.Config, "test credentials cannot do this"},
	20404: {provider.Config, "resource not found (account SID or base URL wrong)"},
	20429: {provider.Transient, "too many requests"},
	20500: {provider.Ambiguous, "Twilio internal error: the message may have been accepted"},
	20503: {provider.Ambiguous, "Twilio unavailable: the message may have been accepted"},
	30001: {provider.Transient, "queue overflow"},
}

// Classify translates a non-2xx answer to a send into a *provider.Error.
// body is Twilio's error body (may be empty or not JSON); to is redacted
// out of any provider text kept.
//
// A known Twilio code decides (codeKinds); otherwise the HTTP status:
// 401/403 Config, 429 Transient, 5xx Ambiguous (Twilio takes no key, so
// an error answer after the request was processed cannot be excluded),
// other 4xx Permanent.
func Classify(status int, body []byte, to string) *provider.Error {
	return classify(redact.Default(), status, body, to)
}

// classify is Classify with the texts it keeps redacted by r.
func classify(r *redact.Redactor, status int, body []byte, to string) *provider.Error {
	pe := &provider.Error{Provider: Name, Op: "send", Code: strconv.Itoa(status)}
	var ae apiError
	_ = json.Unmarshal(body, &ae)
	if ae.Code != 0 {
		pe.Code = strconv.Itoa(ae.Code)
		if k, ok := codeKinds[ae.Code]; ok {
			pe.Kind, pe.Reason = k.kind, k.reason
			// 5xx from Twilio is never better than ambiguous.
			if status >= 500 && pe.Kind != provider.Ambiguous {
				pe.Kind = provider.Ambiguous
			}
			return pe
		}
	}
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		pe.Kind, pe.Reason = provider.Config, fmt.Sprintf("Twilio answered HTTP %d", status)
	case status == http.StatusTooManyRequests:
		pe.Kind, pe.Reason = provider.Transient, "too many requests"
	case status >= 500:
		pe.Kind, pe.Reason = provider.Ambiguous, fmt.Sprintf("Twilio answered HTTP %d: the message may have been accepted", status)
	case status >= 400:
		pe.Kind, pe.Reason = provider.Permanent, fmt.Sprintf("Twilio rejected the message (HTTP %d)", status)
	default:
		pe.Kind, pe.Reason = provider.Ambiguous, fmt.Sprintf("unexpected HTTP %d", status)
	}
	if msg := r.Text(ae.Message, to); msg != "" {
		pe.Reason += ": " + msg
	}
	return pe
}

// transportError classifies an error of http.Client.Do: no connection
// (dial, DNS) is Transient; anything later is Ambiguous for a send and
// Transient for a lookup (a lookup is safe to repeat).
func transportError(r *redact.Redactor, op string, err error, to string) *provider.Error {
	pe := &provider.Error{Kind: provider.Ambiguous, Provider: Name, Op: op, Err: r.Error(err, to)}
	var dns *net.DNSError
	var oe *net.OpError
	switch {
	case errors.As(err, &dns) || (errors.As(err, &oe) && oe.Op == "dial"):
		pe.Kind, pe.Reason = provider.Transient, "could not connect to Twilio: nothing was sent"
	case op != "send":
		pe.Kind, pe.Reason = provider.Transient, "Twilio did not answer the lookup"
	case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		pe.Reason = "timed out waiting for Twilio: the message may have been accepted"
	default:
		pe.Reason = "connection to Twilio failed mid-request: the message may have been accepted"
	}
	return pe
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// listPage is a page of the message list.
type listPage struct {
	Messages    []message `json:"messages"`
	NextPageURI string    `json:"next_page_uri"`
}

// Lookup asks Twilio whether it has m. Twilio takes no client reference,
// so it searches by content: it lists the messages to m.To sent since the
// UTC day of m.AttemptedAt (from our sender), and a message is a
// candidate when its body is m.Body and it was created within the
// attempt's window, no earlier than AttemptedAt and no later than
// AttemptedUntil (each widened by a minute of clock skew). A candidate
// that failed, was undelivered or was canceled is rejected, any other is
// accepted.
//
// What the search can prove (provider.Attribute): no candidate means the
// message never reached Twilio (LookupNotFound). A candidate is this
// key's message only with evidence: its SID is the one a status callback
// recorded for this key (the callback URL carries the key, and the
// webhook stores the SID in the row: m.ProviderMessageID). Without it, a
// candidate may be another message with the same text to the same
// recipient, and the answer is LookupUnproven: the class policy decides.
// Configure status callbacks (CallbackBaseURL) so that lookups can prove.
//
// Limitations: Twilio filters on date_sent, which a message gets only once
// it leaves Twilio; a message still queued is not listed (NotFound), so
// the reconciler trusts NotFound only after its settle time. A search
// that needs more than maxLookupPages pages is incomplete: an error
// (Transient), never LookupNotFound.
//
// Errors are *provider.Error: 401/403 Config, 429/5xx and network
// failures Transient, other 4xx Permanent.
func (p *Provider) Lookup(ctx context.Context, m provider.Message) (provider.LookupResult, error) {
	q := url.Values{"To": {m.To}, "PageSize": {"100"}}
	if p.cfg.MessagingServiceSID == "" {
		q.Set("From", p.cfg.From)
	}
	if !m.AttemptedAt.IsZero() {
		q.Set("DateSent>", m.AttemptedAt.UTC().Format("2006-01-02"))
	}
	next := p.messagesURL() + "?" + q.Encode()
	var candidates []provider.Candidate
	for range maxLookupPages {
		page, err := p.listPage(ctx, next, m)
		if err != nil {
			return provider.LookupResult{}, p.fail(ctx, m, "lookup", err)
		}
		for i := range page.Messages {
			msg := &page.Messages[i]
			if !p.ours(msg, m) {
				continue
			}
			c := provider.Candidate{ID: msg.SID, Status: provider.LookupAccepted}
			switch msg.Status {
			case "failed", "undelivered", "canceled":
				c.Status, c.Reason = provider.LookupRejected, "twilio status "+msg.Status
				if msg.ErrorCode != nil {
					c.Reason += fmt.Sprintf(" (error %d)", *msg.ErrorCode)
				}
			}
			candidates = append(candidates, c)
		}
		if page.NextPageURI == "" {
			return provider.Attribute(m, candidates), nil
		}
		next = p.base + page.NextPageURI
	}
	return provider.LookupResult{}, p.fail(ctx, m, "lookup", &provider.Error{Kind: provider.Transient, Provider: Name, Op: "lookup",
		Reason: fmt.Sprintf("search incomplete: more than %d pages of messages to the recipient", maxLookupPages)})
}

// ours reports whether msg matches m by content: same recipient, body and
// sender, created within the attempt's window. A match is a candidate,
// not proof (Lookup).
func (p *Provider) ours(msg *message, m provider.Message) bool {
	if msg.To != m.To || msg.Body != m.Body {
		return false
	}
	if p.cfg.MessagingServiceSID != "" {
		if msg.MessagingServiceSID != p.cfg.MessagingServiceSID {
			return false
		}
	} else if msg.From != p.cfg.From {
		return false
	}
	if m.AttemptedAt.IsZero() && m.AttemptedUntil.IsZero() {
		return true
	}
	created, err := time.Parse(time.RFC1123Z, msg.DateCreated)
	if err != nil {
		return false
	}
	if !m.AttemptedAt.IsZero() && created.Before(m.AttemptedAt.Add(-clockSkew)) {
		return false
	}
	return m.AttemptedUntil.IsZero() || !created.After(m.AttemptedUntil.Add(clockSkew))
}

func (p *Provider) listPage(ctx context.Context, u string, m provider.Message) (listPage, *provider.Error) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return listPage{}, &provider.Error{Kind: provider.Config, Provider: Name, Op: "lookup", Reason: "cannot build request: bad base URL"}
	}
	req.Header.Set("Accept", "application/json")
	req.SetBasicAuth(p.cfg.AccountSID, p.cfg.AuthToken)
	resp, err := p.http.Do(req)
	if err != nil {
		return listPage{}, transportError(p.redact(), "lookup", err, m.To)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return listPage{}, transportError(p.redact(), "lookup", err, m.To)
	}
	if resp.StatusCode != http.StatusOK {
		pe := classify(p.redact(), resp.StatusCode, raw, m.To)
		pe.Op = "lookup"
		if pe.Kind == provider.Ambiguous {
			pe.Kind = provider.Transient // a GET is safe to repeat
		}
		return listPage{}, pe
	}
	var page listPage
	if err := json.Unmarshal(raw, &page); err != nil {
		return listPage{}, &provider.Error{Kind: provider.Transient, Provider: Name, Op: "lookup", Reason: "message list is not JSON"}
	}
	return page, nil
}
