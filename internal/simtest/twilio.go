package simtest

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sendonce/sendonce/internal/provider/twilio"
	"github.com/sendonce/sendonce/provider"
)

// twilioAPI is the twilio adapter's HTTP transport: a simulation of the
// Messages API's create (accepted, refused, hung, or its answer lost) and
// list (To, From, DateSent>, PageSize, PageToken; newest first,
// next_page_uri pages), every request a yield point of the calling
// worker. A message is listed once it has left Twilio (date_sent), up to
// the seed's listing lag after it was accepted. In some seeds the account
// also holds other traffic to the same numbers from the same sender, some
// with the same text, and serves short pages. With a callback base URL
// the API posts status callbacks to the message key's URL; some are lost.
type twilioAPI struct {
	p        *simProvider
	pageSize int
	// callbacks: the adapter is configured with CallbackBaseURL.
	callbacks bool
}

// The simulated account and its sender.
const (
	twilioAccount = "AC0123456789abcdef0123456789abcdef"
	twilioFrom    = "+15550009999"
)

func (w *World) newTwilioAPI(p *simProvider) *twilioAPI {
	t := &twilioAPI{p: p, pageSize: 50, callbacks: w.rng.IntN(4) != 0}
	if w.rng.IntN(100) < 25 {
		// Busy numbers and short pages: a lookup may page through more
		// than its page cap holds.
		t.pageSize = 1 + w.rng.IntN(2)
		w.sc.noise = 20 + w.rng.IntN(80)
	}
	return t
}

// sid is the message SID of the provider's n-th message.
func (t *twilioAPI) sid(n int) string { return fmt.Sprintf("SM%032x", n) }

// twilioAdapter is the real adapter; it passes the message's key to the
// simulated API through the request's context (the API has no other way
// to know which key a request belongs to; the adapter is unchanged).
type twilioAdapter struct {
	*twilio.Provider
	api *twilioAPI
}

var _ provider.Looker = twilioAdapter{}

type simKeyCtx struct{}

func (t *twilioAPI) adapter() provider.Adapter {
	cfg := twilio.Config{BaseURL: "https://api.twilio.sim", AccountSID: twilioAccount, AuthToken: "sim-token", From: twilioFrom,
		Timeout: providerTimeout, HTTPClient: &http.Client{Transport: t}, Logger: slog.New(slog.DiscardHandler)}
	if t.callbacks {
		cfg.CallbackBaseURL = "https://hooks.sendonce.sim"
	}
	return twilioAdapter{must(twilio.New(cfg)), t}
}

func (a twilioAdapter) Send(ctx context.Context, m provider.Message) (provider.Receipt, error) {
	return a.Provider.Send(context.WithValue(ctx, simKeyCtx{}, m.Key), m)
}

func (a twilioAdapter) Lookup(ctx context.Context, m provider.Message) (provider.LookupResult, error) {
	res, err := a.Provider.Lookup(context.WithValue(ctx, simKeyCtx{}, m.Key), m)
	w := a.api.p.w
	wk := workerOf(ctx)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.truth(m.Key).searchIncomplete = err != nil && strings.Contains(provider.ReasonOf(err), "incomplete")
	if err == nil {
		w.lastLookup[heldKey{wk.id, m.Key}] = res.Status // for policyResend
	}
	w.tracef(m.Key, "%s lookup %s via twilio from %s (evidence %q): %s %s %s %v", wk.name, w.short(m.Key), w.at(m.AttemptedAt), m.ProviderMessageID, res.Status, res.MessageID, res.Reason, err)
	return res, err
}

// RoundTrip serves one request of the adapter: a create (POST) or a
// list (GET). The adapter's tests check its requests' path and
// authentication against package twiliotest.
func (t *twilioAPI) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodGet {
		return t.list(req)
	}
	raw, _ := io.ReadAll(req.Body)
	req.Body.Close()
	form, _ := url.ParseQuery(string(raw))
	p := t.p
	key, _ := req.Context().Value(simKeyCtx{}).(string)
	b, _, err := p.call(req.Context(), key, form.Get("To"), form.Get("Body"))
	defer p.w.mu.Unlock()
	switch r := refusals[b]; {
	case err != nil:
		return nil, err
	case b != provAccept:
		return t.answer(req, r.status, map[string]any{"code": r.code, "message": r.message, "status": r.status}), nil
	}
	return t.answer(req, http.StatusCreated, t.resource(p.sent[len(p.sent)-1], p.w.now().Add(p.skew))), nil
}

