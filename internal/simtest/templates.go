package simtest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
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

// newTemplates returns the tenant's template store, holding version 1 of
// each example template (the workload uses order_shipped).
func newTemplates() *memtemplates.Store {
	s := memtemplates.New(memtemplates.Config{})
	must(templates.ImportExamples(context.Background(), s, tenant))
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

// scheduleTemplatePuts schedules the tenant's template changes: in most
// seeds one to three new versions of order_shipped for some channels, at
// random times while the workload runs: a new wording with the same
// parameters, or a version that needs a "name", which some messages' data
// lacks (it cannot render them), often followed by one that can again.
func (w *World) scheduleTemplatePuts() {
	r := w.rng
	if r.IntN(10) < 3 {
		return
	}
	for i := range 1 + r.IntN(3) {
		ch := channels[r.IntN(len(channels))]
		needsName := r.IntN(2) == 0
		at := w.t0.Add(time.Duration(r.Int64N(int64(12 * time.Minute))))
		w.addEvent(at, func() { w.putTemplate(ch, needsName, i) })
	}
}

// putTemplate puts the next version of the workload's template for ch.
func (w *World) putTemplate(ch string, needsName bool, n int) {
	t := templates.Template{ID: templates.ID{Tenant: tenant, Name: template, Channel: ch}}
	t.Text = fmt.Sprintf("Hello (r%d), your order {{.order_id}} has shipped.", n)
	if needsName {
		t.Text = fmt.Sprintf("Hello {{.name}} (r%d), your order {{.order_id}} has shipped.", n)
	}
	switch ch {
	case "email":
		t.Subject = "Order {{.order_id}} shipped"
	case "push":
		t.Subject = "Shipped"
	}
	got := must(w.tmpl.Put(context.Background(), t))
	w.faults["template_puts"]++
	if needsName {
		w.faults["template_puts_needing_a_parameter"]++
	}
	w.tracef("", "tenant puts %s/%s v%d (needs a name: %v)", template, ch, got.Version, needsName)
}

// pinnedText is the text key's row pins, what every attempt of it must
// send: the row's own content, or its template version rendered on its
// data (render.RenderVersion, whose tests check it renders the version
// asked, not the latest). ok is false when the row holds no message (its
// request could not be rendered when it was first claimed). w.mu is held.
func (w *World) pinnedText(r ledger.Record) (text string, ok bool) {
	if r.TemplateVersion == 0 {
		return r.Body, r.Body != "" || r.Subject != "" || r.HTML != ""
	}
	if r.Rendered() {
		return r.Body, true
	}
	var data map[string]any
	dec := json.NewDecoder(strings.NewReader(r.Data))
	dec.UseNumber()
	if r.Data != "" && dec.Decode(&data) != nil {
		return "", false
	}
	m, err := w.truthRender.RenderVersion(context.Background(), r.Tenant, r.Template, r.Channel, r.TemplateVersion, r.TemplateLocale, data)
	return m.Body, err == nil
}
