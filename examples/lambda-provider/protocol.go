package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// The sendonce Lambda provider protocol, version 1
// (docs/lambda-provider.md, schema/lambda-provider.v1.json), as a function
// reads and writes it.

// ProtocolVersion is the version of the requests this function reads.
const ProtocolVersion = 1

// The operations.
const (
	OpSend   = "send"
	OpLookup = "lookup"
)

// Request is sendonce's invocation payload.
type Request struct {
	Version           int     `json:"version"`
	Op                string  `json:"op"`
	Key               string  `json:"key"`
	Tenant            string  `json:"tenant"`
	Channel           string  `json:"channel"`
	Class             string  `json:"class,omitempty"`
	To                string  `json:"to"`
	Content           Content `json:"content"`
	AttemptedAt       string  `json:"attempted_at"`
	AttemptedUntil    string  `json:"attempted_until,omitempty"`
	ProviderMessageID string  `json:"provider_message_id,omitempty"`
}

// Content is the rendered message.
type Content struct {
	Subject string `json:"subject,omitempty"`
	Text    string `json:"text"`
	HTML    string `json:"html,omitempty"`
}

// The statuses of an Answer.
const (
	StatusAccepted = "accepted"
	StatusRejected = "rejected"
	StatusRetry    = "retry"
	StatusNotFound = "not_found"
)

// Answer is the function's reply. A function that cannot tell whether the
// provider took the message does not answer: it returns an error, which
// sendonce reads as "may have been sent".
type Answer struct {
	Version int    `json:"version"`
	Status  string `json:"status"`
	ID      string `json:"id,omitempty"`
	Reason  string `json:"reason,omitempty"`
	Code    string `json:"code,omitempty"`
}

// Accepted, Rejected, Retry and NotFound build answers.
func Accepted(id string) Answer {
	return Answer{Version: ProtocolVersion, Status: StatusAccepted, ID: id}
}

// Rejected is the answer for a message the provider refused for good.
func Rejected(code, reason string) Answer {
	return Answer{Version: ProtocolVersion, Status: StatusRejected, Code: code, Reason: reason}
}

// Retry is the answer when nothing was sent (or a repeat of the key will
// be dropped) and a later attempt may succeed.
func Retry(code, reason string) Answer {
	return Answer{Version: ProtocolVersion, Status: StatusRetry, Code: code, Reason: reason}
}

// NotFound is a lookup's answer when the provider has no record.
func NotFound() Answer { return Answer{Version: ProtocolVersion, Status: StatusNotFound} }

// ErrUnsupported is wrapped by ParseRequest's error for a request of a
// protocol version or operation this function does not know: sendonce is
// newer than the function. Nothing is sent; the answer is retry, so the
// message goes out once the function is updated.
var ErrUnsupported = errors.New("unsupported request")

// ErrInvalid is wrapped by ParseRequest's error for a request that breaks
// the protocol (not JSON, a required field missing or wrong): it can never
// be sent, so the answer is rejected.
var ErrInvalid = errors.New("invalid request")

var (
	keyRE      = regexp.MustCompile(`^v[1-9][0-9]*_[0-9a-f]{64}$`)
	tenantRE   = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)
	dateTimeRE = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})$`)
)

// ParseRequest reads one invocation payload. It accepts a JSON object
// (unknown fields ignored) that schema/lambda-provider.v1.json's request
// accepts, and returns an error wrapping ErrUnsupported (a version other
// than 1, an unknown op) or ErrInvalid (anything else wrong) otherwise.
func ParseRequest(payload []byte) (Request, error) {
	var f map[string]json.RawMessage
	if err := json.Unmarshal(payload, &f); err != nil || f == nil {
		return Request{}, fmt.Errorf("%w: not a JSON object", ErrInvalid)
	}
	var r Request
	if err := json.Unmarshal(f["version"], &r.Version); err != nil || r.Version != ProtocolVersion {
		return Request{}, fmt.Errorf("%w: protocol version %s (this function reads %d)", ErrUnsupported, cut(string(f["version"])), ProtocolVersion)
	}
	if err := json.Unmarshal(f["op"], &r.Op); err != nil || (r.Op != OpSend && r.Op != OpLookup) {
		return Request{}, fmt.Errorf("%w: op %s", ErrUnsupported, cut(string(f["op"])))
	}
	var c map[string]json.RawMessage
	if err := json.Unmarshal(f["content"], &c); err != nil || c == nil {
		return Request{}, fmt.Errorf("%w: content is required and must be an object", ErrInvalid)
	}
	fields := []struct {
		from     map[string]json.RawMessage
		name     string
		dst      *string
		required bool
		valid    func(string) bool
	}{
		{f, "key", &r.Key, true, keyRE.MatchString},
		{f, "tenant", &r.Tenant, true, tenantRE.MatchString},
		{f, "channel", &r.Channel, true, oneOf("sms", "email", "push")},
		{f, "class", &r.Class, false, oneOf("otp", "transactional", "marketing")},
		{f, "to", &r.To, true, nonEmpty},
		{f, "attempted_at", &r.AttemptedAt, true, dateTime},
		{f, "attempted_until", &r.AttemptedUntil, false, dateTime},
		{f, "provider_message_id", &r.ProviderMessageID, false, nil},
		{c, "subject", &r.Content.Subject, false, nil},
		{c, "text", &r.Content.Text, true, nonEmpty},
		{c, "html", &r.Content.HTML, false, nil},
	}
	for _, fd := range fields {
		v, ok := fd.from[fd.name]
		if !ok {
			if fd.required {
				return Request{}, fmt.Errorf("%w: %s is required", ErrInvalid, fd.name)
			}
			continue
		}
		if err := json.Unmarshal(v, fd.dst); err != nil || v[0] != '"' {
			return Request{}, fmt.Errorf("%w: %s is not a string", ErrInvalid, fd.name)
		}
		if fd.valid != nil && !fd.valid(*fd.dst) {
			return Request{}, fmt.Errorf("%w: %s %s", ErrInvalid, fd.name, cut(*fd.dst))
		}
	}
	return r, nil
}

func oneOf(values ...string) func(string) bool {
	return func(s string) bool {
		for _, v := range values {
			if s == v {
				return true
			}
		}
		return false
	}
}

func nonEmpty(s string) bool { return s != "" }

// dateTime reports whether s is an RFC 3339 date-time ("2026-11-29T12:00:00.000Z").
func dateTime(s string) bool {
	if !dateTimeRE.MatchString(s) {
		return false
	}
	_, err := time.Parse(time.RFC3339Nano, s)
	return err == nil
}

// cut quotes s for an error message, at most 40 bytes of it.
func cut(s string) string {
	if len(s) > 40 {
		s = s[:40] + "..."
	}
	return strconv.Quote(strings.ToValidUTF8(s, "?"))
}
