package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net/http/httptest"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sendonce/sendonce/internal/benchreport"
	"github.com/sendonce/sendonce/internal/decide"
	"github.com/sendonce/sendonce/internal/dispatch"
	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/ledger/dynamoledger"
	"github.com/sendonce/sendonce/internal/notify"
	"github.com/sendonce/sendonce/internal/provider"
	"github.com/sendonce/sendonce/internal/provider/httpprovider"
	"github.com/sendonce/sendonce/internal/provider/simulator"
	"github.com/sendonce/sendonce/internal/reconcile"
	"github.com/sendonce/sendonce/internal/render"
	"github.com/sendonce/sendonce/internal/sender"
	"github.com/sendonce/sendonce/internal/templates"
	"github.com/sendonce/sendonce/internal/templates/memtemplates"
	"github.com/sendonce/sendonce/internal/testenv"
	"github.com/sendonce/sendonce/internal/webhook"
)

const simToken = "bench-token"

var discard = slog.New(slog.DiscardHandler)

// startSim serves the generic HTTP provider simulator on loopback with a
// fixed latency per /messages request, and returns an adapter for it.
func startSim(latency time.Duration) (*simulator.Simulator, *httpprovider.Provider, string, func(), error) {
	sim := simulator.New(simulator.Options{Token: simToken, Latency: latency, Logger: discard})
	srv := httptest.NewServer(sim.Handler())
	stop := func() {
		srv.Close()
		sim.Close()
	}
	p, err := httpprovider.New(httpprovider.Config{BaseURL: srv.URL, Token: simToken, Logger: discard})
	if err != nil {
		stop()
		return nil, nil, "", nil, fmt.Errorf("provider adapter: %w", err)
	}
	return sim, p, srv.URL, stop, nil
}

// benchRenderer renders the example templates of tenant "bench", and
// the 20 KB HTML email of the peer section (largeTemplate), from memory,
// as a warm sender container renders from its cache.
var benchRenderer = func() *render.Renderer {
	s := memtemplates.New()
	ctx := context.Background()
	if _, err := templates.ImportExamples(ctx, s, "bench"); err != nil {
		panic(err) // the examples are valid (tested in package templates)
	}
	html := "<p>Hello {{.name}}, order {{.order_id}}</p>" + strings.Repeat("<p>bench newsletter paragraph</p>\n", 20*1024/34)
	if _, err := s.Put(ctx, templates.Template{ID: templates.ID{Tenant: "bench", Name: largeTemplate, Channel: "email"},
		Subject: "News for {{.name}}", Text: "Hello {{.name}}, order {{.order_id}}", HTML: html}); err != nil {
		panic(err)
	}
	return render.New(s)
}()

// largeTemplate is the stored email template whose HTML part is 20 KB.
const largeTemplate = "newsletter"

// noDeadLetters rejects every put: the benchmark sends only valid requests.
type noDeadLetters struct{}

func (noDeadLetters) Put(_ context.Context, rec events.SQSMessage, invalid *notify.InvalidError) error {
	return fmt.Errorf("bench: unexpected invalid request %s: %v", rec.MessageId, invalid)
}

func newSender(l ledger.Ledger, p provider.Adapter) (*sender.Sender, error) {
	return sender.New(sender.Config{
		Ledger:          l,
		Providers:       map[string]provider.Adapter{"sms": p},
		Renderer:        benchRenderer,
		DeadLetters:     noDeadLetters{},
		ProviderTimeout: decide.DefaultProviderTimeout,
		ClaimTimeout:    sender.DefaultClaimTimeout,
	})
}

// request returns the i-th request of run: an SMS of ~40 rendered
// characters, as a typical transactional notification.
func request(run string, i int) notify.Request {
	return notify.Request{
		TenantID:  "bench",
		EventID:   fmt.Sprintf("evt-%s-%d", run, i),
		Channel:   notify.ChannelSMS,
		Template:  "order_shipped",
		Recipient: notify.Recipient{ID: fmt.Sprintf("user-%d", i), Phone: "+15551234567"},
		Class:     notify.ClassTransactional,
		Locale:    "en",
		Data:      map[string]any{"order_id": fmt.Sprintf("A-%d", i)},
	}
}

