// Package templatestest is the conformance suite every templates.Store
// must pass (package dynamotemplates against DynamoDB Local, package
// memtemplates in memory), so the in-memory store of unit tests cannot
// drift from the real one.
//
//	func TestConformance(t *testing.T) {
//		templatestest.Run(t, func(t *testing.T, now func() time.Time) templates.Store {
//			return memtemplates.New(memtemplates.Config{Now: now})
//		})
//	}
package templatestest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/templates"
	"github.com/sendonce/sendonce/internal/testsupport"
)

// NewStoreFunc builds a fresh, empty store whose clock is now (the time a
// put records as CreatedAt).
type NewStoreFunc func(t *testing.T, now func() time.Time) templates.Store

func sms(tenant, name, locale, text string) templates.Template {
	return templates.Template{ID: templates.ID{Tenant: tenant, Name: name, Channel: "sms", Locale: locale}, Text: text}
}

// Run runs the suite against the stores newStore builds. Every subtest
// builds its own store and runs in parallel.
func Run(t *testing.T, newStore NewStoreFunc) {
	t.Run("PutCreatesVersions", func(t *testing.T) {
		t.Parallel()
		// The store's clock, with a sub-millisecond part and not in UTC:
		// CreatedAt is the put's time in UTC, to the millisecond.
		start := time.Date(2026, 3, 1, 9, 30, 0, 123_456_789, time.FixedZone("BRT", -3*3600))
		var at atomic.Pointer[time.Time]
		at.Store(&start)
		s, ctx := newStore(t, func() time.Time { return *at.Load() }), t.Context()
		created := map[int]time.Time{}
		for v := 1; v <= 3; v++ {
			now := start.Add(time.Duration(v) * 1500 * time.Microsecond)
			at.Store(&now)
			got, err := s.Put(ctx, sms("acme", "hello", "", fmt.Sprintf("v%d {{.name}}", v)))
			if err != nil {
				t.Fatalf("Put %d: %v", v, err)
			}
			want := now.UTC().Truncate(time.Millisecond)
			if got.Version != v || !got.CreatedAt.Equal(want) || got.CreatedAt.Location() != time.UTC {
				t.Fatalf("Put %d = version %d created %v, want version %d created %v", v, got.Version, got.CreatedAt, v, want)
			}
			created[v] = want
		}
		id := templates.ID{Tenant: "acme", Name: "hello", Channel: "sms"}
		latest, err := s.Get(ctx, id, 0)
		if err != nil || latest.Version != 3 || latest.Text != "v3 {{.name}}" {
			t.Fatalf("Get latest = %+v, %v; want version 3", latest, err)
		}
		// Earlier versions stay as they were.
		for v := 1; v <= 3; v++ {
			got, err := s.Get(ctx, id, v)
			if err != nil || got.Version != v || got.Text != fmt.Sprintf("v%d {{.name}}", v) || got.ID != id || !got.CreatedAt.Equal(created[v]) {
				t.Errorf("Get v%d = %+v, %v; want created %v", v, got, err, created[v])
			}
		}
		if _, err := s.Get(ctx, id, 4); !errors.Is(err, templates.ErrNotFound) {
			t.Errorf("Get v4 err = %v, want ErrNotFound", err)
		}
	})

	t.Run("EmailPartsRoundTrip", func(t *testing.T) {
		t.Parallel()
		s, ctx := newStore(t, time.Now), t.Context()
		in := templates.Template{
			ID:      templates.ID{Tenant: "acme", Name: "receipt", Channel: "email", Locale: "pt-BR"},
			Subject: "Recibo {{.id}}", Text: "Olá {{.name}}\n\nlinha 2 ✓", HTML: "<p>Olá {{.name}}</p>",
		}
		put, err := s.Put(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Get(ctx, in.ID, put.Version)
		if err != nil {
			t.Fatal(err)
		}
		if got.Subject != in.Subject || got.Text != in.Text || got.HTML != in.HTML || !got.CreatedAt.Equal(put.CreatedAt) {
			t.Errorf("Get = %+v, want the parts of %+v created %v", got, in, put.CreatedAt)
		}
	})

	t.Run("InvalidRefusedAndNotStored", func(t *testing.T) {
		t.Parallel()
		s, ctx := newStore(t, time.Now), t.Context()
		bad := []templates.Template{
			sms("acme", "x", "", "{{.a"),
			sms("acme", "x", "", "   "),
			sms("ac me", "x", "", "hi"),
			sms("acme", "X Y", "", "hi"),
			sms("acme", "x", "../etc", "hi"),
			{ID: templates.ID{Tenant: "acme", Name: "x", Channel: "fax"}, Text: "hi"},
			{ID: templates.ID{Tenant: "acme", Name: "x", Channel: "email"}, Text: "no subject"},
			{ID: templates.ID{Tenant: "acme", Name: "x", Channel: "sms"}, Subject: "s", Text: "hi"},
			{ID: templates.ID{Tenant: "acme", Name: "x", Channel: "push"}, Text: "hi", HTML: "<p>x</p>"},
			{ID: templates.ID{Tenant: "acme", Name: "x", Channel: "email"}, Subject: "s", Text: "hi", HTML: "{{if}}"},
		}
		for _, b := range bad {
			var ie *templates.InvalidError
			if _, err := s.Put(ctx, b); !errors.As(err, &ie) || !errors.Is(err, templates.ErrInvalid) {
				t.Errorf("Put(%+v) err = %v, want *InvalidError", b, err)
			}
		}
		got, err := s.List(ctx, "acme")
		if err != nil || len(got) != 0 {
			t.Errorf("List after refused puts = %v, %v; want nothing stored", got, err)
		}
	})

	t.Run("ResolveFallsBack", func(t *testing.T) {
		t.Parallel()
		s, ctx := newStore(t, time.Now), t.Context()
		for _, tpl := range []templates.Template{sms("acme", "n", "", "default"), sms("acme", "n", "pt", "pt"), sms("acme", "n", "pt-BR", "pt-BR")} {
			if _, err := s.Put(ctx, tpl); err != nil {
				t.Fatal(err)
			}
		}
		for locale, want := range map[string]string{"pt-BR": "pt-BR", "pt-PT": "pt", "pt": "pt", "de": "default", "": "default"} {
			got, err := s.Resolve(ctx, "acme", "n", "sms", templates.Fallback(locale))
			if err != nil || got.Text != want {
				t.Errorf("Resolve(%q) = %q, %v; want %q", locale, got.Text, err, want)
			}
		}
		if _, err := s.Resolve(ctx, "acme", "n", "email", templates.Fallback("pt-BR")); !errors.Is(err, templates.ErrNotFound) {
			t.Errorf("Resolve of another channel err = %v, want ErrNotFound", err)
		}
		// Without a default, an unmatched locale is unknown.
		if _, err := s.Put(ctx, sms("acme", "only_es", "es", "hola")); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Resolve(ctx, "acme", "only_es", "sms", templates.Fallback("en")); !errors.Is(err, templates.ErrNotFound) {
			t.Errorf("Resolve(en) of an es-only template err = %v, want ErrNotFound", err)
		}
		// Resolve returns the latest version.
		if _, err := s.Put(ctx, sms("acme", "n", "pt", "pt v2")); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Resolve(ctx, "acme", "n", "sms", templates.Fallback("pt-PT")); err != nil || got.Text != "pt v2" || got.Version != 2 {
			t.Errorf("Resolve after a new version = %+v, %v", got, err)
		}
	})

	t.Run("TenantIsolation", func(t *testing.T) {
		t.Parallel()
		s, ctx := newStore(t, time.Now), t.Context()
		if _, err := s.Put(ctx, sms("tenant-a", "secret", "", "A's text")); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Resolve(ctx, "tenant-b", "secret", "sms", templates.Fallback("")); !errors.Is(err, templates.ErrNotFound) {
			t.Errorf("Resolve under tenant-b err = %v, want ErrNotFound", err)
		}
		if _, err := s.Get(ctx, templates.ID{Tenant: "tenant-b", Name: "secret", Channel: "sms"}, 1); !errors.Is(err, templates.ErrNotFound) {
			t.Errorf("Get under tenant-b err = %v, want ErrNotFound", err)
		}
		// A tenant whose id is a prefix of another's sees nothing of it.
		if got, err := s.List(ctx, "tenant"); err != nil || len(got) != 0 {
			t.Errorf("List(tenant) = %v, %v; want empty", got, err)
		}
		if got, err := s.List(ctx, "tenant-b"); err != nil || len(got) != 0 {
			t.Errorf("List(tenant-b) = %v, %v; want empty", got, err)
		}
		// The same name under B is B's own, versioned from 1.
		if got, err := s.Put(ctx, sms("tenant-b", "secret", "", "B's text")); err != nil || got.Version != 1 {
			t.Errorf("Put under tenant-b = %+v, %v; want version 1", got, err)
		}
		if got, err := s.Resolve(ctx, "tenant-a", "secret", "sms", templates.Fallback("")); err != nil || got.Text != "A's text" {
			t.Errorf("Resolve under tenant-a = %+v, %v", got, err)
		}
	})

	t.Run("ListLatestSorted", func(t *testing.T) {
		t.Parallel()
		s, ctx := newStore(t, time.Now), t.Context()
		for _, tpl := range []templates.Template{
			sms("acme", "b", "", "b1"), sms("acme", "a", "es", "a-es"), sms("acme", "a", "", "a1"), sms("acme", "b", "", "b2"),
			{ID: templates.ID{Tenant: "acme", Name: "a", Channel: "email"}, Subject: "s", Text: "e"},
			sms("other", "a", "", "other"),
		} {
			if _, err := s.Put(ctx, tpl); err != nil {
				t.Fatal(err)
			}
		}
		got, err := s.List(ctx, "acme")
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, g := range got {
			ids = append(ids, fmt.Sprintf("%s v%d %s", g.ID, g.Version, g.Text))
		}
		want := []string{"acme/a/email v1 e", "acme/a/sms v1 a1", "acme/a/sms/es v1 a-es", "acme/b/sms v2 b2"}
		if !slices.Equal(ids, want) {
			t.Errorf("List = %q, want %q", ids, want)
		}
	})

	t.Run("ConcurrentPutsGetDistinctVersions", func(t *testing.T) {
		t.Parallel()
		s, ctx := newStore(t, time.Now), t.Context()
		const n = 6
		var (
			mu       sync.Mutex
			versions []int
		)
		testsupport.AtOnce(n, func(i int) {
			got, err := s.Put(ctx, sms("acme", "race", "", fmt.Sprintf("text %d", i)))
			if err != nil {
				t.Errorf("Put %d: %v", i, err)
				return
			}
			mu.Lock()
			versions = append(versions, got.Version)
			mu.Unlock()
		})
		slices.Sort(versions)
		if want := []int{1, 2, 3, 4, 5, 6}; !slices.Equal(versions, want) {
			t.Fatalf("versions = %v, want %v", versions, want)
		}
		for v := 1; v <= n; v++ {
			if _, err := s.Get(ctx, templates.ID{Tenant: "acme", Name: "race", Channel: "sms"}, v); err != nil {
				t.Errorf("Get v%d: %v", v, err)
			}
		}
	})

	t.Run("ImportExamples", func(t *testing.T) {
		t.Parallel()
		s, ctx := newStore(t, time.Now), t.Context()
		got, err := templates.ImportExamples(ctx, s, "acme")
		if err != nil {
			t.Fatal(err)
		}
		listed, err := s.List(ctx, "acme")
		if err != nil || len(listed) != len(got) || len(got) < 8 {
			t.Fatalf("List after import = %d templates, %v; imported %d", len(listed), err, len(got))
		}
		again, err := templates.ImportExamples(ctx, s, "acme")
		if err != nil || again[0].Version != 2 {
			t.Errorf("second import = %v, %v; want version 2", again, err)
		}
	})
}
