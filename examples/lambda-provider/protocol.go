package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
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
// the protocol (not a JSON object, a field of the wrong type, a required
// field missing): it can never be sent, so the answer is rejected.
var ErrInvalid = errors.New("invalid request")

// ParseRequest reads one invocation payload, ignoring unknown fields. It
// checks the version and the op first (ErrUnsupported), so that a request
// of a newer protocol is retried whatever else it holds, then that the
// fields a send needs are there (ErrInvalid). It does not check their
// formats (schema/lambda-provider.v1.json): sendonce writes them.
func ParseRequest(payload []byte) (Request, error) {
	var head struct {
		Version json.RawMessage `json:"version"`
		Op      json.RawMessage `json:"op"`
	}
	if err := json.Unmarshal(payload, &head); err != nil {
		return Request{}, fmt.Errorf("%w: not a JSON object", ErrInvalid)
	}
	if string(head.Version) != strconv.Itoa(ProtocolVersion) {
		return Request{}, fmt.Errorf("%w: protocol version %.40q (this function reads %d)", ErrUnsupported, head.Version, ProtocolVersion)
	}
	if op := string(head.Op); op != `"`+OpSend+`"` && op != `"`+OpLookup+`"` {
		return Request{}, fmt.Errorf("%w: op %.40q", ErrUnsupported, op)
	}
	var r Request
	if err := json.Unmarshal(payload, &r); err != nil {
		return Request{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if r.Key == "" || r.Tenant == "" || r.Channel == "" || r.To == "" || r.Content.Text == "" || r.AttemptedAt == "" {
		return Request{}, fmt.Errorf("%w: key, tenant, channel, to, content.text and attempted_at are required", ErrInvalid)
	}
	return r, nil
}
