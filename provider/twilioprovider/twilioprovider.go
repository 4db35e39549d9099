// Package twilioprovider is sendonce's adapter for SMS through Twilio's
// Messages API (or any service that speaks it). Its configuration name,
// stored in every row it sends, is "twilio".
//
// A send is one POST of the message; Twilio takes no idempotency key, so
// a timeout or a 5xx after the request was written is Ambiguous, never
// Transient. The adapter also implements provider.Looker: the reconciler
// asks it about an uncertain attempt, and it lists the messages sent to
// the recipient in the attempt's window and matches them by body and
// sender. Twilio has no client reference to search by, so a match is
// proven only by the message id a status callback recorded; otherwise the
// answer is unproven, with the ids found as candidates (provider.Attribute
// and LookupResult.Candidates say what the reconciler makes of them).
//
// With CallbackBaseURL set, every message asks Twilio for status
// callbacks at CallbackBaseURL + "/callbacks/twilio?key=KEY", which
// sendonce.Callbacks.HandleFunctionURL verifies (X-Twilio-Signature) and
// applies to the message's row.
//
// The adapter reads no environment variable. The SAM application's
// functions build it from theirs (SENDONCE_TWILIO_*,
// docs/configuration.md) through New, as a program of your own does with
// its own settings.
package twilioprovider

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/sendonce/sendonce/internal/provider/settings"
	"github.com/sendonce/sendonce/internal/provider/twilio"
	"github.com/sendonce/sendonce/provider"
)

// Options configure the adapter.
type Options struct {
	// AccountSID is the Twilio account ("AC…"). Required.
	AccountSID string
	// AuthToken is the account's auth token. Required. It is never
	// logged and never part of an error.
	AuthToken string
	// From is the number (or alphanumeric sender id) messages are sent
	// from. Either it or MessagingServiceSID is required; with both,
	// MessagingServiceSID is used.
	From string
	// MessagingServiceSID is the Messaging Service ("MG…") messages are
	// sent through, which picks the sender.
	MessagingServiceSID string
	// CallbackBaseURL is the public base URL of the callback route: when
	// set, every message asks for status callbacks at CallbackBaseURL +
	// "/callbacks/twilio?key=KEY". Empty: no callbacks.
	CallbackBaseURL string
	// BaseURL is the API's base URL. Empty: https://api.twilio.com.
	BaseURL string
	// Timeout bounds one API call (a send, or one page of a lookup).
	// Zero: 5 s (sendonce.DefaultProviderTimeout); a negative value is
	// refused.
	Timeout time.Duration
	// Logger receives a warning line for each failed call, with the
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

// New returns the Twilio adapter, which also implements provider.Looker.
// It calls the API with client (nil: a new http.Client; each call is
// bounded by Timeout and its context). It returns an error naming the
// setting when AccountSID or AuthToken is empty, both From and
// MessagingServiceSID are, a URL is not absolute, Timeout is negative,
// or RedactionKey is shorter than 32 bytes.
func New(client *http.Client, opts Options) (provider.Adapter, error) {
	timeout, r, err := settings.Common("twilioprovider", opts.Timeout, opts.RedactionKey)
	if err != nil {
		return nil, err
	}
	a, err := twilio.New(twilio.Config{
		BaseURL: opts.BaseURL, AccountSID: opts.AccountSID, AuthToken: opts.AuthToken,
		From: opts.From, MessagingServiceSID: opts.MessagingServiceSID, CallbackBaseURL: opts.CallbackBaseURL,
		Timeout: timeout, HTTPClient: client, Logger: opts.Logger, Redactor: r,
	})
	if err != nil {
		return nil, err
	}
	return a, nil
}
