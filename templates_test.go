package sendonce_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce"
	"github.com/sendonce/sendonce/internal/testenv"
	"github.com/sendonce/sendonce/notify"
	"github.com/sendonce/sendonce/provider/providertest"
)

// TestTemplates puts, reads and renders templates through the public API,
// on the memory ledger and on DynamoDB Local, and sends with them: the
// row records the version, and a request whose template is missing is a
// configuration error (Retry, no row), never FAILED.
func TestTemplates(t *testing.T) {
	for name, open := range map[string]func(t *testing.T) *sendonce.Ledger{
		"Memory": func(*testing.T) *sendonce.Ledger { return sendonce.NewMemoryLedger() },
		"DynamoDB": func(t *testing.T) *sendonce.Ledger {
			db := testenv.DynamoDB(t)
			l, err := sendonce.NewDynamoLedger(db, testenv.NewTable(t, db), 0)
			if err != nil {
				t.Fatal(err)
			}
			return l
		},
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			l := open(t)
			id := sendonce.TemplateID{Tenant: "acme", Name: "order_shipped", Channel: notify.ChannelSMS}
			v1, err := l.PutTemplate(ctx, sendonce.Template{TemplateID: id, Text: "Order {{.order_id}} shipped."})
			if err != nil || v1.Version != 1 {
				t.Fatalf("PutTemplate = %+v, %v; want version 1", v1, err)
			}
			if _, err := l.PutTemplate(ctx, sendonce.Template{TemplateID: id, Subject: "no subject on sms", Text: "x"}); !errors.Is(err, sendonce.ErrInvalidTemplate) {
				t.Errorf("PutTemplate of an sms with a subject: %v, want ErrInvalidTemplate", err)
			}

			p := &providertest.Fake{ProviderName: "gw"}
			s, err := sendonce.NewSender(sendonce.SenderConfig{Ledger: l, Routes: sendonce.Routes{notify.ChannelSMS: {p}}, TemplateCacheTTL: -1})
			if err != nil {
				t.Fatal(err)
			}
			req := notify.Request{TenantID: "acme", EventID: "A-1", Channel: notify.ChannelSMS, Template: "order_shipped",
				Recipient: notify.Recipient{ID: "u1", Phone: "+15551234567"}, Data: map[string]any{"order_id": "A-1"}}
			if res := s.Send(ctx, req, time.Time{}); res.Disposition != sendonce.Sent || p.Sent()[0].Body != "Order A-1 shipped." {
				t.Fatalf("Send = %+v, sent %+v", res, p.Sent())
			}
			if row, err := l.Get(ctx, req.Key()); err != nil || row.TemplateVersion != 1 {
				t.Errorf("row = %+v, %v; want template version 1", row, err)
			}

			if _, err := l.PutTemplate(ctx, sendonce.Template{TemplateID: id, Text: "Shipped: {{.order_id}}"}); err != nil {
				t.Fatal(err)
			}
			if got, err := l.GetTemplate(ctx, id, 1); err != nil || got.Text != "Order {{.order_id}} shipped." {
				t.Errorf("GetTemplate(1) = %+v, %v", got, err)
			}
			if got, err := l.GetTemplate(ctx, id, 0); err != nil || got.Version != 2 {
				t.Errorf("GetTemplate(latest) = %+v, %v; want version 2", got, err)
			}
			if list, err := l.Templates(ctx, "acme"); err != nil || len(list) != 1 || list[0].Version != 2 {
				t.Errorf("Templates = %+v, %v; want version 2 alone", list, err)
			}
			if _, err := l.GetTemplate(ctx, id, 9); !errors.Is(err, sendonce.ErrTemplateNotFound) {
				t.Errorf("GetTemplate(9): %v, want ErrTemplateNotFound", err)
			}
			if r, err := l.Render(ctx, req); err != nil || r.Text != "Shipped: A-1" || r.TemplateVersion != 2 {
				t.Errorf("Render = %+v, %v", r, err)
			}
			noData := req
			noData.Data = nil
			if _, err := l.Render(ctx, noData); !errors.Is(err, sendonce.ErrTemplateParameter) {
				t.Errorf("Render without data: %v, want ErrTemplateParameter", err)
			}

			missing := req
			missing.Template, missing.EventID = "no_such_template", "A-2"
			if _, err := l.Render(ctx, missing); !errors.Is(err, sendonce.ErrTemplateNotFound) {
				t.Errorf("Render of a missing template: %v, want ErrTemplateNotFound", err)
			}
			res := s.Send(ctx, missing, time.Time{})
			if res.Disposition != sendonce.Retry || !strings.HasPrefix(res.Reason, "config: ") {
				t.Errorf("Send of a missing template = %+v, want Retry with a configuration error", res)
			}
			if _, err := l.Get(ctx, missing.Key()); !errors.Is(err, sendonce.ErrNotFound) {
				t.Errorf("a row for a missing template's request: %v", err)
			}
		})
	}
}
