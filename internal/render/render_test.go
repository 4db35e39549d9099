package render_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/render"
	"github.com/sendonce/sendonce/internal/render/rendertest"
	"github.com/sendonce/sendonce/internal/templates"
	"github.com/sendonce/sendonce/internal/templates/memtemplates"
	"github.com/sendonce/sendonce/notify"
)

func TestRenderExamples(t *testing.T) {
	t.Parallel()
	r := rendertest.Examples(t, "acme")
	tests := []struct {
		name, tmpl, channel, locale string
		data                        map[string]any
		wantSubject, wantBody       string
		wantHTML                    string
		wantErr                     error
	}{
		{name: "SMS", tmpl: "order_shipped", channel: "sms", data: map[string]any{"order_id": "A-1001"},
			wantBody: "Your order A-1001 has shipped."},
		{name: "SMSOptionalParam", tmpl: "order_shipped", channel: "sms", data: map[string]any{"order_id": "A-1", "tracking_url": "https://t.example/1"},
			wantBody: "Your order A-1 has shipped. Track it: https://t.example/1"},
		{name: "EmailHasSubjectAndHTML", tmpl: "order_shipped", channel: "email", data: map[string]any{"order_id": "<A-1001>"},
			wantSubject: "Your order <A-1001> has shipped", wantBody: "Hello,\n\nyour order <A-1001> is on its way.\n\nThank you for your order.",
			wantHTML: "<strong>&lt;A-1001&gt;</strong>"},
		{name: "LocaleRegionFallsBackToLanguage", tmpl: "order_shipped", channel: "sms", locale: "es-MX", data: map[string]any{"order_id": "B-2"},
			wantBody: "Tu pedido B-2 ha sido enviado."},
		{name: "UnknownLocaleFallsBackToDefault", tmpl: "order_shipped", channel: "sms", locale: "de", data: map[string]any{"order_id": "B-2"},
			wantBody: "Your order B-2 has shipped."},
		{name: "OTPDefaultMinutes", tmpl: "otp", channel: "sms", data: map[string]any{"code": "123456"},
			wantBody: "123456 is your verification code. It expires in 10 minutes. Do not share it."},
		{name: "MissingParam", tmpl: "order_shipped", channel: "sms", data: nil, wantErr: render.ErrMissingParam},
		{name: "UnknownTemplate", tmpl: "nope", channel: "sms", wantErr: render.ErrUnknownTemplate},
		{name: "TemplateNotForChannel", tmpl: "welcome", channel: "sms", wantErr: render.ErrUnknownTemplate},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := r.Render(t.Context(), render.Input{Tenant: "acme", Template: tt.tmpl, Channel: tt.channel, Locale: tt.locale, Data: tt.data})
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Render error = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			if got.Subject != tt.wantSubject || got.Body != tt.wantBody || !strings.Contains(got.HTML, tt.wantHTML) || got.TemplateVersion != 1 {
				t.Errorf("Render = %+v, want %q / %q / HTML containing %q, version 1", got, tt.wantSubject, tt.wantBody, tt.wantHTML)
			}
		})
	}
}

func TestMissingParamNamesIt(t *testing.T) {
	t.Parallel()
	_, err := rendertest.Examples(t, "acme").Render(t.Context(), render.Input{Tenant: "acme", Template: "otp", Channel: "sms", Data: map[string]any{}})
	if got, want := err.Error(), `render otp for sms: template parameter missing or invalid: text: map has no entry for key "code"`; got != want {
		t.Errorf("err = %q, want %q", got, want)
	}
}

func TestTenantIsolation(t *testing.T) {
	t.Parallel()
	r := rendertest.Examples(t, "tenant-a")
	_, err := r.Render(t.Context(), render.Input{Tenant: "tenant-b", Template: "otp", Channel: "sms", Data: map[string]any{"code": "1"}})
	if !errors.Is(err, render.ErrUnknownTemplate) || err.Error() != "render otp for sms: unknown template" {
		t.Fatalf("tenant-b err = %v, want unknown template", err)
	}
}

func TestSubjectInjectionRejected(t *testing.T) {
	t.Parallel()
	s := memtemplates.New(memtemplates.Config{})
	if _, err := s.Put(t.Context(), templates.Template{ID: templates.ID{Tenant: "a", Name: "x", Channel: "email"}, Subject: "{{.s}}", Text: "body"}); err != nil {
		t.Fatal(err)
	}
	_, err := render.New(s, render.Config{}).Render(t.Context(), render.Input{Tenant: "a", Template: "x", Channel: "email", Data: map[string]any{"s": "hi\nBcc: evil@example.com"}})
	if !errors.Is(err, render.ErrMissingParam) {
		t.Fatalf("err = %v, want ErrMissingParam", err)
	}
}

