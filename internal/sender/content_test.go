package sender

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/dispatch"
	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/ledger/memledger"
	"github.com/sendonce/sendonce/internal/render"
	"github.com/sendonce/sendonce/internal/templates"
	"github.com/sendonce/sendonce/internal/templates/memtemplates"
	"github.com/sendonce/sendonce/internal/testsupport"
	"github.com/sendonce/sendonce/notify"
	"github.com/sendonce/sendonce/provider"
	"github.com/sendonce/sendonce/provider/providertest"
)

// brokenStore fails every read, as an unreachable table does.
type brokenStore struct{ templates.Store }

func (brokenStore) Resolve(context.Context, string, string, string, []string) (templates.Template, error) {
	return templates.Template{}, errors.New("dial tcp: connection refused")
}

func contentSender(t *testing.T, store templates.Store) (*Sender, ledger.Ledger, *providertest.Fake) {
	t.Helper()
	l, p := memledger.New(memledger.Config{}), &providertest.Fake{}
	s, err := New(Config{
		Dispatcher: testsupport.Dispatcher(t, dispatch.Dispatcher{
			Ledger:          l,
			Providers:       map[string]provider.Adapter{"sms": p, "email": p},
			Renderer:        render.New(store, render.Config{CacheTTL: -1}),
			ProviderTimeout: 5 * time.Second,
			ClaimTimeout:    time.Minute,
		}),
		DeadLetters: &fakeDLQ{},
	})
	if err != nil {
		t.Fatal(err)
	}
	return s, l, p
}

func smsRequest(tenant, event string) notify.Request {
	return notify.Request{TenantID: tenant, EventID: event, Channel: notify.ChannelSMS, Template: "greeting", Class: notify.ClassTransactional,
		Recipient: notify.Recipient{ID: "u1", Phone: "+15551234567"}, Locale: "pt-BR", Data: map[string]any{"name": "Ana"}}
}

func TestStoredTemplates(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	store := memtemplates.New(memtemplates.Config{})
	put := func(tenant, locale, text string) {
		t.Helper()
		if _, err := store.Put(ctx, templates.Template{ID: templates.ID{Tenant: tenant, Name: "greeting", Channel: "sms", Locale: locale}, Text: text}); err != nil {
			t.Fatal(err)
		}
	}
	put("acme", "", "Hello {{.name}}")
	put("acme", "pt", "Olá {{.name}}")
	s, l, p := contentSender(t, store)

	res := s.Process(ctx, smsRequest("acme", "e1"))
	if res.Disposition != dispatch.Sent || p.Sent()[0].Body != "Olá Ana" {
		t.Fatalf("first = %+v, sent %+v", res, p.Sent())
	}
	row, _ := l.Get(ctx, res.Key)
	if row.TemplateVersion != 1 || row.TemplateLocale != "pt" {
		t.Errorf("row template = v%d %q, want v1 pt", row.TemplateVersion, row.TemplateLocale)
	}

	// A new version is used by the next message and recorded.
	put("acme", "pt", "Oi {{.name}}")
	res = s.Process(ctx, smsRequest("acme", "e2"))
	if res.Disposition != dispatch.Sent || p.Sent()[1].Body != "Oi Ana" {
		t.Fatalf("second = %+v, sent %+v", res, p.Sent())
	}
	if row, _ := l.Get(ctx, res.Key); row.TemplateVersion != 2 {
		t.Errorf("row version = %d, want 2", row.TemplateVersion)
	}

	// Another tenant's request for the same name is an unknown template:
	// a configuration error, retried and never FAILED, nothing sent.
	res = s.Process(ctx, smsRequest("other", "e1"))
	if res.Disposition != dispatch.Retry || res.Reason != "config: render greeting for sms: unknown template" {
		t.Fatalf("other tenant = %+v, want retry: unknown template", res)
	}
	if _, err := l.Get(ctx, res.Key); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("other tenant row: %v, want none", err)
	}

	// A missing parameter is FAILED with its name.
	req := smsRequest("acme", "e3")
	req.Data = nil
	if res := s.Process(ctx, req); res.Disposition != dispatch.Failed || !strings.Contains(res.Reason, `no entry for key "name"`) {
		t.Errorf("missing param = %+v", res)
	}
	if len(p.Sent()) != 2 {
		t.Errorf("sent %d messages, want 2", len(p.Sent()))
	}
}

