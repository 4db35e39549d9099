package api

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// Problem types (RFC 9457 "type" URIs). Clients match on these, never on
// title or detail text.
const (
	typeNotFound         = "urn:sendonce:problem:not-found"
	typeMethodNotAllowed = "urn:sendonce:problem:method-not-allowed"
	typeUnauthorized     = "urn:sendonce:problem:unauthorized"
	typeMissingKey       = "urn:sendonce:problem:idempotency-key-missing"
	typeInvalidKey       = "urn:sendonce:problem:idempotency-key-invalid"
	typeKeyMismatch      = "urn:sendonce:problem:idempotency-key-reused"
	typeKeyInFlight      = "urn:sendonce:problem:idempotency-key-in-flight"
	typeInvalidBody      = "urn:sendonce:problem:invalid-request"
	typeTooLarge         = "urn:sendonce:problem:request-too-large"
	typeRateLimited      = "urn:sendonce:problem:rate-limited"
	typeUnavailable      = "urn:sendonce:problem:unavailable"
)

// ProblemContentType is the media type of every error response.
const ProblemContentType = "application/problem+json"

// problem is an RFC 9457 problem details object. Detail never holds
// internal error text: that goes to the log only.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	// Field names the offending request field, when there is one.
	Field string `json:"field,omitempty"`
	// Fields names the fields that differ from the first use of an
	// Idempotency-Key.
	Fields []string `json:"fields,omitempty"`

	retryAfter time.Duration
	header     map[string]string
}

func (p *problem) response() events.APIGatewayV2HTTPResponse {
	b, _ := json.Marshal(p)
	h := map[string]string{"Content-Type": ProblemContentType, "Cache-Control": "no-store"}
	for k, v := range p.header {
		h[k] = v
	}
	if p.retryAfter > 0 {
		h["Retry-After"] = retryAfter(p.retryAfter)
	}
	return events.APIGatewayV2HTTPResponse{StatusCode: p.Status, Headers: h, Body: string(b)}
}

// retryAfter formats d as Retry-After delay-seconds, rounded up, at least 1.
func retryAfter(d time.Duration) string {
	s := int64((d + time.Second - 1) / time.Second)
	return strconv.FormatInt(max(s, 1), 10)
}

var (
	problemNotFound = problem{Status: http.StatusNotFound, Type: typeNotFound, Title: "Not Found",
		Detail: "no notification with this id"}
	problemNoRoute = problem{Status: http.StatusNotFound, Type: typeNotFound, Title: "Not Found",
		Detail: "no such resource: the API serves POST /v1/notifications and GET /v1/notifications/{id}"}
	problemUnavailable = problem{Status: http.StatusServiceUnavailable, Type: typeUnavailable, Title: "Service Unavailable",
		Detail: "a dependency failed; retry with the same Idempotency-Key", retryAfter: time.Second}
)
