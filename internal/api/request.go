package api

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strings"

	"github.com/sendonce/sendonce/internal/api/idempotency"
	"github.com/sendonce/sendonce/notify"
)

// MaxIdempotencyKeyLen is the longest Idempotency-Key accepted.
const MaxIdempotencyKeyLen = 255

// EventIDPrefix starts the event_id the API gives a request:
// "api:" + lowercase hex SHA-256 of the Idempotency-Key. Hashing keeps it
// within event_id's 256 characters for every valid key.
const EventIDPrefix = "api:"

// EventID returns the event_id of a request submitted with idempotency key
// key.
func EventID(key string) string {
	sum := sha256.Sum256([]byte(key))
	return EventIDPrefix + hex.EncodeToString(sum[:])
}

// submission is a parsed, validated POST /v1/notifications.
type submission struct {
	key string
	req notify.Request
}

// header returns the value of header name, matched case-insensitively
// (API Gateway lowercases names; direct invocations may not).
func header(h map[string]string, name string) (string, bool) {
	if v, ok := h[strings.ToLower(name)]; ok {
		return v, true
	}
	for k, v := range h {
		if strings.EqualFold(k, name) {
			return v, true
		}
	}
	return "", false
}

// bearerToken returns the token of an "Authorization: Bearer <token>"
// header, or "" when there is none or it is of another scheme.
func bearerToken(h map[string]string) string {
	v, ok := header(h, "Authorization")
	if !ok {
		return ""
	}
	scheme, tok, ok := strings.Cut(strings.TrimSpace(v), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(tok)
}

// idempotencyKey returns the request's Idempotency-Key, or a problem: the
// key is required, 1 to 255 printable ASCII characters (0x20-0x7E) with no
// leading or trailing space.
func idempotencyKey(h map[string]string) (string, *problem) {
	k, ok := header(h, "Idempotency-Key")
	if !ok || k == "" {
		return "", &problem{Status: http.StatusBadRequest, Type: typeMissingKey, Title: "Idempotency-Key required",
			Detail: "POST /v1/notifications needs an Idempotency-Key header: 1 to 255 printable ASCII characters, the same on every retry"}
	}
	bad := len(k) > MaxIdempotencyKeyLen || k[0] == ' ' || k[len(k)-1] == ' '
	for i := 0; i < len(k) && !bad; i++ {
		bad = k[i] < 0x20 || k[i] > 0x7e
	}
	if bad {
		return "", &problem{Status: http.StatusBadRequest, Type: typeInvalidKey, Title: "Invalid Idempotency-Key",
			Detail: "the Idempotency-Key must be 1 to 255 printable ASCII characters without leading or trailing space"}
	}
	return k, nil
}

// requestBody returns the raw body, decoding API Gateway's base64, or a
// 400/413 problem.
func requestBody(body string, isBase64 bool) ([]byte, *problem) {
	tooLarge := &problem{Status: http.StatusRequestEntityTooLarge, Type: typeTooLarge, Title: "Request body too large",
		Detail: fmt.Sprintf("the body must be at most %d bytes", notify.MaxBodySize)}
	if !isBase64 {
		if len(body) > notify.MaxBodySize {
			return nil, tooLarge
		}
		return []byte(body), nil
	}
	if base64.StdEncoding.DecodedLen(len(body)) > notify.MaxBodySize+3 {
		return nil, tooLarge
	}
	b, err := base64.StdEncoding.DecodeString(body)
	if err != nil {
		return nil, &problem{Status: http.StatusBadRequest, Type: typeInvalidBody, Title: "Invalid request body", Detail: "the body is not valid base64 as API Gateway marked it"}
	}
	if len(b) > notify.MaxBodySize {
		return nil, tooLarge
	}
	return b, nil
}

// parseSubmission reads a POST /v1/notifications for tenant: the
// Idempotency-Key header and the body, a request (docs/request.md) without
// tenant_id. tenant_id is rejected when present: the tenant comes from the
// API key, and a client that sends one expects it to mean something it
// would not. event_id is the client's when given (so one business event
// submitted through the queue and through the API is one message) and
// EventID(key) when absent or null. The request is validated by package
// notify with tenant_id set to tenant.
func parseSubmission(tenant string, headers map[string]string, body string, isBase64 bool) (submission, *problem) {
	key, p := idempotencyKey(headers)
	if p != nil {
		return submission{}, p
	}
	raw, p := requestBody(body, isBase64)
	if p != nil {
		return submission{}, p
	}
	var obj map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&obj); err != nil || obj == nil {
		return submission{}, invalid("", notJSON(err))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return submission{}, invalid("", "the body holds more than one JSON value")
	}
	if _, ok := obj["tenant_id"]; ok {
		return submission{}, invalid("tenant_id", "must not be set: the tenant comes from the API key")
	}
	full := maps.Clone(obj)
	full["tenant_id"], _ = json.Marshal(tenant)
	if ev, ok := obj["event_id"]; !ok || string(bytes.TrimSpace(ev)) == "null" {
		full["event_id"], _ = json.Marshal(EventID(key))
	}
	b, err := json.Marshal(full)
	if err != nil {
		return submission{}, invalid("", "the body is not a JSON object")
	}
	req, err := notify.Parse(b)
	if err != nil {
		var ie *notify.InvalidError
		if errors.As(err, &ie) {
			return submission{}, invalid(ie.Field, ie.Reason)
		}
		return submission{}, invalid("", "the request is invalid")
	}
	return submission{key: key, req: req}, nil
}

func notJSON(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case err == nil:
		return "the body must be a JSON object, not null"
	case errors.As(err, &se):
		return fmt.Sprintf("the body is not JSON (syntax error at byte %d)", se.Offset)
	case errors.As(err, &te):
		return "the body must be a JSON object, not " + te.Value
	case errors.Is(err, io.EOF):
		return "the body is empty"
	default:
		return "the body is not JSON (it ends early)"
	}
}

func invalid(field, reason string) *problem {
	p := &problem{Status: http.StatusBadRequest, Type: typeInvalidBody, Title: "Invalid request body", Detail: reason, Field: field}
	if field != "" {
		p.Detail = field + ": " + reason
	}
	return p
}

// fingerprint returns the fingerprint of a validated request: the SHA-256
// of its canonical JSON (encoding/json of notify.Request: fixed field
// order, sorted map keys) and a short hash of each field salted with the
// Idempotency-Key, so the stored field hashes are no lookup table of
// addresses.
func fingerprint(r notify.Request, salt string) idempotency.Fingerprint {
	canon, _ := json.Marshal(r)
	sum := sha256.Sum256(canon)
	fields := map[string]any{
		"event_id":              r.EventID,
		"content":               r.Content,
		"channel":               r.Channel,
		"template":              r.Template,
		"recipient.id":          r.Recipient.ID,
		"recipient.phone":       r.Recipient.Phone,
		"recipient.email":       r.Recipient.Email,
		"recipient.push_target": r.Recipient.PushTarget,
		"class":                 r.Class,
		"locale":                r.Locale,
		"expires_at":            r.ExpiresAt,
		"data":                  r.Data,
	}
	f := idempotency.Fingerprint{Sum: hex.EncodeToString(sum[:]), Fields: make(map[string]string, len(fields))}
	for k, v := range fields {
		b, _ := json.Marshal(v)
		s := sha256.Sum256(append([]byte(salt+"\x00"), b...))
		f.Fields[k] = hex.EncodeToString(s[:8])
	}
	return f
}
