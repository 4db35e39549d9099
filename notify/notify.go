// Package notify defines the notification request of docs/request.md, the
// JSON body of one SQS message, and validates it.
//
// Parse never panics and never guesses: a body that is not JSON, or misses
// or breaks a required field, yields a *InvalidError that names the field
// and says what is wrong. Such a request is a permanent failure of that one
// message; the sender moves it to the dead-letter queue with the reason.
//
// In the path of one message (docs/architecture.md) the request comes
// first: sendonce.Sender.HandleSQS hands Parse each record's body, and
// sendonce.Sender.Send validates a Request the same way. Request.Key is
// the next step: the key the sender claims in the ledger before it calls
// a provider.
package notify

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sendonce/sendonce/internal/sendkey"
)

// MaxBodySize is the largest request accepted: SQS's message size limit.
const MaxBodySize = 256 * 1024

// Channel is how a notification reaches its recipient.
type Channel string

// The channels.
const (
	ChannelSMS   Channel = "sms"
	ChannelEmail Channel = "email"
	ChannelPush  Channel = "push"
)

// Channels lists every channel, in a stable order.
var Channels = []Channel{ChannelSMS, ChannelEmail, ChannelPush}

// Valid reports whether c is a known channel.
func (c Channel) Valid() bool {
	return c == ChannelSMS || c == ChannelEmail || c == ChannelPush
}

// Class decides what an ambiguous provider outcome leads to (the
// reconciler's policy, sendonce.Policy): a lost OTP blocks a user, a
// duplicate marketing text costs money.
type Class string

// The classes.
const (
	ClassOTP           Class = "otp"
	ClassTransactional Class = "transactional"
	ClassMarketing     Class = "marketing"
)

// DefaultClass is the class of a request that names none.
const DefaultClass = ClassTransactional

// Valid reports whether c is a known class.
func (c Class) Valid() bool {
	return c == ClassOTP || c == ClassTransactional || c == ClassMarketing
}

// Recipient identifies who receives the notification. ID is stable and is
// part of the key; the addresses are where to send and are never logged raw.
type Recipient struct {
	ID         string `json:"id"`
	Phone      string `json:"phone,omitempty"`
	Email      string `json:"email,omitempty"`
	PushTarget string `json:"push_target,omitempty"`
}

// Request is one notification request (docs/request.md).
type Request struct {
	TenantID  string    `json:"tenant_id"`
	EventID   string    `json:"event_id"`
	Channel   Channel   `json:"channel"`
	Template  string    `json:"template"`
	Recipient Recipient `json:"recipient"`
	Class     Class     `json:"class,omitempty"`
	Locale    string    `json:"locale,omitempty"`
	// ExpiresAt is the message's validity, RFC 3339 with a time zone
	// ("2026-12-01T12:05:00Z"; format it with time.RFC3339): past it the
	// message is never sent, by anyone. Empty: the class's default
	// validity, if the deployment sets one. It is not part of the key.
	// Expiry parses it.
	ExpiresAt string         `json:"expires_at,omitempty"`
	Data      map[string]any `json:"data,omitempty"`
	// Content is pre-rendered content, sent instead of a stored template;
	// nil when the stored template named by Template renders the message.
	Content *Content `json:"content,omitempty"`
}

// Content is a request's pre-rendered message, delivered exactly as
// given. The request's Template still names the message's purpose and is
// part of its key.
type Content struct {
	// Subject is the email subject (required for email) or the push title
	// (optional); not allowed for sms. One line.
	Subject string `json:"subject,omitempty"`
	// Text is the SMS text, the push body or the email's text/plain part.
	// Required.
	Text string `json:"text"`
	// HTML is the email's optional text/html part; email only.
	HTML string `json:"html,omitempty"`
}

// Limits of pre-rendered content, in characters (Unicode code points, as
// JSON Schema's maxLength counts them).
const (
	MaxContentSubject = 256
	MaxContentText    = 64 * 1024
	MaxContentHTML    = 128 * 1024
)

// Key returns the request's idempotency key (docs/request.md, "The key").
func (r *Request) Key() string {
	return sendkey.Derive(sendkey.Parts{
		Tenant:      r.TenantID,
		EventID:     r.EventID,
		RecipientID: r.Recipient.ID,
		Channel:     string(r.Channel),
		Template:    r.Template,
	})
}

