package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Margin is how long before the invocation's deadline the handler stops
// waiting for the gateway, so that it can still answer (retry when nothing
// was sent) instead of being stopped by Lambda mid-call.
const Margin = 500 * time.Millisecond

// Handler forwards sendonce's requests to a gateway that speaks sendonce's
// generic HTTP provider protocol (docs/http-provider.md): the provider
// simulator locally, an in-house SMS or email gateway in production. The
// gateway honours Idempotency-Key, so this function can be declared
// idempotent (SENDONCE_<CHANNEL>_LAMBDA_IDEMPOTENT=true), and it answers
// GET /messages?reference=, so it can be declared to look messages up
// (SENDONCE_<CHANNEL>_LAMBDA_LOOKUP=true).
type Handler struct {
	// BaseURL is the gateway's base URL; "/messages" is appended.
	BaseURL string
	// Token is the gateway's bearer token.
	Token string
	// Client makes the calls; nil means http.DefaultClient.
	Client *http.Client
}

// Handle answers one invocation. It returns an error, which Lambda reports
// to sendonce as a function error ("the message may have been sent"),
// only when it cannot tell whether the gateway took the message.
func (h *Handler) Handle(ctx context.Context, payload json.RawMessage) (Answer, error) {
	req, err := ParseRequest(payload)
	switch {
	case errors.Is(err, ErrUnsupported):
		return Retry("unsupported", err.Error()), nil
	case err != nil:
		return Rejected("invalid_request", err.Error()), nil
	}
	if deadline, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline.Add(-Margin))
		defer cancel()
	}
	var a Answer
	if req.Op == OpLookup {
		a = h.lookup(ctx, req)
	} else {
		a, err = h.send(ctx, req)
	}
	slog.Info("request", "op", req.Op, "key", req.Key, "status", a.Status, "id", a.ID, "code", a.Code, "error", err)
	return a, err
}

// gatewaySend is the body of the gateway's POST /messages.
type gatewaySend struct {
	Channel   string `json:"channel"`
	To        string `json:"to"`
	Subject   string `json:"subject"`
	Body      string `json:"body"`
	HTML      string `json:"html,omitempty"`
	Reference string `json:"reference"`
}

// gatewayMessage is one message in a gateway's answer.
type gatewayMessage struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Reason string `json:"reason"`
}

func (h *Handler) send(ctx context.Context, r Request) (Answer, error) {
	body, err := json.Marshal(gatewaySend{Channel: r.Channel, To: r.To, Subject: r.Content.Subject,
		Body: r.Content.Text, HTML: r.Content.HTML, Reference: r.Key})
	if err != nil {
		return Rejected("invalid_request", "cannot encode the message"), nil
	}
	var written atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(httptrace.WroteRequestInfo) { written.Store(true) },
	})
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(h.BaseURL, "/")+"/messages", bytes.NewReader(body))
	if err != nil {
		return Retry("config", "bad gateway URL"), nil
	}
	hr.GetBody = nil // never let the transport send it twice
	hr.Header.Set("Authorization", "Bearer "+h.Token)
	hr.Header.Set("Idempotency-Key", r.Key)
	hr.Header.Set("Content-Type", "application/json")
	resp, err := cmp.Or(h.Client, http.DefaultClient).Do(hr)
	if err != nil {
		if !written.Load() {
			return Retry("unreachable", "the gateway could not be reached: nothing was sent"), nil
		}
		// The gateway may have taken the message: only an error says so.
		return Answer{}, fmt.Errorf("no answer from the gateway after the message was sent: %w", withoutURL(err))
	}
	defer resp.Body.Close()
	data, readErr := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	code := strconv.Itoa(resp.StatusCode)
	switch s := resp.StatusCode; {
	case s == 200 || s == 201 || s == 202:
		var m gatewayMessage
		if readErr != nil || json.Unmarshal(data, &m) != nil || strings.TrimSpace(m.ID) == "" {
			return Answer{}, fmt.Errorf("the gateway accepted (HTTP %d) without a readable message id", s)
		}
		return Accepted(m.ID), nil
	case s == 401 || s == 403 || s == 407 || (s >= 300 && s < 400):
		return Retry(code, "the gateway refused this function's configuration: "+gatewayReason(data, s)), nil
	case s == 408 || s == 409 || s == 425 || s == 429 || s == 503:
		// The protocol says the gateway took nothing.
		return Retry(code, gatewayReason(data, s)), nil
	case s >= 400 && s < 500:
		return Rejected(code, gatewayReason(data, s)), nil
	case s >= 500:
		// Any other 5xx may hide a message the gateway took: retry would
		// let sendonce send it through another provider.
		return Answer{}, fmt.Errorf("the gateway failed (HTTP %d: %s) and may have taken the message", s, gatewayReason(data, s))
	}
	return Answer{}, fmt.Errorf("unexpected answer from the gateway: HTTP %d", resp.StatusCode)
}

func (h *Handler) lookup(ctx context.Context, r Request) Answer {
	u := strings.TrimRight(h.BaseURL, "/") + "/messages?reference=" + url.QueryEscape(r.Key)
	hr, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return Retry("config", "bad gateway URL")
	}
	hr.Header.Set("Authorization", "Bearer "+h.Token)
	resp, err := cmp.Or(h.Client, http.DefaultClient).Do(hr)
	if err != nil {
		return Retry("unreachable", "the gateway could not be asked")
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil || resp.StatusCode != http.StatusOK {
		return Retry(strconv.Itoa(resp.StatusCode), "the gateway could not be asked: "+gatewayReason(data, resp.StatusCode))
	}
	var list struct {
		Messages []gatewayMessage `json:"messages"`
	}
	if err := json.Unmarshal(data, &list); err != nil {
		return Retry("200", "unreadable lookup answer")
	}
	// The gateway keeps one message per key: it drops repeats.
	if len(list.Messages) == 0 {
		return NotFound()
	}
	switch m := list.Messages[0]; m.Status {
	case "accepted", "queued", "sent", "delivered":
		return Accepted(m.ID)
	case "failed", "undelivered", "rejected":
		a := Rejected(m.Status, m.Reason)
		a.ID = m.ID
		return a
	default:
		return Retry("200", "unknown message status "+strconv.Quote(m.Status))
	}
}

// gatewayReason is the "error" of a gateway's error answer, else the
// status text.
func gatewayReason(body []byte, status int) string {
	var e struct{ Error string }
	_ = json.Unmarshal(body, &e)
	return cmp.Or(e.Error, http.StatusText(status))
}

// withoutURL drops the URL from a transport error: the function's error
// text is stored by sendonce, and a URL may carry more than it should.
func withoutURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
