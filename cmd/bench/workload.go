package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sendonce/sendonce/internal/decide"
	"github.com/sendonce/sendonce/internal/dispatch"
	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/localpipeline"
	"github.com/sendonce/sendonce/internal/provider/httpprovider"
	"github.com/sendonce/sendonce/internal/provider/simulator"
	"github.com/sendonce/sendonce/internal/render"
	"github.com/sendonce/sendonce/internal/sender"
	"github.com/sendonce/sendonce/internal/templates"
	"github.com/sendonce/sendonce/internal/templates/memtemplates"
	"github.com/sendonce/sendonce/notify"
	"github.com/sendonce/sendonce/provider"
)

const simToken = "bench-token"

var discard = slog.New(slog.DiscardHandler)

// startSim serves the generic HTTP provider simulator on loopback with a
// fixed latency per /messages request, and returns an adapter for it and
// its URL.
func startSim(latency time.Duration) (*httpprovider.Provider, string, func(), error) {
	sim := simulator.New(simulator.Options{Token: simToken, Latency: latency})
	srv := httptest.NewServer(sim.Handler())
	stop := func() {
		srv.Close()
		sim.Close()
	}
	p, err := httpprovider.New(httpprovider.Config{BaseURL: srv.URL, Token: simToken, Logger: discard})
	if err != nil {
		stop()
		return nil, "", nil, fmt.Errorf("provider adapter: %w", err)
	}
	return p, srv.URL, stop, nil
}

// benchRenderer renders the example templates of tenant "bench", and
// the 20 KB HTML email of the peer section (largeTemplate), from memory,
// as a warm sender container renders from its cache.
var benchRenderer = func() *render.Renderer {
	s := memtemplates.New(memtemplates.Config{})
	ctx := context.Background()
	if _, err := templates.ImportExamples(ctx, s, "bench"); err != nil {
		panic(err) // the examples are valid (tested in package templates)
	}
	html := "<p>Hello {{.name}}, order {{.order_id}}</p>" + strings.Repeat("<p>bench newsletter paragraph</p>\n", 20*1024/34)
	if _, err := s.Put(ctx, templates.Template{ID: templates.ID{Tenant: "bench", Name: largeTemplate, Channel: "email"},
		Subject: "News for {{.name}}", Text: "Hello {{.name}}, order {{.order_id}}", HTML: html}); err != nil {
		panic(err)
	}
	return render.New(s, render.Config{})
}()

// largeTemplate is the stored email template whose HTML part is 20 KB.
const largeTemplate = "newsletter"

// noDeadLetters rejects every put: the benchmark sends only valid requests.
type noDeadLetters struct{}

func (noDeadLetters) Put(_ context.Context, rec events.SQSMessage, invalid *notify.InvalidError) error {
	return fmt.Errorf("bench: unexpected invalid request %s: %v", rec.MessageId, invalid)
}

// newSender is a sender over l that sends sms and email through p.
func newSender(l ledger.Ledger, p provider.Adapter) (*sender.Sender, error) {
	d, err := dispatch.New(dispatch.Dispatcher{
		Ledger:          l,
		Providers:       map[string]provider.Adapter{"sms": p, "email": p},
		Renderer:        benchRenderer,
		ProviderTimeout: decide.DefaultProviderTimeout,
		ClaimTimeout:    sender.DefaultClaimTimeout,
	})
	if err != nil {
		return nil, err
	}
	return sender.New(sender.Config{Dispatcher: d, DeadLetters: noDeadLetters{}})
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

// requestJSON is req as an SQS message body.
func requestJSON(req notify.Request) (string, error) {
	b, err := json.Marshal(req)
	return string(b), err
}

// callList names the calls, e.g. "PutItem 20, UpdateItem 20".
func callList(calls map[string]int) string { return localpipeline.Counts(calls, " ", ", ") }

// callbackRequest is a Function URL request carrying a signed generic
// callback (docs/http-provider.md).
func callbackRequest(secret []byte, eventID, key, status string) events.LambdaFunctionURLRequest {
	body, _ := json.Marshal(map[string]string{ // strings always encode
		"event_id": eventID, "message_id": "msg_bench", "reference": key,
		"status": status, "timestamp": time.Now().UTC().Format(time.RFC3339),
	})
	r := httptest.NewRequest("POST", "/callbacks/http", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set(httpprovider.SignatureHeader, httpprovider.Sign(secret, time.Now(), body))
	return localpipeline.FunctionURLRequest(r, body, time.Now())
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