// entry is what the sender claims for req: the render inputs (the stored
// template's version and the data), not the rendered message.
func entry(req notify.Request) (ledger.Entry, error) {
	msg, err := benchRenderer.RenderRequest(context.Background(), req)
	if err != nil {
		return ledger.Entry{}, err
	}
	data, err := json.Marshal(req.Data)
	if err != nil {
		return ledger.Entry{}, err
	}
	return ledger.Entry{
		Key: req.Key(), Tenant: req.TenantID, EventID: req.EventID, Channel: string(req.Channel), Class: string(req.Class),
		Provider: httpprovider.ProviderName, Template: req.Template, RecipientID: req.Recipient.ID,
		Address: req.Address(), TemplateVersion: msg.TemplateVersion, TemplateLocale: msg.TemplateLocale, Data: string(data),
	}, nil
}

// requestJSON is req as an SQS message body.
func requestJSON(req notify.Request) (string, error) {
	b, err := json.Marshal(req)
	return string(b), err
}

// pathMessages is how many messages each path is measured over.
const pathMessages = 20

// measurePaths counts DynamoDB calls and write units per message, through
// the cost proxy, on the paths of a message's life that the peer section
// does not run: takeover, reconcile, callbacks.
func measurePaths(ctx context.Context, endpoint string, rep *benchreport.Report) error {
	table, drop, err := createTable(ctx, dynamoClient(endpoint), "paths")
	if err != nil {
		return err
	}
	defer drop()
	px, err := startCostProxy(endpoint)
	if err != nil {
		return err
	}
	defer px.Close()
	db := dynamoClient(px.URL)
	l, err := dynamoledger.New(db, table)
	if err != nil {
		return err
	}
	_, prov, _, stop, err := startSim(0)
	if err != nil {
		return err
	}
	defer stop()
	s, err := newSender(l, prov)
	if err != nil {
		return err
	}
	run := testenv.RandomID()
	const n = pathMessages
	next := 0
	batch := func() []notify.Request {
		out := make([]notify.Request, n)
		for i := range out {
			out[i] = request(run, next)
			next++
		}
		return out
	}
	process := func(reqs []notify.Request, want dispatch.Disposition) error {
		for _, r := range reqs {
			if res := s.Process(ctx, r); res.Disposition != want {
				return fmt.Errorf("process %s: status %s (%s), want %s", res.Key, res.Disposition, res.Reason, want)
			}
		}
		return nil
	}
	claim := func(reqs []notify.Request, lease time.Duration) ([]ledger.Claim, error) {
		var cs []ledger.Claim
		for _, r := range reqs {
			e, err := entry(r)
			if err != nil {
				return nil, err
			}
			c, err := l.Claim(ctx, e, lease)
			if err != nil {
				return nil, err
			}
			cs = append(cs, c)
		}
		return cs, nil
	}
	add := func(path, how string) accounting {
		a := px.take(table)
		addCost(rep, "dynamodb", path+": ", fmt.Sprintf("%s; %d messages", how, n), a, n)
		return a
	}

	// Rows that are SENT, for the callback paths below. The first send,
	// duplicate and in-flight paths are the peer section's;
	// sender/integration_test.go asserts their call counts.
	first := batch()
	if err := process(first, dispatch.Sent); err != nil {
		return err
	}

	// Takeover: a stale PENDING claim (its worker died), provider drops repeats.
	stale := batch()
	if _, err := claim(stale, time.Millisecond); err != nil {
		return err
	}
	time.Sleep(20 * time.Millisecond)
	px.take(table)
	if err := process(stale, dispatch.Sent); err != nil {
		return err
	}
	add("takeover", "sender.Process of a request whose row is a stale PENDING claim (fenced takeover, send, mark SENT)")

	// Reconcile: UNCERTAIN rows resent by the reconciler.
	uncertain := batch()
	cs, err := claim(uncertain, time.Minute)
	if err != nil {
		return err
	}
	for _, c := range cs {
		if err := l.Mark(ctx, c, ledger.Outcome{State: ledger.StateUncertain, Reason: "bench: timeout after the request was written"}); err != nil {
			return err
		}
	}
	time.Sleep(20 * time.Millisecond)
	r, err := reconcile.New(reconcile.Config{
		Ledger: l, Providers: map[string]provider.Adapter{"sms": prov}, Renderer: benchRenderer,
		ProviderTimeout: decide.DefaultProviderTimeout, ClaimTimeout: sender.DefaultClaimTimeout,
		Settle: time.Millisecond, PageSize: 100,
	})
	if err != nil {
		return err
	}
	px.take(table)
	rr, err := r.Run(ctx)
	if err != nil {
		return err
	}
	if got := rr.Actions[reconcile.ActionResent]; got != n {
		return fmt.Errorf("reconcile: %d rows resent, want %d (actions %v)", got, n, rr.Actions)
	}
	a := add("reconcile", "one reconcile.Run over UNCERTAIN rows: lookup at the simulator (no record), fenced takeover, resend, mark SENT; includes the run's attention-index Query calls (one per shard page)")
	queries := a.Calls["Query"]
	rep.Add("dynamodb", "reconcile: Query calls per run", float64(queries), "calls/run",
		fmt.Sprintf("attention-index queries of one Run over %d due rows (%d shards, page size 100): a fixed cost per run, whatever the row count", n, ledger.AttentionShards))
	rep.Add("dynamodb", "reconcile: calls per row without the queries", float64(a.calls()-queries)/n, "calls/msg", "the same run, index reads left out")

	// Callback: the webhook's full path for a SENT row, then its duplicate.
	secret := []byte("bench-callback-secret")
	dedup, err := webhook.NewDynamoDedup(db, table, 0, nil)
	if err != nil {
		return err
	}
	h, err := webhook.New(webhook.Config{Ledger: l, Dedup: dedup, HTTPSecret: secret, Logger: discard})
	if err != nil {
		return err
	}
	callbacks := make([]events.LambdaFunctionURLRequest, n)
	for i, req := range first {
		callbacks[i], err = callbackRequest(secret, fmt.Sprintf("evt-cb-%s-%d", run, i), req.Key(), "delivered")
		if err != nil {
			return err
		}
	}
	handle := func(want webhook.Effect) error {
		for _, cb := range callbacks {
			resp, err := h.Handle(ctx, cb)
			if err != nil || resp.StatusCode != 200 || !strings.Contains(resp.Body, string(want)) {
				return fmt.Errorf("webhook: %d %s, %v: want 200 %s", resp.StatusCode, resp.Body, err, want)
			}
		}
		return nil
	}
	px.take(table)
	if err := handle(webhook.Applied); err != nil {
		return err
	}
	add("callback (webhook)", "webhook.Handler.Handle of a signed generic-HTTP \"delivered\" callback for a SENT row: dedup read, ledger read, ApplyDelivery, dedup record")
	if err := handle(webhook.Duplicate); err != nil {
		return err
	}
	add("callback duplicate", "the same callbacks delivered again: stopped by the dedup record")
	for _, req := range stale {
		applied, err := l.ApplyDelivery(ctx, req.Key(), ledger.Delivery{Status: "delivered", Rank: 3, At: time.Now()})
		if err != nil || !applied {
			return fmt.Errorf("ApplyDelivery %s: applied %v, %v", req.Key(), applied, err)
		}
	}
	add("ApplyDelivery alone", "ledger.ApplyDelivery of a higher-ranked status, without the webhook around it")
	return nil
}

// callList names the calls, e.g. "PutItem 20, UpdateItem 20".
func callList(calls map[string]int) string {
	var parts []string
	for _, op := range slices.Sorted(maps.Keys(calls)) {
		parts = append(parts, fmt.Sprintf("%s %d", op, calls[op]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// callbackRequest is a Function URL request carrying a signed generic
// callback (docs/http-provider.md).
func callbackRequest(secret []byte, eventID, key, status string) (events.LambdaFunctionURLRequest, error) {
	body, err := json.Marshal(map[string]string{
		"event_id": eventID, "message_id": "msg_bench", "reference": key,
		"status": status, "timestamp": time.Now().UTC().Format(time.RFC3339),
	})
	if err != nil {
		return events.LambdaFunctionURLRequest{}, err
	}
	var req events.LambdaFunctionURLRequest
	req.RawPath = "/callbacks/http"
	req.RequestContext.HTTP.Method = "POST"
	req.RequestContext.HTTP.Path = req.RawPath
	req.Headers = map[string]string{
		"content-type":         "application/json",
		"x-provider-signature": httpprovider.Sign(secret, time.Now(), body),
	}
	req.Body = string(body)
	return req, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

func compactJSON(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
