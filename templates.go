package sendonce

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sendonce/sendonce/internal/render"
	"github.com/sendonce/sendonce/internal/templates"
	"github.com/sendonce/sendonce/notify"
)

// TemplateID names a stored template: every version of it shares the ID
// (docs/templates.md).
type TemplateID struct {
	Tenant  string
	Name    string
	Channel notify.Channel
	// Locale is the variant's language tag ("pt-BR"); "" for the
	// template's default.
	Locale string
}

// Template is one version of a tenant's stored template: Go text/template
// over the request's data (html/template for HTML).
type Template struct {
	TemplateID
	// Version counts the puts of the ID from 1; PutTemplate assigns it.
	Version int
	// Subject is the email subject (required for email) or the push title
	// (optional); never set for sms.
	Subject string
	// Text is the SMS text, the push body or the email's text/plain part.
	// Required.
	Text string
	// HTML is the email's optional text/html part.
	HTML string
	// CreatedAt is when the version was put; PutTemplate assigns it.
	CreatedAt time.Time
}

// Rendered is a request's message as its template renders it.
type Rendered struct {
	Subject string
	Text    string
	HTML    string
	// TemplateVersion and TemplateLocale are the stored version that
	// rendered it (zero for pre-rendered content) and its locale.
	TemplateVersion int
	TemplateLocale  string
}

// Errors of the template methods, matched with errors.Is.
var (
	// ErrTemplateNotFound: the tenant has no such template (or version).
	ErrTemplateNotFound = render.ErrUnknownTemplate
	// ErrInvalidTemplate: PutTemplate refused a template that does not
	// validate or parse; the error names the field.
	ErrInvalidTemplate = templates.ErrInvalid
	// ErrTemplateParameter: the request's data lacks a parameter the
	// template needs, or has one of the wrong type.
	ErrTemplateParameter = render.ErrMissingParam
)

// PutTemplate validates t and stores it as the next version of its ID,
// returning the stored version (Version and CreatedAt set). Versions are
// immutable: a message records the version that rendered it, and a
// resend renders that version again. A Sender reads a tenant's latest
// version (cached for SenderConfig.TemplateCacheTTL).
func (l *Ledger) PutTemplate(ctx context.Context, t Template) (Template, error) {
	stored, err := l.templates.Put(ctx, internalTemplate(t))
	if err != nil {
		return Template{}, fmt.Errorf("sendonce: put template %s: %w", internalTemplate(t).ID, err)
	}
	return publicTemplate(stored), nil
}

// GetTemplate returns version version of id's template, or its latest
// when version is 0; an error matching ErrTemplateNotFound when there is
// none.
func (l *Ledger) GetTemplate(ctx context.Context, id TemplateID, version int) (Template, error) {
	iid := internalTemplate(Template{TemplateID: id}).ID
	t, err := l.templates.Get(ctx, iid, version)
	if errors.Is(err, templates.ErrNotFound) {
		return Template{}, fmt.Errorf("sendonce: get template %s version %d: %w", iid, version, ErrTemplateNotFound)
	}
	if err != nil {
		return Template{}, fmt.Errorf("sendonce: get template %s: %w", iid, err)
	}
	return publicTemplate(t), nil
}

// Templates returns the latest version of each of tenant's templates,
// ordered by name, channel and locale.
func (l *Ledger) Templates(ctx context.Context, tenant string) ([]Template, error) {
	list, err := l.templates.List(ctx, tenant)
	if err != nil {
		return nil, fmt.Errorf("sendonce: list templates of %s: %w", tenant, err)
	}
	out := make([]Template, len(list))
	for i, t := range list {
		out[i] = publicTemplate(t)
	}
	return out, nil
}

// Render renders req as a Sender would now: its pre-rendered content as
// given, else its tenant's latest template in its locale (with the
// fallback pt-BR → pt → default) on its data. Its error matches
// ErrTemplateNotFound or ErrTemplateParameter, or is the store's.
func (l *Ledger) Render(ctx context.Context, req notify.Request) (Rendered, error) {
	r, err := render.New(l.templates, render.Config{CacheTTL: -1}).RenderRequest(ctx, req)
	if err != nil {
		return Rendered{}, fmt.Errorf("sendonce: %w", err)
	}
	return Rendered{Subject: r.Subject, Text: r.Body, HTML: r.HTML, TemplateVersion: r.TemplateVersion, TemplateLocale: r.TemplateLocale}, nil
}

func internalTemplate(t Template) templates.Template {
	return templates.Template{
		ID:      templates.ID{Tenant: t.Tenant, Name: t.Name, Channel: string(t.Channel), Locale: t.Locale},
		Version: t.Version, Subject: t.Subject, Text: t.Text, HTML: t.HTML, CreatedAt: t.CreatedAt,
	}
}

func publicTemplate(t templates.Template) Template {
	return Template{
		TemplateID: TemplateID{Tenant: t.Tenant, Name: t.Name, Channel: notify.Channel(t.Channel), Locale: t.Locale},
		Version:    t.Version, Subject: t.Subject, Text: t.Text, HTML: t.HTML, CreatedAt: t.CreatedAt,
	}
}
