// Package httpprovider is sendonce's adapter for any gateway that speaks
// its generic HTTP provider protocol (docs/http-provider.md): an
// in-house gateway, or a stand-in in front of a vendor. Its
// configuration name, stored in every row it sends, is "http".
//
// A send is POST {BaseURL}/messages with the message's key in the
// Idempotency-Key header; a lookup is GET
// {BaseURL}/messages?reference=KEY, so the adapter implements
// provider.Looker and declares LookupByReference, and IdempotentSends
// unless Options.NotIdempotent says the gateway ignores the key. Every
// outcome is classified by the protocol: 2xx with an id accepted, 4xx
// Permanent (401, 403 and 407 Config; 408, 409, 425 and 429 Transient), a
// 5xx Ambiguous (a 503 from a gateway that drops repeats Transient), no
// answer after the request was written Ambiguous, no connection
// Transient. Redirects are never followed.
//
// The bearer token never appears in an error, a reason or a log line, and
// a recipient address the gateway echoes in its reason is redacted.
//
// The adapter reads no environment variable. The SAM application's
// functions build it from theirs (SENDONCE_HTTP_PROVIDER_*,
// docs/configuration.md) through New, as a program of your own does with
// its own settings.
package httpprovider

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/sendonce/sendonce/internal/provider/httpprovider"
	"github.com/sendonce/sendonce/internal/provider/settings"
	"github.com/sendonce/sendonce/provider"
)

// Options configure the adapter.
type Options struct {
	// BaseURL is the gateway's base URL, https (or http, for a gateway
	// on a trusted network: the token travels in the clear), without
	// query, fragment or user info; "/messages" is appended. Required.
	BaseURL string
	// Token is the bearer token of every request. Required.
	Token string
	// CallbackURL, when set, is sent with every message as its
	// callback_url, where the gateway posts delivery callbacks (for
	// sendonce.Callbacks.HandleFunctionURL, which serves
	// "/callbacks/http"). Empty: none.
	CallbackURL string
	// NotIdempotent declares that the gateway ignores the Idempotency-Key
	// header and delivers every POST anew. The adapter then does not
	// declare IdempotentSends: an ambiguous attempt is recorded
	// UNCERTAIN and settled by a lookup instead of being repeated. The
	// header is still sent.
	NotIdempotent bool
	// Timeout bounds one call (a send or a lookup), on top of its
	// context's deadline. Zero: 5 s (sendonce.DefaultProviderTimeout); a
	// negative value is refused.
	Timeout time.Duration
	// Logger receives a warning line for each failed call and a debug
	// line for each accepted send, with the recipient as a token. Nil:
	// none.
	Logger *slog.Logger
	// RedactionKey keys the tokens that stand for recipients' addresses
	// in the adapter's log lines and error reasons, as
	// sendonce.SenderConfig.RedactionKey does the sender's: at least 32
	// bytes, the same in every process of a deployment. Empty: the
	// process's key (random unless the Lambda wiring set the
	// deployment's).
	RedactionKey []byte
}

// New returns the HTTP adapter, which also implements provider.Looker.
// It calls the gateway with a copy of client that never follows
// redirects (nil: a client with 5 s dial and TLS handshake timeouts and
// keep-alives). It returns an error naming the setting (never the
// token's value) when BaseURL or Token is missing or malformed, a URL is
// not absolute, Timeout is negative, or RedactionKey is shorter than 32
// bytes.
func New(client *http.Client, opts Options) (provider.Adapter, error) {
	timeout, r, err := settings.Common("httpprovider", opts.Timeout, opts.RedactionKey)
	if err != nil {
		return nil, err
	}
	a, err := httpprovider.New(httpprovider.Config{
		BaseURL: opts.BaseURL, Token: opts.Token, HTTPClient: client, Timeout: timeout,
		CallbackURL: opts.CallbackURL, Logger: opts.Logger, DisableIdempotency: opts.NotIdempotent, Redactor: r,
	})
	if err != nil {
		return nil, err
	}
	return a, nil
}