func TestStoreUnavailableRetries(t *testing.T) {
	t.Parallel()
	s, l, p := contentSender(t, brokenStore{memtemplates.New(memtemplates.Config{})})
	res := s.Process(t.Context(), smsRequest("acme", "e1"))
	if res.Disposition != dispatch.Retry {
		t.Fatalf("status = %v, want retry (the store's failure is not the message's)", res)
	}
	if _, err := l.Get(t.Context(), res.Key); !errors.Is(err, ledger.ErrNotFound) || p.Calls() != 0 {
		t.Errorf("row err = %v, provider calls = %d; want no claim and no send", err, p.Calls())
	}
}

func TestPreRenderedContentAsGiven(t *testing.T) {
	t.Parallel()
	s, l, p := contentSender(t, memtemplates.New(memtemplates.Config{})) // no templates at all
	req := notify.Request{TenantID: "acme", EventID: "e1", Channel: notify.ChannelEmail, Template: "receipt", Class: notify.ClassTransactional,
		Recipient: notify.Recipient{ID: "u1", Email: "ana@example.com"},
		Content:   &notify.Content{Subject: "Receipt {{.n}}", Text: "Total: 10 €\n", HTML: "<p>Total: <b>10 €</b></p>"}}
	res := s.Process(t.Context(), req)
	if res.Disposition != dispatch.Sent {
		t.Fatalf("status = %+v", res)
	}
	got := p.Sent()[0]
	if got.Subject != req.Content.Subject || got.Body != req.Content.Text || got.HTML != req.Content.HTML {
		t.Errorf("sent %q / %q / %q, want the content as given", got.Subject, got.Body, got.HTML)
	}
	if row, _ := l.Get(t.Context(), res.Key); row.TemplateVersion != 0 || row.Template != "receipt" {
		t.Errorf("row = v%d %q, want version 0 and the purpose receipt", row.TemplateVersion, row.Template)
	}
}

// TestRowHoldsRenderInputs: a stored template's row holds its version,
// locale and data, never the rendered text, and a resend renders that
// version again, to the same bytes, even after a newer version was put.
func TestRowHoldsRenderInputs(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	store := memtemplates.New(memtemplates.Config{})
	put := func(text, html string) {
		t.Helper()
		if _, err := store.Put(ctx, templates.Template{ID: templates.ID{Tenant: "acme", Name: "greeting", Channel: "email"},
			Subject: "Hi {{.name}}", Text: text, HTML: html}); err != nil {
			t.Fatal(err)
		}
	}
	put("Hello {{.name}}, {{.n}}", "<p>Hello <b>{{.name}}</b>, {{.n}}</p>")
	s, l, p := contentSender(t, store)
	fail := true
	p.SendFunc = func(context.Context, provider.Message) (provider.Receipt, error) {
		if fail {
			fail = false
			return provider.Receipt{}, providertest.Error(provider.Transient, "503")
		}
		return provider.Receipt{MessageID: "m1"}, nil
	}
	req := notify.Request{TenantID: "acme", EventID: "e1", Channel: notify.ChannelEmail, Template: "greeting", Class: notify.ClassTransactional,
		Recipient: notify.Recipient{ID: "u1", Email: "ana@example.com"}, Data: map[string]any{"name": "<Ana>", "n": json.Number("1.50")}}
	if res := s.Process(ctx, req); res.Disposition != dispatch.Retry {
		t.Fatalf("first = %+v, want retry after a transient error", res)
	}
	row, err := l.Get(ctx, req.Key())
	if err != nil {
		t.Fatal(err)
	}
	if row.Subject != "" || row.Body != "" || row.HTML != "" || row.TemplateVersion != 1 || row.Data != `{"n":1.50,"name":"<Ana>"}` {
		t.Errorf("row holds %q / %q / %q, v%d, data %s; want no text, v1 and the data", row.Subject, row.Body, row.HTML, row.TemplateVersion, row.Data)
	}
	put("Changed {{.name}}", "<p>Changed</p>") // version 2: not this message's
	if res := s.Process(ctx, req); res.Disposition != dispatch.Sent {
		t.Fatalf("redelivery = %+v, want sent", res)
	}
	sent := p.Sent()
	if len(sent) != 2 || sent[1].Subject != sent[0].Subject || sent[1].Body != sent[0].Body || sent[1].HTML != sent[0].HTML {
		t.Fatalf("sent %+v, want the resend to carry the first attempt's bytes", sent)
	}
	if sent[0].Body != "Hello <Ana>, 1.50" || sent[0].HTML != "<p>Hello <b>&lt;Ana&gt;</b>, 1.50</p>" {
		t.Errorf("first attempt sent %q / %q", sent[0].Body, sent[0].HTML)
	}
	if row, _ := l.Get(ctx, req.Key()); row.State != ledger.StateSent || row.Data != "" {
		t.Errorf("final row = %s, data %q; want SENT without data", row.State, row.Data)
	}
}
