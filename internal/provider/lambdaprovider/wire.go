package lambdaprovider

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// The JSON shapes of the Lambda provider protocol, version 1
// (docs/lambda-provider.md, schema/lambda-provider.v1.json). The adapter
// writes a Request as the Invoke payload and reads the function's answer
// with ParseAnswer.

// Version is the protocol version the adapter speaks: the "version" of
// every Request. A change that a function written for it could misread is
// a new version; new optional fields are not.
const Version = 1

// Op is what a Request asks of the function.
type Op string

// The operations.
const (
	// OpSend asks the function to send the message.
	OpSend Op = "send"
	// OpLookup asks the function whether its provider holds the message
	// (only when the channel's configuration declares lookup).
	OpLookup Op = "lookup"
)

// Request is the payload of one invocation.
type Request struct {
	Version int `json:"version"`
	Op      Op  `json:"op"`
	// Key is the message's idempotency key (docs/request.md): the same
	// for every attempt of the message.
	Key     string `json:"key"`
	Tenant  string `json:"tenant"`
	Channel string `json:"channel"`
	// Class is "otp", "transactional" or "marketing".
	Class string `json:"class,omitempty"`
	// To is the address: an E.164 phone number, an email address or a
	// push target (an SNS platform endpoint ARN).
	To      string  `json:"to"`
	Content Content `json:"content"`
	// AttemptedAt is when the attempt started (RFC 3339, UTC): for a send
	// the current claim, for a lookup the earliest attempt that may have
	// reached the function.
	AttemptedAt string `json:"attempted_at"`
	// AttemptedUntil (lookup only) is when the latest attempt's claim ran
	// out: no attempt being resolved started after it.
	AttemptedUntil string `json:"attempted_until,omitempty"`
	// ProviderMessageID (lookup only) is the id of the message as a
	// delivery callback reported it, when one did.
	ProviderMessageID string `json:"provider_message_id,omitempty"`
}

// Content is the rendered message.
type Content struct {
	Subject string `json:"subject,omitempty"`
	Text    string `json:"text"`
	// HTML is an email's HTML part, when it has one.
	HTML string `json:"html,omitempty"`
}

// Status is the function's answer.
type Status string

// The statuses of an Answer.
const (
	// StatusAccepted: the provider took the message (send), or holds it
	// and it has not failed (lookup). ID is required.
	StatusAccepted Status = "accepted"
	// StatusRejected: the provider refused the message for good (send),
	// or holds it and it failed (lookup).
	StatusRejected Status = "rejected"
	// StatusRetry: the provider took nothing; try again later (on a
	// route, perhaps through the next provider). For a lookup: the
	// provider could not be asked now.
	StatusRetry Status = "retry"
	// StatusNotFound (lookup only): the provider has no record of the
	// message.
	StatusNotFound Status = "not_found"
)

// Answer is the function's reply to a Request.
type Answer struct {
	// Version, when present, must be Version.
	Version int    `json:"version,omitempty"`
	Status  Status `json:"status"`
	// ID is the provider's id of the message (required with accepted).
	ID string `json:"id,omitempty"`
	// Reason explains rejected and retry.
	Reason string `json:"reason,omitempty"`
	// Code is the provider's own code for rejected and retry, if any.
	Code string `json:"code,omitempty"`
}

// MaxIDLen bounds an answer's id, in bytes.
const MaxIDLen = 1024

// ErrUnreadable is wrapped by ParseAnswer's errors: the payload is not an
// answer of this protocol.
var ErrUnreadable = errors.New("unreadable answer")

// ParseAnswer reads the function's payload as the answer to an op
// request. It accepts what schema/lambda-provider.v1.json allows for op: a
// JSON object (unknown fields ignored) whose "status" is one the op may
// answer; "version" absent, null or 1; "id", "reason" and "code" strings
// or null (null is absent); "id" at most MaxIDLen bytes, and holding a
// non-space character with accepted. Anything
// else (another JSON value, a Lambda error document, an unknown status,
// an accepted answer without an id) is an error wrapping ErrUnreadable.
func ParseAnswer(op Op, payload []byte) (Answer, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(payload, &raw); err != nil || raw == nil {
		return Answer{}, fmt.Errorf("%w: not a JSON object", ErrUnreadable)
	}
	var a Answer
	if v, ok := raw["version"]; ok && !isNull(v) {
		if err := json.Unmarshal(v, &a.Version); err != nil || a.Version != Version {
			return Answer{}, fmt.Errorf("%w: version %s is not %d", ErrUnreadable, short(v), Version)
		}
	}
	fields := []struct {
		name string
		dst  *string
	}{{"status", (*string)(&a.Status)}, {"id", &a.ID}, {"reason", &a.Reason}, {"code", &a.Code}}
	for _, f := range fields {
		v, ok := raw[f.name]
		if !ok || isNull(v) {
			continue
		}
		if err := json.Unmarshal(v, f.dst); err != nil {
			return Answer{}, fmt.Errorf("%w: %s is not a string", ErrUnreadable, f.name)
		}
	}
	if !a.Status.validFor(op) {
		return Answer{}, fmt.Errorf("%w: status %q is not an answer to %s", ErrUnreadable, short(raw["status"]), op)
	}
	switch {
	case a.Status == StatusAccepted && strings.TrimSpace(a.ID) == "":
		return Answer{}, fmt.Errorf("%w: accepted without an id", ErrUnreadable)
	case len(a.ID) > MaxIDLen:
		return Answer{}, fmt.Errorf("%w: id is longer than %d bytes", ErrUnreadable, MaxIDLen)
	}
	return a, nil
}

func isNull(v json.RawMessage) bool { return string(bytes.TrimSpace(v)) == "null" }

// validFor reports whether s answers op.
func (s Status) validFor(op Op) bool {
	switch s {
	case StatusAccepted, StatusRejected, StatusRetry:
		return op == OpSend || op == OpLookup
	case StatusNotFound:
		return op == OpLookup
	}
	return false
}

// short is a JSON value cut for an error message.
func short(v json.RawMessage) string {
	s := string(v)
	if len(s) > 20 {
		s = s[:20] + "..."
	}
	return strings.ToValidUTF8(s, "?")
}
