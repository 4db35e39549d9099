package simtest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/render"
	"github.com/sendonce/sendonce/internal/templates"
	"github.com/sendonce/sendonce/internal/templates/memtemplates"
)

// The workload's tenant and template.
const (
	tenant   = "acme"
	template = "order_shipped"
)

// examples are the example templates of the workload's template
// (version 1 of each), validated once.
var examples = func() []templates.Template {
	all, err := templates.Examples(tenant)
	if err != nil {
		panic(err)
	}
	var out []templates.Template
	for _, t := range all {
		if t.Name == template {
			out = append(out, t)
		}
	}
	return out
}()

// newTemplates returns the tenant's template store, holding version 1 of
// the workload's template.
func newTemplates() *memtemplates.Store {
	s := memtemplates.New(memtemplates.Config{})
	for _, t := range examples {
		if _, err := s.Put(context.Background(), t); err != nil {
			panic(err)
		}
	}
	return s
}

// renderer is function fn's renderer under deployment d (a container's),
// with the template cache its environment sets (SENDONCE_TEMPLATE_CACHE),
// on the virtual clock: one per function and cache setting.
func (w *World) renderer(fn string, d *deployment) *render.Renderer {
	ttl := d.fn[fn].TemplateCache
	k := fn + "/" + ttl.String()
	if r, ok := w.renderers[k]; ok {
		return r
	}
	r := render.New(w.tmpl, render.Config{CacheTTL: ttl, Now: time.Now})
	w.renderers[k] = r
	return r
}

// Template changes a tenant makes during a run.
const (
	// putReword: a new wording with the same parameters.
	putReword = "reword"
	// putNeedsName: a version that needs a "name" parameter, which some
	// messages' data lacks: it cannot render them.
	putNeedsName = "needs_name"
)

// scheduleTemplatePuts schedules the tenant's template changes: in most
// seeds one to three new versions of order_shipped for some channels, at
// random times while the workload runs; a version that cannot render
// some messages is often followed by one that can again.
func (w *World) scheduleTemplatePuts() {
	r := w.rng
	if r.IntN(10) < 3 {
		return
	}
	for i := range 1 + r.IntN(3) {
		ch := channels[r.IntN(len(channels))]
		kind := putReword
		if r.IntN(2) == 0 {
			kind = putNeedsName
		}
		at := w.t0.Add(time.Duration(r.Int64N(int64(12 * time.Minute))))
		w.addEvent(at, "template put", func() { w.putTemplate(ch, kind, i) })
	}
}

// putTemplate puts the next version of the workload's template for ch.
func (w *World) putTemplate(ch, kind string, n int) {
	t := templates.Template{ID: templates.ID{Tenant: tenant, Name: template, Channel: ch}}
	greet := fmt.Sprintf("Hello (r%d)", n)
	if kind == putNeedsName {
		greet = fmt.Sprintf("Hello {{.name}} (r%d)", n)
	}
	t.Text = greet + ", your order {{.order_id}} has shipped."
	switch ch {
	case "email":
		t.Subject = "Order {{.order_id}} shipped"
	case "push":
		t.Subject = "Shipped"
	}
	got, err := w.tmpl.Put(context.Background(), t)
	if err != nil {
		panic(err)
	}
	w.faults["template_puts"]++
	if kind == putNeedsName {
		w.faults["template_puts_needing_a_parameter"]++
	}
	w.tracef("", "tenant puts %s/%s v%d (%s)", template, ch, got.Version, kind)
}

// pinnedText is the text key's row pins, what every attempt of it must
// send: the row's own content, or its template version rendered on its
// data. ok is false when the row holds no message (its request could not
// be rendered when it was first claimed). w.mu is held.
func (w *World) pinnedText(r ledger.Record) (text string, ok bool) {
	if r.TemplateVersion == 0 {
		return r.Body, r.Body != "" || r.Subject != "" || r.HTML != ""
	}
	if r.Rendered() {
		return r.Body, true
	}
	k := fmt.Sprintf("%s\x00%s\x00%d\x00%s\x00%s", r.Channel, r.Template, r.TemplateVersion, r.TemplateLocale, r.Data)
	if p, ok := w.pinned[k]; ok {
		return p.text, p.ok
	}
	text, ok = w.renderPinned(r)
	w.pinned[k] = pinned{text, ok}
	return text, ok
}

// pinned is a text a row pins, rendered once.
type pinned struct {
	text string
	ok   bool
}

func (w *World) renderPinned(r ledger.Record) (text string, ok bool) {
	var data map[string]any
	if r.Data != "" {
		dec := json.NewDecoder(strings.NewReader(r.Data))
		dec.UseNumber()
		if err := dec.Decode(&data); err != nil {
			return "", false
		}
	}
	t, err := w.tmpl.Get(context.Background(), templates.ID{Tenant: r.Tenant, Name: r.Template, Channel: r.Channel, Locale: r.TemplateLocale}, r.TemplateVersion)
	if err != nil {
		return "", false
	}
	c, err := compiled(t)
	if err != nil {
		return "", false
	}
	_, body, _, err := c.Execute(data)
	return body, err == nil
}

// compiledTemplates caches compiled templates by content across runs
// (every run puts the same few versions).
var compiledTemplates sync.Map // templates.Template (Version, CreatedAt zero) → *templates.Compiled

func compiled(t templates.Template) (*templates.Compiled, error) {
	t.Version, t.CreatedAt = 0, time.Time{}
	if c, ok := compiledTemplates.Load(t); ok {
		return c.(*templates.Compiled), nil
	}
	c, err := templates.Compile(t)
	if err == nil {
		compiledTemplates.Store(t, c)
	}
	return c, err
}