func TestRenderRequestContentAsGiven(t *testing.T) {
	t.Parallel()
	req := notify.Request{TenantID: "nobody", Template: "no_such_template", Channel: notify.ChannelEmail,
		Content: &notify.Content{Subject: "S {{.x}}", Text: "  text\n\n", HTML: "<p>{{.x}}</p>"}}
	got, err := rendertest.Examples(t).RenderRequest(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if want := (render.Rendered{Subject: "S {{.x}}", Body: "  text\n\n", HTML: "<p>{{.x}}</p>"}); got != want {
		t.Errorf("RenderRequest = %+v, want %+v", got, want)
	}
}

// countingStore counts Resolve calls and can fail them.
type countingStore struct {
	templates.Store
	resolves atomic.Int64
	fail     atomic.Bool
}

func (c *countingStore) Resolve(ctx context.Context, tenant, name, channel string, locales []string) (templates.Template, error) {
	c.resolves.Add(1)
	if c.fail.Load() {
		return templates.Template{}, errors.New("connection refused")
	}
	return c.Store.Resolve(ctx, tenant, name, channel, locales)
}

func TestCache(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	put := func(s templates.Store, text string) {
		t.Helper()
		if _, err := s.Put(ctx, templates.Template{ID: templates.ID{Tenant: "a", Name: "n", Channel: "sms"}, Text: text}); err != nil {
			t.Fatal(err)
		}
	}
	in := render.Input{Tenant: "a", Template: "n", Channel: "sms", Locale: "pt-BR"}

	t.Run("CachedForTTL", func(t *testing.T) {
		t.Parallel()
		store := &countingStore{Store: memtemplates.New(memtemplates.Config{})}
		now := time.Unix(1000, 0)
		r := render.New(store, render.Config{CacheTTL: time.Minute, Now: func() time.Time { return now }})
		if _, err := r.Render(ctx, in); !errors.Is(err, render.ErrUnknownTemplate) {
			t.Fatalf("before put: %v", err)
		}
		put(store, "v1")
		// A miss is not cached: the put takes effect at once.
		if m, err := r.Render(ctx, in); err != nil || m.Body != "v1" {
			t.Fatalf("after put = %+v, %v", m, err)
		}
		put(store, "v2")
		if m, _ := r.Render(ctx, in); m.Body != "v1" || m.TemplateVersion != 1 {
			t.Errorf("within the TTL = %+v, want the cached v1", m)
		}
		now = now.Add(time.Minute)
		if m, _ := r.Render(ctx, in); m.Body != "v2" || m.TemplateVersion != 2 {
			t.Errorf("after the TTL = %+v, want v2", m)
		}
		if got := store.resolves.Load(); got != 3 {
			t.Errorf("Resolve calls = %d, want 3", got)
		}
	})
	t.Run("ZeroDisables", func(t *testing.T) {
		t.Parallel()
		store := &countingStore{Store: memtemplates.New(memtemplates.Config{})}
		r := render.New(store, render.Config{CacheTTL: -1})
		put(store, "v1")
		r.Render(ctx, in)
		put(store, "v2")
		if m, _ := r.Render(ctx, in); m.Body != "v2" {
			t.Errorf("uncached = %+v, want v2", m)
		}
	})
	t.Run("StoreDownIsUnavailable", func(t *testing.T) {
		t.Parallel()
		store := &countingStore{Store: memtemplates.New(memtemplates.Config{})}
		store.fail.Store(true)
		_, err := render.New(store, render.Config{}).Render(ctx, in)
		if !errors.Is(err, render.ErrUnavailable) || errors.Is(err, render.ErrUnknownTemplate) {
			t.Errorf("err = %v, want ErrUnavailable only", err)
		}
	})
}

// TestRenderVersion: a resend renders the version its row names, not the
// latest, in that version's locale; a version that is gone is an unknown
// template, another tenant's version is not visible.
func TestRenderVersion(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	store := memtemplates.New(memtemplates.Config{})
	for _, text := range []string{"v1 {{.name}}", "v2 {{.name}}"} {
		if _, err := store.Put(ctx, templates.Template{ID: templates.ID{Tenant: "acme", Name: "hi", Channel: "sms", Locale: "pt"}, Text: text}); err != nil {
			t.Fatal(err)
		}
	}
	r := render.New(store, render.Config{})
	data := map[string]any{"name": "Ana"}
	for range 2 { // the second render comes from the cache
		m, err := r.RenderVersion(ctx, "acme", "hi", "sms", 1, "pt", data)
		if err != nil || m.Body != "v1 Ana" || m.TemplateVersion != 1 || m.TemplateLocale != "pt" {
			t.Fatalf("RenderVersion(1) = %+v, %v; want v1 Ana", m, err)
		}
	}
	for _, tc := range []struct {
		name, tenant, locale string
		version              int
		want                 error
	}{
		{"Gone", "acme", "pt", 3, render.ErrUnknownTemplate},
		{"OtherLocale", "acme", "", 1, render.ErrUnknownTemplate},
		{"OtherTenant", "other", "pt", 1, render.ErrUnknownTemplate},
		{"NoVersion", "acme", "pt", 0, render.ErrUnknownTemplate},
	} {
		if _, err := r.RenderVersion(ctx, tc.tenant, "hi", "sms", tc.version, tc.locale, data); !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
		}
	}
	if _, err := r.RenderVersion(ctx, "acme", "hi", "sms", 2, "pt", nil); !errors.Is(err, render.ErrMissingParam) {
		t.Errorf("missing data: err = %v, want %v", err, render.ErrMissingParam)
	}
}