func (t *twilioAPI) answer(req *http.Request, status int, body any) *http.Response {
	b, _ := json.Marshal(body)
	return &http.Response{StatusCode: status, Status: fmt.Sprintf("%d %s", status, http.StatusText(status)),
		Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(bytes.NewReader(b)),
		ContentLength: int64(len(b)), Request: req, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1}
}

// resource is a message as the API shows it at now.
func (t *twilioAPI) resource(d *delivery, now time.Time) map[string]any {
	m := map[string]any{
		"sid": d.id, "to": d.to, "from": twilioFrom, "messaging_service_sid": nil, "body": d.body,
		"status": "queued", "error_code": nil, "date_created": d.created.UTC().Format(time.RFC1123Z),
	}
	if !now.Before(d.visible) {
		m["status"] = "sent"
		switch {
		case d.failedAt(now):
			m["status"], m["error_code"] = "undelivered", 30003
		case !now.Before(d.visible.Add(2 * time.Second)):
			m["status"] = "delivered"
		}
	}
	return m
}

// list serves one page of the message list, newest first. Only messages
// with a date sent are listed; DateSent> keeps those sent on or after a
// day (YYYY-MM-DD), the only bound the adapter sets; PageToken is the SID
// of the previous page's last message. The first
// page is a yield point of the calling worker; the pages that follow it
// are requested at once (each may still fail).
func (t *twilioAPI) list(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	key, _ := ctx.Value(simKeyCtx{}).(string)
	q := req.URL.Query()
	p := t.p
	w := p.w
	wk := workerOf(ctx)
	if q.Get("PageToken") == "" {
		w.yield(ctx, "lookup", key)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !wk.calm && !w.calm && w.rng.Float64()/w.sc.intensity < 0.03 {
		w.faults[lookupFail]++
		w.tracef(key, "%s lookup page %s via twilio: 503", wk.name, w.short(key))
		return t.answer(req, http.StatusServiceUnavailable, map[string]any{"code": 20503, "message": "Service Unavailable", "status": 503}), nil
	}
	now := w.now().Add(p.skew)
	after, _ := time.Parse("2006-01-02", q.Get("DateSent>")) // zero when absent
	var match []*delivery
	for _, d := range p.sent {
		if d.to != q.Get("To") || (q.Get("From") != "" && q.Get("From") != twilioFrom) || now.Before(d.visible) || d.visible.Before(after) {
			continue
		}
		match = append(match, d)
	}
	slices.SortFunc(match, func(a, b *delivery) int {
		return cmp.Or(b.created.Compare(a.created), strings.Compare(b.id, a.id))
	})
	if tok := q.Get("PageToken"); tok != "" {
		i := slices.IndexFunc(match, func(d *delivery) bool { return d.id == tok })
		match = match[i+1:]
	}
	size := t.pageSize
	if n, _ := strconv.Atoi(q.Get("PageSize")); n > 0 {
		size = min(n, size)
	}
	page := map[string]any{"page_size": size, "next_page_uri": nil}
	var msgs []map[string]any
	for _, d := range match[:min(size, len(match))] {
		msgs = append(msgs, t.resource(d, now))
	}
	page["messages"] = msgs
	if len(match) > size {
		nq := maps.Clone(q)
		nq.Set("PageToken", match[size-1].id)
		page["next_page_uri"] = req.URL.Path + "?" + nq.Encode()
	}
	w.tracef(key, "%s lookup page %s via twilio: %d of %d listed", wk.name, w.short(key), len(msgs), len(match))
	return t.answer(req, http.StatusOK, page), nil
}

// addNoise puts other traffic to the SMS recipients into the account:
// messages from the same sender, some with the text of a workload
// message, sent during the run.
func (t *twilioAPI) addNoise(n int, texts []string) {
	p := t.p
	w := p.w
	for i := range n {
		created := w.t0.Add(time.Duration(w.rng.Int64N(int64(5 * time.Minute))))
		body := fmt.Sprintf("Your order Z-%d has shipped.", i)
		if len(texts) > 0 && w.rng.IntN(3) == 0 {
			body = texts[w.rng.IntN(len(texts))]
		}
		p.n++
		p.sent = append(p.sent, &delivery{to: smsAddress(w.rng.IntN(recipients)), body: body, id: t.sid(p.n), created: created,
			visible: created.Add(time.Duration(w.rng.IntN(30)) * time.Second)})
	}
	w.faults["twilio_noise_messages"] += n
}
