// Package smtpprovider is sendonce's adapter for email through any SMTP
// relay: Amazon SES's SMTP interface, SendGrid, Postmark, your own. Its
// configuration name, stored in every row it sends, is "smtp".
//
// Every message carries a deterministic Message-ID, <KEY@domain>, and the
// header "X-Sendonce-Key: KEY", so that a repeat is recognisable
// downstream; SMTP itself takes no client key, so the adapter declares
// neither idempotent sends nor lookup. SMTP makes the point of acceptance
// exact, the server's reply to the end of DATA: a failure before it is
// Transient (nothing was accepted), a 5xx reply to RCPT or DATA
// Permanent, authentication, TLS and a 5xx to MAIL FROM Config, and no
// reply to the end of DATA Ambiguous (the relay may have queued the
// message).
//
// Each send opens a new connection, bounded by Timeout and the caller's
// context.
//
// The adapter reads no environment variable. The SAM application's
// functions build it from theirs (SENDONCE_SMTP_*, docs/configuration.md)
// through New, as a program of your own does with its own settings.
package smtpprovider

import (
	"crypto/tls"
	"log/slog"
	"time"

	"github.com/sendonce/sendonce/internal/provider/settings"
	"github.com/sendonce/sendonce/internal/provider/smtpprovider"
	"github.com/sendonce/sendonce/provider"
)

// TLSPolicy says whether the session is encrypted with STARTTLS.
type TLSPolicy string

// The TLS policies.
const (
	// TLSMandatory requires STARTTLS: a server that does not offer it is
	// a Config error. The default.
	TLSMandatory TLSPolicy = "mandatory"
	// TLSOpportunistic uses STARTTLS when the server offers it, plain
	// text otherwise.
	TLSOpportunistic TLSPolicy = "opportunistic"
	// TLSNone never encrypts: for a relay on the same host or in tests.
	TLSNone TLSPolicy = "none"
)

// Options configure the adapter.
type Options struct {
	// Host is the relay's host name. Required.
	Host string
	// Port is the relay's port. Zero: 587 (submission).
	Port int
	// Username and Password, when Username is set, authenticate with
	// SMTP AUTH (the best mechanism the server offers; PLAIN without
	// encryption only under TLSNone). The password is never logged and
	// never part of an error.
	Username string
	Password string
	// TLS is the STARTTLS policy. Empty: TLSMandatory.
	TLS TLSPolicy
	// TLSConfig overrides the TLS settings (a private CA, say). Nil: the
	// system's roots, verified against Host.
	TLSConfig *tls.Config
	// From is the sender address. Required.
	From string
	// MessageIDDomain is the right-hand side of the Message-IDs. Empty:
	// From's domain.
	MessageIDDomain string
	// Timeout bounds one send, from connecting to the final reply. Zero:
	// 5 s (sendonce.DefaultProviderTimeout); a negative value is refused.
	Timeout time.Duration
	// Logger receives a warning line for each failed send, with the
	// recipient as a token. Nil: none.
	Logger *slog.Logger
	// RedactionKey keys the tokens that stand for recipients' addresses
	// in the adapter's log lines and error reasons, as
	// sendonce.SenderConfig.RedactionKey does the sender's: at least 32
	// bytes, the same in every process of a deployment. Empty: the
	// process's key (random unless the Lambda wiring set the
	// deployment's).
	RedactionKey []byte
}

// New returns the SMTP adapter. It returns an error when Host or From is
// empty, From is not an email address, TLS is not one of the policies,
// Timeout is negative, or RedactionKey is shorter than 32 bytes.
func New(opts Options) (provider.Adapter, error) {
	timeout, r, err := settings.Common("smtpprovider", opts.Timeout, opts.RedactionKey)
	if err != nil {
		return nil, err
	}
	a, err := smtpprovider.New(smtpprovider.Config{
		Host: opts.Host, Port: opts.Port, Username: opts.Username, Password: opts.Password,
		TLS: smtpprovider.TLSPolicy(opts.TLS), TLSConfig: opts.TLSConfig, From: opts.From,
		MessageIDDomain: opts.MessageIDDomain, Timeout: timeout, Logger: opts.Logger, Redactor: r,
	})
	if err != nil {
		return nil, err
	}
	return a, nil
}
