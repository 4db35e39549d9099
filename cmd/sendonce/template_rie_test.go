package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/provider/simulator"
	"github.com/sendonce/sendonce/internal/rie"
	"github.com/sendonce/sendonce/internal/testenv"
	"github.com/sendonce/sendonce/internal/testsupport"
	"github.com/sendonce/sendonce/notify"
)

// TestStoredTemplatesEndToEnd runs the templates path through the real
// sender bootstrap under the Lambda RIE: a template put with this CLI, a
// request naming it, the HTTP provider simulator receiving the rendered
// text; a second put is used by the next message; another tenant's
// request for the same name is a configuration error (the record is
// retried, no row is written and nothing is sent, never FAILED: a put
// of the template lets the retry send it); and a request with
// pre-rendered content is delivered exactly as given.
func TestStoredTemplatesEndToEnd(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	sim, simURL := testsupport.Simulator(t, simulator.Options{Token: "e2e-token"})
	fn := rie.Start(t, rie.Build(t, "sender"), map[string]string{
		"AWS_LAMBDA_FUNCTION_TIMEOUT":  "30",
		"SENDONCE_TABLE":               b.table,
		"SENDONCE_DLQ_URL":             "http://unused.invalid/dlq", // every request here is valid
		"SENDONCE_SMS_PROVIDER":        "http",
		"SENDONCE_EMAIL_PROVIDER":      "http",
		"SENDONCE_HTTP_PROVIDER_URL":   simURL,
		"SENDONCE_HTTP_PROVIDER_TOKEN": "e2e-token",
		"SENDONCE_TEMPLATE_CACHE":      "0", // a new version is used by the very next message
		"AWS_ENDPOINT_URL_DYNAMODB":    testenv.DynamoDBEndpoint(t),
	})
	led := b.ledger(t)

	put := func(text string) {
		t.Helper()
		r := b.run(t, "template", "put", "--tenant", "acme", "--name", "shipped", "--channel", "sms", "--text", writeFile(t, "t.txt", text))
		if r.code != exitOK {
			t.Fatalf("template put: exit %d, stderr %q", r.code, r.stderr)
		}
	}
	// invoke runs the sender on one request and returns its answer.
	invoke := func(req notify.Request) string {
		t.Helper()
		body, _ := json.Marshal(req)
		payload, _ := json.Marshal(events.SQSEvent{Records: []events.SQSMessage{{
			MessageId: "m-" + req.EventID, ReceiptHandle: "rh", Body: string(body), EventSource: "aws:sqs",
			Attributes: map[string]string{"ApproximateReceiveCount": "1"},
		}}})
		ictx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		out, err := fn.Invoke(ictx, payload)
		if err != nil {
			t.Fatalf("invoke: %v", err)
		}
		return string(out)
	}
	// send invokes the sender with one request and returns its row.
	send := func(tenant, event string, content *notify.Content) (ledger.Record, simulator.Message) {
		t.Helper()
		req := notify.Request{TenantID: tenant, EventID: event, Channel: notify.ChannelSMS, Template: "shipped",
			Recipient: notify.Recipient{ID: "user-42", Phone: "+15551234567"}, Data: map[string]any{"order_id": "A-1001"}, Content: content}
		if out := invoke(req); strings.Contains(out, "itemIdentifier") {
			t.Fatalf("sender reported the record failed: %s", out)
		}
		row, err := led.Get(ctx, req.Key())
		if err != nil {
			t.Fatalf("ledger row of %s: %v", event, err)
		}
		var got simulator.Message
		for _, m := range sim.Messages() {
			if m.Reference == req.Key() {
				got = m
			}
		}
		return row, got
	}

	put("Your order {{.order_id}} has shipped.")
	row, msg := send("acme", "evt-1", nil)
	if row.State != ledger.StateSent || msg.Body != "Your order A-1001 has shipped." || row.TemplateVersion != 1 {
		t.Fatalf("first message: row %s v%d, provider got %q", row.State, row.TemplateVersion, msg.Body)
	}

	put("Order {{.order_id}} is on its way (v2).")
	row, msg = send("acme", "evt-2", nil)
	if row.State != ledger.StateSent || msg.Body != "Order A-1001 is on its way (v2)." || row.TemplateVersion != 2 {
		t.Fatalf("after the second put: row %s v%d, provider got %q", row.State, row.TemplateVersion, msg.Body)
	}
	if r := b.run(t, "inspect", row.Key); r.code != exitOK || !strings.Contains(r.stdout, `"template_version": 2,`) {
		t.Errorf("inspect: exit %d stdout %q; want template_version 2", r.code, r.stdout)
	}

	other := notify.Request{TenantID: "globex", EventID: "evt-1", Channel: notify.ChannelSMS, Template: "shipped",
		Recipient: notify.Recipient{ID: "user-42", Phone: "+15551234567"}, Data: map[string]any{"order_id": "A-1001"}}
	if out := invoke(other); !strings.Contains(out, `"itemIdentifier":"m-evt-1"`) {
		t.Fatalf("other tenant: sender answered %s; want the record retried (a template not stored is a configuration error)", out)
	}
	if r, err := led.Get(ctx, other.Key()); err == nil {
		t.Fatalf("other tenant: a row %s %q was written; want none until the template is stored", r.State, r.Reason)
	}
	for _, m := range sim.Messages() {
		if m.Reference == other.Key() {
			t.Fatalf("other tenant: the provider got %+v for a template that is not stored", m)
		}
	}

	given := &notify.Content{Text: "  Pre-rendered: {{.not_a_template}} ✓\n"}
	row, msg = send("globex", "evt-2", given)
	if row.State != ledger.StateSent || msg.Body != given.Text || row.TemplateVersion != 0 {
		t.Fatalf("pre-rendered: row %s v%d, provider got %q; want %q", row.State, row.TemplateVersion, msg.Body, given.Text)
	}
}
