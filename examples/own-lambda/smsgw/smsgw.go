// Package smsgw is a sendonce provider adapter for an in-house SMS
// gateway with an HTTP API of its own (not sendonce's generic HTTP
// provider protocol): the kind of adapter a program brings when no
// built-in provider speaks to its gateway. It is an example: copy it and
// change the requests and answers to your gateway's.
//
// The gateway's API, as this example assumes it:
//
//	POST {base}/v2/sms            X-Api-Key: {key}
//	  {"to":"+15551234567","text":"…","client_ref":"{sendonce key}"}
//	  200 {"sms_id":"…"}          accepted; a repeat of a client_ref is
//	                              answered with the original sms_id and
//	                              sends nothing (IdempotentSends)
//	  400/422 {"error":"…"}       refused for good
//	  401/403                     bad API key
//	  429, 503                    not taken; try later
//	  500, other 5xx              an error that may come after the SMS
//	                              was queued: it may go out
//	GET {base}/v2/sms?client_ref={key}
//	  200 {"items":[{"sms_id":"…","state":"queued|delivered|failed","error":"…"}]}
//	                              (LookupByReference; empty: no record)
package smsgw

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/sendonce/sendonce/provider"
)

// Name is the adapter's configuration name, stored in every ledger row
// it sends.
const Name = "smsgw"

// Adapter sends SMS through the gateway. It implements provider.Adapter
// and provider.Looker and is safe for concurrent use.
type Adapter struct {
	base   string
	apiKey string
	client *http.Client
}

// New returns an adapter for the gateway at baseURL (scheme and host,
// optionally a path prefix) authenticated with apiKey. client's timeout
// should be zero: each call is bounded by its context (the sender's
// provider timeout). A nil client uses http.DefaultClient.
func New(baseURL, apiKey string, client *http.Client) (*Adapter, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("smsgw: base URL %q: want http(s)://host", baseURL)
	}
	if apiKey == "" {
		return nil, errors.New("smsgw: an API key is required")
	}
	if client == nil {
		client = http.DefaultClient
	}
	return &Adapter{base: strings.TrimRight(baseURL, "/"), apiKey: apiKey, client: client}, nil
}

// Name returns "smsgw".
func (a *Adapter) Name() string { return Name }

// Capabilities: the gateway drops a repeat of a client_ref and can be
// asked about one.
func (a *Adapter) Capabilities() provider.Capabilities {
	return provider.Capabilities{IdempotentSends: true, LookupByReference: true}
}

type sendRequest struct {
	To        string `json:"to"`
	Text      string `json:"text"`
	ClientRef string `json:"client_ref"`
}

type sendResponse struct {
	SMSID string `json:"sms_id"`
	Error string `json:"error"`
}

// Send posts m to the gateway with m.Key as its client_ref.
func (a *Adapter) Send(ctx context.Context, m provider.Message) (provider.Receipt, error) {
	body, err := json.Marshal(sendRequest{To: m.To, Text: m.Body, ClientRef: m.Key})
	if err != nil {
		return provider.Receipt{}, a.fail("send", provider.Permanent, "", "cannot encode the message", err)
	}
	var out sendResponse
	if err := a.call(ctx, "send", http.MethodPost, a.base+"/v2/sms", body, &out); err != nil {
		return provider.Receipt{}, err
	}
	if out.SMSID == "" {
		// Accepted, but without an id: the message may be out.
		return provider.Receipt{}, a.fail("send", provider.Ambiguous, "", "accepted without an sms_id", nil)
	}
	return provider.Receipt{MessageID: out.SMSID}, nil
}

type lookupResponse struct {
	Items []struct {
		SMSID string `json:"sms_id"`
		State string `json:"state"`
		Error string `json:"error"`
	} `json:"items"`
}

// Lookup asks the gateway for the message with m.Key as its client_ref.
func (a *Adapter) Lookup(ctx context.Context, m provider.Message) (provider.LookupResult, error) {
	var out lookupResponse
	if err := a.call(ctx, "lookup", http.MethodGet, a.base+"/v2/sms?client_ref="+url.QueryEscape(m.Key), nil, &out); err != nil {
		return provider.LookupResult{}, err
	}
	if len(out.Items) == 0 {
		return provider.LookupResult{Status: provider.LookupNotFound}, nil
	}
	it := out.Items[0]
	if it.State == "failed" {
		return provider.LookupResult{Status: provider.LookupRejected, MessageID: it.SMSID, Reason: cmp.Or(it.Error, "failed")}, nil
	}
	return provider.LookupResult{Status: provider.LookupAccepted, MessageID: it.SMSID}, nil
}

// call makes one request and decodes a 200 answer into out. Every error
// is a *provider.Error: before the request was written nothing can have
// been sent (Transient); after it, a lost answer is Ambiguous.
func (a *Adapter) call(ctx context.Context, op, method, u string, body []byte, out any) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return a.fail(op, provider.Config, "", "bad request URL", err)
	}
	req.Header.Set("X-Api-Key", a.apiKey)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	var wrote atomic.Bool // set by the transport's writing goroutine
	req = req.WithContext(httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(httptrace.WroteRequestInfo) { wrote.Store(true) },
	}))
	resp, err := a.client.Do(req)
	if err != nil {
		if !wrote.Load() {
			return a.fail(op, provider.Transient, "", "gateway not reached", err)
		}
		return a.fail(op, provider.Ambiguous, "", "no answer after the request was written", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	code := strconv.Itoa(resp.StatusCode)
	switch {
	case resp.StatusCode == http.StatusOK && err != nil:
		return a.fail(op, provider.Ambiguous, code, "answer cut short", err)
	case resp.StatusCode == http.StatusOK:
		if err := json.Unmarshal(data, out); err != nil {
			return a.fail(op, provider.Ambiguous, code, "unreadable answer", err)
		}
		return nil
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return a.fail(op, provider.Config, code, "the gateway refused the API key", nil)
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable:
		return a.fail(op, provider.Transient, code, "the gateway did not take the request", nil)
	case resp.StatusCode >= 500:
		// Not a refusal: the gateway may have queued the SMS before it
		// failed. Transient would let the route's next provider send it
		// again (providertest's AcceptedThenFailed).
		return a.fail(op, provider.Ambiguous, code, "server error: the gateway may have taken the request", nil)
	case resp.StatusCode == http.StatusBadRequest || resp.StatusCode == http.StatusUnprocessableEntity:
		var e sendResponse
		_ = json.Unmarshal(data, &e)
		return a.fail(op, provider.Permanent, code, cmp.Or(e.Error, "refused"), nil)
	default:
		// An answer this adapter does not know: it cannot tell whether
		// the message went out.
		return a.fail(op, provider.Ambiguous, code, "unexpected answer", nil)
	}
}

func (a *Adapter) fail(op string, kind provider.Kind, code, reason string, err error) error {
	return &provider.Error{Kind: kind, Provider: Name, Op: op, Code: code, Reason: reason, Err: err}
}
