package webhook

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sendonce/sendonce/internal/provider/httpprovider"
	"github.com/sendonce/sendonce/internal/sendkey"
)

// Provider names a callback source; it is the last path segment of its
// route (/callbacks/{provider}) and part of its dedup record's key.
type Provider string

// The providers the webhook serves.
const (
	// ProviderHTTP is the generic HTTP provider (docs/http-provider.md).
	ProviderHTTP Provider = "http"
	// ProviderTwilio is Twilio's message status callback.
	ProviderTwilio Provider = "twilio"
)

// Callback is one verified delivery callback, provider-neutral.
type Callback struct {
	Provider Provider
	// EventID identifies this callback at its provider: two deliveries
	// with the same EventID are the same event. See DedupID.
	EventID string
	// Key is the ledger key the callback is about (our idempotency key,
	// carried by the provider as its reference).
	Key    string
	Status Status
	// At is when the provider saw the status (the time of receipt when
	// the provider does not say).
	At                time.Time
	ProviderMessageID string
	// ErrorCode is the provider's error code for a failure, if any.
	ErrorCode string
}

// Errors of parsing and verification, to be matched with errors.Is. The
// handler maps them to HTTP statuses.
var (
	// ErrMalformed: the body or a field of it is not what the provider's
	// protocol allows (400).
	ErrMalformed = errors.New("webhook: malformed callback")
	// ErrUnauthorized: the signature is missing, wrong or stale (401).
	ErrUnauthorized = errors.New("webhook: bad signature")
	// ErrIgnoredStatus: a well-formed callback whose status has no meaning
	// for the ledger (e.g. Twilio's "receiving"); answered 200 and dropped.
	ErrIgnoredStatus = errors.New("webhook: status not tracked")
)

// Field limits. Event ids and message ids are short in every provider we
// know; the limits keep hostile input from reaching storage.
const (
	maxEventIDLen   = 256
	maxMessageIDLen = 256
	maxErrorCodeLen = 64
	// maxShownLen bounds how much of a bad value an error message quotes.
	maxShownLen = 32
)

// httpStatuses are the statuses a generic provider callback may carry:
// the four of docs/http-provider.md, the protocol's others (package httpprovider),
// and bounced for email gateways.
var httpStatuses = map[httpprovider.MessageStatus]Status{
	httpprovider.StatusAccepted:    StatusAccepted,
	httpprovider.StatusQueued:      StatusQueued,
	httpprovider.StatusSent:        StatusSent,
	httpprovider.StatusDelivered:   StatusDelivered,
	httpprovider.StatusUndelivered: StatusUndelivered,
	httpprovider.StatusFailed:      StatusFailed,
	httpprovider.StatusRejected:    StatusRejected,
	"bounced":                      StatusBounced,
}

// ParseHTTPCallback parses the body of a generic provider callback
// (docs/http-provider.md). It checks shape only; the caller verifies the signature
// over the same bytes first.
//
// Required: event_id (1..256 characters), reference (a valid key), status
// (one of the protocol's statuses). Optional: message_id, timestamp (RFC
// 3339; when absent, At is zero and the caller uses the time of receipt).
// Unknown fields are ignored. Every error matches ErrMalformed and names the
// field, never echoing more than a short prefix of the bad value.
func ParseHTTPCallback(body []byte) (Callback, error) {
	var w httpprovider.Callback
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&w); err != nil {
		return Callback{}, fmt.Errorf("%w: body is not a JSON callback object", ErrMalformed)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		// Not More(): it treats a stray ']' or '}' as the end of input.
		return Callback{}, fmt.Errorf("%w: trailing data after the JSON object", ErrMalformed)
	}
	if err := checkID("event_id", w.EventID, maxEventIDLen, true); err != nil {
		return Callback{}, err
	}
	if err := checkID("message_id", w.MessageID, maxMessageIDLen, false); err != nil {
		return Callback{}, err
	}
	if !sendkey.Valid(w.Reference) {
		return Callback{}, fmt.Errorf("%w: reference is not a sendonce key", ErrMalformed)
	}
	st, ok := httpStatuses[w.Status]
	if !ok {
		return Callback{}, fmt.Errorf("%w: unknown status %q", ErrMalformed, shown(string(w.Status)))
	}
	cb := Callback{
		Provider:          ProviderHTTP,
		EventID:           w.EventID,
		Key:               w.Reference,
		Status:            st,
		ProviderMessageID: w.MessageID,
	}
	if w.Timestamp != "" {
		at, err := time.Parse(time.RFC3339Nano, w.Timestamp)
		if err != nil {
			return Callback{}, fmt.Errorf("%w: timestamp is not RFC 3339", ErrMalformed)
		}
		cb.At = at.UTC()
	}
	return cb, nil
}

// checkID validates an identifier field: valid UTF-8, no control
// characters, at most max bytes, and present when required.
func checkID(field, s string, max int, required bool) error {
	switch {
	case s == "" && required:
		return fmt.Errorf("%w: %s is required", ErrMalformed, field)
	case len(s) > max:
		return fmt.Errorf("%w: %s is longer than %d bytes", ErrMalformed, field, max)
	case !utf8.ValidString(s):
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrMalformed, field)
	case strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return fmt.Errorf("%w: %s contains control characters", ErrMalformed, field)
	}
	return nil
}

// shown returns a prefix of s safe to quote in an error.
func shown(s string) string {
	if len(s) > maxShownLen {
		s = s[:maxShownLen]
	}
	return strings.ToValidUTF8(s, "?")
}

// DedupID returns the partition key of cb's dedup record:
// "cb#<provider>#<event id>", with the event id hashed (SHA-256, hex,
// prefixed "h_") unless it is short and made of [A-Za-z0-9._:-] only, so
// that no provider input can form a key of another record type.
func (cb Callback) DedupID() string {
	return "cb#" + string(cb.Provider) + "#" + eventPart(cb.EventID)
}

func eventPart(id string) string {
	plain := len(id) > 0 && len(id) <= 128 && !strings.ContainsFunc(id, func(r rune) bool {
		return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '.' || r == '_' || r == ':' || r == '-')
	})
	if plain {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return "h_" + hex.EncodeToString(sum[:])
}