// Address returns the address the request's channel sends to: the phone
// number, the email address or the push target.
func (r *Request) Address() string {
	switch r.Channel {
	case ChannelSMS:
		return r.Recipient.Phone
	case ChannelEmail:
		return r.Recipient.Email
	case ChannelPush:
		return r.Recipient.PushTarget
	}
	return ""
}

// Expiry returns the request's expires_at as a time, zero when it has
// none (or, on a request that did not pass Validate, an unparsable one).
func (r *Request) Expiry() time.Time {
	t, _ := parseExpiry(r.ExpiresAt)
	return t
}

// expiryRE is the RFC 3339 date-time the contract accepts, and the
// schema's pattern: upper-case T and Z, seconds 00 to 59 (Go's time
// package has no leap second), at most nine fractional digits, an offset
// within ±23:59.
var expiryRE = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,9})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$`)

// parseExpiry parses an expires_at value; the zero time for "".
func parseExpiry(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if !expiryRE.MatchString(s) {
		return time.Time{}, errors.New("not an RFC 3339 date-time")
	}
	return time.Parse(time.RFC3339Nano, s)
}

// InvalidError says why a request was rejected. Field is the JSON path of
// the offending field ("recipient.phone"), empty when the body as a whole is
// at fault (not JSON, too large).
type InvalidError struct {
	Field  string
	Reason string
}

// Error returns "invalid request: field: reason" (the field when known).
func (e *InvalidError) Error() string {
	if e.Field == "" {
		return "invalid request: " + e.Reason
	}
	return "invalid request: " + e.Field + ": " + e.Reason
}

// ErrInvalid matches every *InvalidError with errors.Is.
var ErrInvalid = errors.New("invalid request")

// Is makes errors.Is(err, ErrInvalid) true for an *InvalidError.
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

var (
	tenantRE   = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)
	templateRE = regexp.MustCompile(`^[a-z0-9_.-]{1,64}$`)
	e164RE     = regexp.MustCompile(`^\+[1-9][0-9]{6,14}$`)
	localeRE   = regexp.MustCompile(`^[A-Za-z]{2,3}([_-][A-Za-z0-9]{2,8})*$`)
)

// Parse decodes and validates a request body. Unknown fields are ignored.
// The error, if any, is an *InvalidError.
func Parse(body []byte) (Request, error) {
	var r Request
	if len(body) > MaxBodySize {
		return r, &InvalidError{Reason: fmt.Sprintf("body is %d bytes, more than the %d allowed", len(body), MaxBodySize)}
	}
	if !utf8.Valid(body) {
		return r, &InvalidError{Reason: "body is not valid UTF-8"}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	err := dec.Decode(&r)
	var te *json.UnmarshalTypeError
	if err != nil && !errors.As(err, &te) {
		return Request{}, &InvalidError{Field: jsonField(err), Reason: jsonReason(err)}
	}
	// A type error leaves the decoder past the whole value, so what follows
	// it can still be checked.
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		// Not More(): it treats a stray ']' or '}' as the end of input.
		return Request{}, &InvalidError{Reason: "body holds more than one JSON value"}
	}
	if foldedKeys(body) {
		// encoding/json matches names case-insensitively ("Tenant_ID"
		// would fill TenantID, and "DATA":1 is a type error of Data); the
		// contract's names are exact and any other key is unknown, so
		// decode again without the look-alikes and judge that decode.
		r = Request{}
		err = decodeExact(body, &r)
	}
	if err != nil {
		return Request{}, &InvalidError{Field: jsonField(err), Reason: jsonReason(err)}
	}
	if err := r.Validate(); err != nil {
		return Request{}, err
	}
	return r, nil
}

// Validate checks every field of r against the contract and fills in the
// default class. The error, if any, is an *InvalidError.
func (r *Request) Validate() error {
	switch {
	case r.TenantID == "":
		return &InvalidError{"tenant_id", "is required"}
	case !tenantRE.MatchString(r.TenantID):
		return &InvalidError{"tenant_id", "must be 1 to 64 of A-Z a-z 0-9 . _ -"}
	case r.EventID == "":
		return &InvalidError{"event_id", "is required"}
	case utf8.RuneCountInString(r.EventID) > 256:
		return &InvalidError{"event_id", "must be at most 256 characters"}
	case r.Channel == "":
		return &InvalidError{"channel", "is required"}
	case !r.Channel.Valid():
		return &InvalidError{"channel", fmt.Sprintf("%q is not one of sms, email, push", truncate(string(r.Channel)))}
	case r.Template == "":
		return &InvalidError{"template", "is required"}
	case !templateRE.MatchString(r.Template):
		return &InvalidError{"template", "must be 1 to 64 of a-z 0-9 _ . -"}
	case r.Recipient.ID == "":
		return &InvalidError{"recipient.id", "is required"}
	case utf8.RuneCountInString(r.Recipient.ID) > 256:
		return &InvalidError{"recipient.id", "must be at most 256 characters"}
	}
	if r.Class == "" {
		r.Class = DefaultClass
	} else if !r.Class.Valid() {
		return &InvalidError{"class", fmt.Sprintf("%q is not one of otp, transactional, marketing", truncate(string(r.Class)))}
	}
	if r.Locale != "" && !localeRE.MatchString(r.Locale) {
		return &InvalidError{"locale", "is not a language tag such as en or pt-BR"}
	}
	if r.ExpiresAt != "" {
		if _, err := parseExpiry(r.ExpiresAt); err != nil {
			return &InvalidError{"expires_at", "is not an RFC 3339 time with a time zone, such as 2026-12-01T12:05:00Z"}
		}
	}
	if err := r.validateContent(); err != nil {
		return err
	}
	switch r.Channel {
	case ChannelSMS:
		if r.Recipient.Phone == "" {
			return &InvalidError{"recipient.phone", "is required for sms"}
		}
		if !e164RE.MatchString(r.Recipient.Phone) {
			return &InvalidError{"recipient.phone", "is not an E.164 number (+ and 7 to 15 digits)"}
		}
	case ChannelEmail:
		if r.Recipient.Email == "" {
			return &InvalidError{"recipient.email", "is required for email"}
		}
		if !validEmail(r.Recipient.Email) {
			return &InvalidError{"recipient.email", "is not an email address"}
		}
	case ChannelPush:
		if r.Recipient.PushTarget == "" {
			return &InvalidError{"recipient.push_target", "is required for push"}
		}
		if !strings.HasPrefix(r.Recipient.PushTarget, "arn:") {
			return &InvalidError{"recipient.push_target", "is not an SNS platform-endpoint ARN"}
		}
	}
	return nil
}

// validateContent checks the pre-rendered content, if any, against the
// request's channel.
func (r *Request) validateContent() error {
	c := r.Content
	if c == nil {
		return nil
	}
	switch {
	case c.Text == "":
		return &InvalidError{"content.text", "is required"}
	case utf8.RuneCountInString(c.Text) > MaxContentText:
		return &InvalidError{"content.text", fmt.Sprintf("must be at most %d characters", MaxContentText)}
	case utf8.RuneCountInString(c.Subject) > MaxContentSubject:
		return &InvalidError{"content.subject", fmt.Sprintf("must be at most %d characters", MaxContentSubject)}
	case strings.ContainsAny(c.Subject, "\r\n"):
		return &InvalidError{"content.subject", "must be one line"}
	case utf8.RuneCountInString(c.HTML) > MaxContentHTML:
		return &InvalidError{"content.html", fmt.Sprintf("must be at most %d characters", MaxContentHTML)}
	case r.Channel == ChannelEmail && c.Subject == "":
		return &InvalidError{"content.subject", "is required for email"}
	case r.Channel == ChannelSMS && c.Subject != "":
		return &InvalidError{"content.subject", "is not allowed for sms"}
	case r.Channel != ChannelEmail && c.HTML != "":
		return &InvalidError{"content.html", "is allowed for email only"}
	}
	return nil
}

// validEmail accepts what an SMTP relay accepts in practice: one @, a
// non-empty local part, a dotted domain, no spaces or angle brackets (which
// would let an address inject headers).
func validEmail(s string) bool {
	if len(s) > 254 || strings.ContainsAny(s, " \t\r\n<>,;\"()[]\\") {
		return false
	}
	at := strings.LastIndexByte(s, '@')
	if at < 1 || at == len(s)-1 || strings.Count(s, "@") != 1 {
		return false
	}
	domain := s[at+1:]
	return strings.Contains(domain, ".") && !strings.HasPrefix(domain, ".") && !strings.HasSuffix(domain, ".") && !strings.Contains(domain, "..")
}

// fields are the exact JSON names of Request and of its nested objects.
var fields = map[string][]string{
	"":          {"tenant_id", "event_id", "channel", "template", "recipient", "class", "locale", "expires_at", "data", "content"},
	"recipient": {"id", "phone", "email", "push_target"},
	"content":   {"subject", "text", "html"},
}

// foldedKeys reports whether body may hold a key that encoding/json would
// match to a field case-insensitively without being its exact name. Such
// a key needs an upper-case ASCII letter or a non-ASCII byte ("ſ" and the
// Kelvin sign fold to s and k), so bodies without them skip the check.
func foldedKeys(body []byte) bool {
	if !bytes.ContainsFunc(body, func(r rune) bool { return (r >= 'A' && r <= 'Z') || r >= utf8.RuneSelf }) {
		return false
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil {
		return false
	}
	if hasFolded(top, fields[""]) {
		return true
	}
	for _, nested := range []string{"recipient", "content"} {
		var obj map[string]json.RawMessage
		if json.Unmarshal(top[nested], &obj) == nil && hasFolded(obj, fields[nested]) {
			return true
		}
	}
	return false
}

func hasFolded(obj map[string]json.RawMessage, names []string) bool {
	for k := range obj {
		for _, n := range names {
			// EqualFold is a superset of encoding/json's folding.
			if k != n && strings.EqualFold(k, n) {
				return true
			}
		}
	}
	return false
}

// decodeExact decodes body into r using only keys that are a field's exact
// name: the others are dropped, as unknown fields are.
func decodeExact(body []byte, r *Request) error {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return err
	}
	keep(top, fields[""])
	for _, nested := range []string{"recipient", "content"} {
		var obj map[string]json.RawMessage
		if raw, ok := top[nested]; ok && json.Unmarshal(raw, &obj) == nil && obj != nil {
			keep(obj, fields[nested])
			top[nested], _ = json.Marshal(obj)
		}
	}
	b, err := json.Marshal(top)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return dec.Decode(r)
}

// keep deletes the keys of obj that are not exactly one of names.
func keep(obj map[string]json.RawMessage, names []string) {
	for k := range obj {
		if !slices.Contains(names, k) {
			delete(obj, k)
		}
	}
}

func truncate(s string) string {
	if len(s) > 32 {
		return s[:32] + "…"
	}
	return s
}

func jsonField(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return te.Field
	}
	return ""
}

func jsonReason(err error) string {
	var (
		te *json.UnmarshalTypeError
		se *json.SyntaxError
	)
	switch {
	case errors.As(err, &te):
		return fmt.Sprintf("must be a JSON %s, not %s", jsonKind(te.Type.Kind().String()), te.Value)
	case errors.As(err, &se):
		return fmt.Sprintf("body is not JSON (syntax error at byte %d)", se.Offset)
	case errors.Is(err, io.EOF):
		return "body is empty"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "body is not JSON (it ends early)"
	default:
		return "body is not a JSON object: " + err.Error()
	}
}

func jsonKind(k string) string {
	switch k {
	case "struct", "map":
		return "object"
	case "slice":
		return "array"
	}
	return k
}

// Body returns req as the JSON a queue message carries, after checking it
// exactly as the sender will (Parse, which agrees with the published
// schema, schema/notification-request.v1.json): a request Body accepts
// is never dead-lettered for its shape. Its error is a *InvalidError.
func (r *Request) Body() ([]byte, error) {
	body, err := json.Marshal(r)
	if err != nil {
		return nil, &InvalidError{Field: "data", Reason: "cannot be encoded as JSON: " + err.Error()}
	}
	if _, err := Parse(body); err != nil {
		return nil, err
	}
	return body, nil
}

// MessageGroup is the FIFO message group of req's recipient at its
// tenant: the tenant, "." and 48 hex digits of a hash of the two (at
// most 128 characters, SQS's limit), so that one recipient's messages
// are delivered in order and no address appears in the queue's metadata.
func (r *Request) MessageGroup() string {
	sum := sha256.Sum256([]byte(r.TenantID + "\x00" + r.Recipient.ID))
	return r.TenantID + "." + hex.EncodeToString(sum[:])[:48]
}
