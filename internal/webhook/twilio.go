package webhook

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"fmt"
	"maps"
	"net"
	"net/url"
	"slices"
	"strings"

	"github.com/sendonce/sendonce/internal/sendkey"
)

// Twilio header names (Function URLs deliver header names in lower case;
// lookups are case-insensitive).
const (
	// TwilioSignatureHeader carries base64(HMAC-SHA1(auth token, URL +
	// sorted POST parameters)).
	TwilioSignatureHeader = "X-Twilio-Signature"
	// TwilioIdempotencyHeader carries Twilio's id of one webhook event,
	// the same on every retry of it.
	TwilioIdempotencyHeader = "I-Twilio-Idempotency-Token"
	// KeyParam is the query parameter of the StatusCallback URL that
	// carries our ledger key (set by the Twilio adapter).
	KeyParam = "key"
)

// twilioStatuses maps Twilio's MessageStatus values onto ledger statuses.
// Statuses of inbound messages (receiving, received) and of partial
// deliveries are not tracked: ParseTwilioCallback returns
// ErrIgnoredStatus for them.
var twilioStatuses = map[string]Status{
	"accepted":    StatusAccepted,
	"scheduled":   StatusQueued,
	"queued":      StatusQueued,
	"sending":     StatusSending,
	"sent":        StatusSent,
	"delivered":   StatusDelivered,
	"read":        StatusRead,
	"undelivered": StatusUndelivered,
	"failed":      StatusFailed,
	"canceled":    StatusCanceled,
}

// TwilioSignature returns the X-Twilio-Signature Twilio computes for a
// form-encoded POST of params to rawURL: base64 of HMAC-SHA1 under
// authToken of rawURL followed by every parameter's name and value, sorted
// by name (and, for a repeated name, by value), without separators.
func TwilioSignature(authToken, rawURL string, params url.Values) string {
	m := hmac.New(sha1.New, []byte(authToken))
	m.Write([]byte(rawURL))
	for _, name := range slices.Sorted(maps.Keys(params)) {
		vals := slices.Clone(params[name])
		slices.Sort(vals)
		for _, v := range vals {
			m.Write([]byte(name))
			m.Write([]byte(v))
		}
	}
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// VerifyTwilio checks signature, an X-Twilio-Signature value, against a
// POST of params to rawURL under authToken. Like Twilio's own libraries, it
// accepts the signature computed over rawURL with or without an explicit
// default port (:443 for https, :80 for http), since a proxy may add or
// drop it. The comparison is constant-time.
//
// It returns nil on a match; otherwise an error matching ErrUnauthorized:
// when signature or authToken is empty, when rawURL does not parse, or
// when no variant matches.
func VerifyTwilio(authToken, rawURL string, params url.Values, signature string) error {
	if signature == "" {
		return fmt.Errorf("%w: no %s header", ErrUnauthorized, TwilioSignatureHeader)
	}
	if authToken == "" {
		return fmt.Errorf("%w: no Twilio auth token configured", ErrUnauthorized)
	}
	got, err := base64.StdEncoding.Strict().DecodeString(signature)
	// The decoder skips line breaks even when strict: only the canonical
	// encoding of an HMAC-SHA1 is a signature.
	if err != nil || len(got) != sha1.Size || base64.StdEncoding.EncodeToString(got) != signature {
		return fmt.Errorf("%w: signature is not a base64 HMAC-SHA1", ErrUnauthorized)
	}
	variants, err := portVariants(rawURL)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnauthorized, err)
	}
	match := false
	for _, u := range variants {
		want, _ := base64.StdEncoding.DecodeString(TwilioSignature(authToken, u, params))
		if hmac.Equal(got, want) {
			match = true
		}
	}
	if !match {
		return fmt.Errorf("%w: Twilio signature does not match", ErrUnauthorized)
	}
	return nil
}

// portVariants returns rawURL as given and with its default port added
// (when it has none) or removed (when it has the scheme's default).
func portVariants(rawURL string) ([]string, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("callback URL %q does not parse", shown(rawURL))
	}
	def := map[string]string{"https": "443", "http": "80"}[strings.ToLower(u.Scheme)]
	if def == "" {
		return []string{rawURL}, nil
	}
	other := *u
	switch u.Port() {
	case "":
		other.Host = net.JoinHostPort(u.Hostname(), def)
	case def:
		other.Host = u.Hostname()
		if strings.Contains(other.Host, ":") { // IPv6 literal
			other.Host = "[" + other.Host + "]"
		}
	default:
		return []string{rawURL}, nil
	}
	return []string{rawURL, other.String()}, nil
}

// ParseTwilioCallback reads a verified Twilio message status callback: the
// form parameters of its body, the query of the URL it was posted to (our
// key is its "key" parameter) and its I-Twilio-Idempotency-Token header
// (may be empty).
//
// Required: MessageSid, MessageStatus, and key (a valid sendonce key).
// The event id is the idempotency token when present, else MessageSid and
// MessageStatus. Errors: ErrMalformed for a missing or invalid field;
// ErrIgnoredStatus for a status the ledger does not track. The To and From
// parameters (raw phone numbers) are never read.
func ParseTwilioCallback(query, form url.Values, idempotencyToken string) (Callback, error) {
	key := query.Get(KeyParam)
	if !sendkey.Valid(key) {
		return Callback{}, fmt.Errorf("%w: callback URL has no valid %q parameter", ErrMalformed, KeyParam)
	}
	sid := form.Get("MessageSid")
	if sid == "" {
		sid = form.Get("SmsSid") // the older name Twilio still sends alongside
	}
	if err := checkID("MessageSid", sid, maxMessageIDLen, true); err != nil {
		return Callback{}, err
	}
	raw := form.Get("MessageStatus")
	if raw == "" {
		raw = form.Get("SmsStatus")
	}
	if raw == "" {
		return Callback{}, fmt.Errorf("%w: MessageStatus is required", ErrMalformed)
	}
	if err := checkID(TwilioIdempotencyHeader, idempotencyToken, maxEventIDLen, false); err != nil {
		return Callback{}, err
	}
	code := form.Get("ErrorCode")
	if err := checkID("ErrorCode", code, maxErrorCodeLen, false); err != nil {
		return Callback{}, err
	}
	st, ok := twilioStatuses[strings.ToLower(raw)]
	if !ok {
		return Callback{}, fmt.Errorf("%w: Twilio status %q", ErrIgnoredStatus, shown(raw))
	}
	event := idempotencyToken
	if event == "" {
		event = sid + ":" + string(st)
	}
	return Callback{
		Provider:          ProviderTwilio,
		EventID:           event,
		Key:               key,
		Status:            st,
		ProviderMessageID: sid,
		ErrorCode:         code,
	}, nil
}
