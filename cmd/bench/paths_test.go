package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sendonce/sendonce/internal/ddbfront"
	"github.com/sendonce/sendonce/internal/decide"
	"github.com/sendonce/sendonce/internal/dispatch"
	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/ledger/dynamoledger"
	"github.com/sendonce/sendonce/internal/provider/httpprovider"
	"github.com/sendonce/sendonce/internal/reconcile"
	"github.com/sendonce/sendonce/internal/sender"
	"github.com/sendonce/sendonce/internal/testenv"
	"github.com/sendonce/sendonce/internal/testsupport"
	"github.com/sendonce/sendonce/internal/webhook"
	"github.com/sendonce/sendonce/internal/webhook/dynamodedup"
	"github.com/sendonce/sendonce/notify"
	"github.com/sendonce/sendonce/provider"
)

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

// pathCost is what one message costs on a path: DynamoDB calls, the write
// units DynamoDB Local reports and those real DynamoDB charges (package
// ddbcost, failed conditional writes included).
type pathCost struct {
	calls, localWCU, realWCU float64
}

// TestPathCosts counts, through the peer section's cost proxy, the
// DynamoDB calls and write units per message on the paths of a message's
// life that the peer workload does not run: takeover of a stale claim, a
// reconcile run over UNCERTAIN rows, the webhook's callback for a SENT row
// and its duplicate, ApplyDelivery alone. The counts are exact, so a test
// states them rather than a benchmark measuring them again on every run;
// docs/benchmarks.md quotes them. (The first send, duplicate and in-flight
// paths are the peer section's; internal/sender's
// TestDynamoDBCallsPerMessage asserts their calls.)
func TestPathCosts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	table := testenv.NewTable(t, testenv.DynamoDB(t))
	px, err := ddbfront.New(testenv.DynamoDBEndpoint(t), ddbfront.Options{Cost: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(px.Close)
	db := dynamoClient(px.URL)
	l, err := dynamoledger.New(db, table, dynamoledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	s, prov := simSender(t, l, 0)
	run := testenv.RandomID()
	const n = 20
	next := 0
	batch := func() []notify.Request {
		out := make([]notify.Request, n)
		for i := range out {
			out[i] = request(run, next)
			next++
		}
		return out
	}
	process := func(reqs []notify.Request) {
		t.Helper()
		for _, r := range reqs {
			if res := s.Process(ctx, r); res.Disposition != dispatch.Sent {
				t.Fatalf("process %s: status %s (%s), want sent", res.Key, res.Disposition, res.Reason)
			}
		}
	}
	claim := func(reqs []notify.Request, lease time.Duration) []ledger.Claim {
		t.Helper()
		var cs []ledger.Claim
		for _, r := range reqs {
			e, err := entry(r)
			if err != nil {
				t.Fatal(err)
			}
			c, err := l.Claim(ctx, e, lease)
			if err != nil {
				t.Fatal(err)
			}
			cs = append(cs, c)
		}
		return cs
	}
	check := func(path string, want pathCost) ddbfront.Usage {
		t.Helper()
		a := px.Take(table)
		got := pathCost{float64(a.Total()) / n, a.ReportedWCU / n, float64(a.TableWCU+a.IndexWCU) / n}
		t.Logf("%s: %v calls/msg (%s), write units per msg: DynamoDB Local %v, real DynamoDB %v (table %v + index %v, %v index entries written or removed)%s",
			path, got.calls, callList(a.Calls), got.localWCU, got.realWCU,
			float64(a.TableWCU)/n, float64(a.IndexWCU)/n, float64(a.IndexWrites)/n, largest(a.MaxItem))
		if got != want || a.Errors > 0 {
			t.Errorf("%s: %+v per msg, %d errors; want %+v, none", path, got, a.Errors, want)
		}
		return a
	}

	// Rows that are SENT, for the callback paths below.
	first := batch()
	process(first)

	// Takeover: a stale PENDING claim (its worker died), provider drops
	// repeats. The failed claim 1 unit, the takeover 1 + its attention
	// entry 1, the final mark 1 + the entry's removal 1.
	stale := batch()
	claim(stale, time.Millisecond)
	time.Sleep(20 * time.Millisecond)
	px.Take(table)
	process(stale)
	check("takeover", pathCost{calls: 3, localWCU: 4, realWCU: 5})

	// Reconcile: UNCERTAIN rows resent by the reconciler.
	for _, c := range claim(batch(), time.Minute) {
		if err := l.Mark(ctx, c, ledger.Outcome{State: ledger.StateUncertain, Reason: "bench: timeout after the request was written"}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(20 * time.Millisecond)
	r, err := reconcile.New(reconcile.Config{
		Dispatcher: testsupport.Dispatcher(t, dispatch.Dispatcher{
			Ledger:          l,
			Providers:       map[string]provider.Adapter{"sms": prov},
			Renderer:        benchRenderer,
			ProviderTimeout: decide.DefaultProviderTimeout,
			ClaimTimeout:    sender.DefaultClaimTimeout,
			Settle:          time.Millisecond,
		}),
		PageSize: 100,
	})
	if err != nil {
		t.Fatal(err)
	}
	px.Take(table)
	rr, err := r.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := rr.Actions[reconcile.ActionResent]; got != n {
		t.Fatalf("reconcile: %d rows resent, want %d (actions %v)", got, n, rr.Actions)
	}
	// Lookup at the simulator (no record), fenced takeover, resend, mark
	// SENT, and the run's attention-index queries: one per shard page, a
	// fixed cost per run whatever the row count.
	a := check("reconcile", pathCost{calls: float64(2*n+ledger.AttentionShards) / n, localWCU: 5, realWCU: 5})
	if q := a.Calls["Query"]; q != ledger.AttentionShards || a.Total()-q != 2*n {
		t.Errorf("reconcile: %d Query calls and %d others, want one query per shard (%d) and 2 calls per row", q, a.Total()-q, ledger.AttentionShards)
	}

	// Callback: the webhook's full path for a SENT row (dedup read, ledger
	// read, ApplyDelivery, dedup record), then its duplicate, stopped by
	// the dedup record.
	secret := []byte("bench-callback-secret")
	dedup, err := dynamodedup.New(db, table, dynamodedup.Config{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := webhook.New(webhook.Config{Ledger: l, Dedup: dedup, HTTPSecret: secret, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	callbacks := make([]events.LambdaFunctionURLRequest, n)
	for i, req := range first {
		callbacks[i] = callbackRequest(secret, fmt.Sprintf("evt-cb-%s-%d", run, i), req.Key(), "delivered")
	}
	handle := func(want webhook.Effect) {
		t.Helper()
		for _, cb := range callbacks {
			resp, err := h.Handle(ctx, cb)
			if err != nil || resp.StatusCode != 200 || !strings.Contains(resp.Body, string(want)) {
				t.Fatalf("webhook: %d %s, %v: want 200 %s", resp.StatusCode, resp.Body, err, want)
			}
		}
	}
	px.Take(table)
	handle(webhook.Applied)
	check("callback (webhook)", pathCost{calls: 4, localWCU: 2, realWCU: 2})
	handle(webhook.Duplicate)
	check("callback duplicate", pathCost{calls: 1})

	// ApplyDelivery of a higher-ranked status, without the webhook.
	for _, req := range stale {
		applied, err := l.ApplyDelivery(ctx, req.Key(), ledger.Delivery{Status: "delivered", Rank: 3, At: time.Now()})
		if err != nil || !applied {
			t.Fatalf("ApplyDelivery %s: applied %v, %v", req.Key(), applied, err)
		}
	}
	check("ApplyDelivery alone", pathCost{calls: 1, localWCU: 1, realWCU: 1})
}

// simSender returns a sender over l and its provider, the simulator
// answering after latency, stopped when tb ends.
func simSender(tb testing.TB, l ledger.Ledger, latency time.Duration) (*sender.Sender, *httpprovider.Provider) {
	tb.Helper()
	prov, _, stop, err := startSim(latency)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(stop)
	s, err := newSender(l, prov)
	if err != nil {
		tb.Fatal(err)
	}
	return s, prov
}
