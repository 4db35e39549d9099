// Package render turns a notification request into the text a provider
// sends: either the request's pre-rendered content, delivered as given, or
// the tenant's stored template (package templates) executed on the
// request's data.
//
// A stored template is looked up by tenant, name and channel, preferring
// the request's locale ("pt-BR", then "pt", then the template's default;
// templates.Fallback). A resolved template is cached per process (per
// Lambda container) for Config.CacheTTL (default DefaultCacheTTL; the
// functions pass SENDONCE_TEMPLATE_CACHE, where 0s disables the cache),
// so a new version is used by every container at the latest one
// TTL after it was put. A template that
// was not found is never cached: putting it takes effect at once.
//
// Every failure is an *Error matching one kind:
//
//   - ErrUnknownTemplate: the tenant has no such template for the channel
//     (another tenant's template of the same name is not visible);
//   - ErrMissingParam: the data lacks a parameter the template needs, or
//     renders a broken subject or an empty text;
//   - ErrUnavailable: the store could not be read (not the message's
//     fault: retry).
//
// The first two are permanent failures of the message, stored in the
// ledger as its reason.
//
// In the path of one SQS record (docs/architecture.md) package sender
// renders the request (package notify) after deriving its key and before
// claiming it, so the claimed row holds the render inputs; a resend
// renders those inputs again (dispatch.Dispatcher.Render).
package render

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sendonce/sendonce/internal/templates"
	"github.com/sendonce/sendonce/internal/ttlcache"
	"github.com/sendonce/sendonce/notify"
)

// DefaultCacheTTL is how long the functions cache a resolved template
// unless SENDONCE_TEMPLATE_CACHE says otherwise.
const DefaultCacheTTL = time.Minute

// maxCached bounds the cache; when full it is emptied.
const maxCached = 4096

// Rendered is a rendered message.
type Rendered struct {
	// Subject is the email subject or push title; empty for SMS.
	Subject string
	// Body is the text: the SMS, the push body, the email's text/plain
	// part.
	Body string
	// HTML is the email's optional text/html part.
	HTML string
	// TemplateVersion is the stored template version that rendered the
	// message; 0 for pre-rendered content.
	TemplateVersion int
	// TemplateLocale is the locale of the template variant used ("": the
	// default).
	TemplateLocale string
}

// Errors matched with errors.Is on an *Error.
var (
	ErrUnknownTemplate = errors.New("unknown template")
	ErrMissingParam    = errors.New("template parameter missing or invalid")
	ErrUnavailable     = errors.New("template store unavailable")
)

// Error explains why a message could not be rendered.
type Error struct {
	Template string
	Channel  string
	// Problem is the sentinel the error matches (ErrUnknownTemplate,
	// ErrMissingParam, ErrUnavailable).
	Problem error
	Detail  string
	// Err is the store's error behind ErrUnavailable.
	Err error
}

func (e *Error) Error() string {
	s := fmt.Sprintf("render %s for %s: %v", e.Template, e.Channel, e.Problem)
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// Is matches the error's kind.
func (e *Error) Is(target error) bool { return target == e.Problem }

// Unwrap returns the store's error, if any.
func (e *Error) Unwrap() error { return e.Err }

// Input is what a stored template is rendered from.
type Input struct {
	Tenant   string
	Template string
	Channel  string
	Locale   string
	Data     map[string]any
}

// Renderer renders through a template store with a per-process cache. It
// is safe for concurrent use.
type Renderer struct {
	store templates.Store
	ttl   time.Duration
	now   func() time.Time

	cache    *ttlcache.Cache[cacheKey, *templates.Compiled]
	mu       sync.Mutex
	versions map[versionKey]*templates.Compiled
}

type cacheKey struct{ tenant, name, channel, locale string }

type versionKey struct {
	id      templates.ID
	version int
}

// Config configures a Renderer.
type Config struct {
	// CacheTTL is how long a resolved template is cached: zero means
	// DefaultCacheTTL, a negative value disables the cache (the functions
	// pass SENDONCE_TEMPLATE_CACHE, where 0s disables it).
	CacheTTL time.Duration
	// Now is the clock of the cache; nil means time.Now.
	Now func() time.Time
}

// New returns a Renderer over store.
func New(store templates.Store, cfg Config) *Renderer {
	r := &Renderer{store: store, ttl: cfg.CacheTTL, now: cfg.Now, versions: map[versionKey]*templates.Compiled{}}
	if r.ttl == 0 {
		r.ttl = DefaultCacheTTL
	}
	if r.now == nil {
		r.now = time.Now
	}
	r.cache = ttlcache.New[cacheKey, *templates.Compiled](r.ttl, maxCached)
	return r
}

// RenderRequest renders req: its pre-rendered content as given when it
// has some, else its tenant's stored template on its data.
func (r *Renderer) RenderRequest(ctx context.Context, req notify.Request) (Rendered, error) {
	if c := req.Content; c != nil {
		return Rendered{Subject: c.Subject, Body: c.Text, HTML: c.HTML}, nil
	}
	return r.Render(ctx, Input{Tenant: req.TenantID, Template: req.Template, Channel: string(req.Channel), Locale: req.Locale, Data: req.Data})
}

// Render renders in's template. Its error is an *Error.
func (r *Renderer) Render(ctx context.Context, in Input) (Rendered, error) {
	c, err := r.lookup(ctx, in)
	if err != nil {
		return Rendered{}, err
	}
	subject, text, html, err := c.Execute(in.Data)
	if err != nil {
		return Rendered{}, &Error{Template: in.Template, Channel: in.Channel, Problem: ErrMissingParam, Detail: err.Error()}
	}
	return Rendered{Subject: subject, Body: text, HTML: html, TemplateVersion: c.Version, TemplateLocale: c.Locale}, nil
}

// RenderVersion renders version version of tenant's name/channel template
// in locale ("" its default) on data: a resend's render of the inputs a
// ledger row holds. Versions are immutable, so it renders the same bytes
// as the first attempt, and a compiled version is cached for the
// process's life (bounded like the template cache). Its error is an
// *Error: ErrUnknownTemplate when the version is gone, ErrMissingParam,
// or ErrUnavailable.
func (r *Renderer) RenderVersion(ctx context.Context, tenant, name, channel string, version int, locale string, data map[string]any) (Rendered, error) {
	if version < 1 {
		return Rendered{}, &Error{Template: name, Channel: channel, Problem: ErrUnknownTemplate, Detail: fmt.Sprintf("version %d", version)}
	}
	id := templates.ID{Tenant: tenant, Name: name, Channel: channel, Locale: locale}
	k := versionKey{id, version}
	r.mu.Lock()
	c, ok := r.versions[k]
	r.mu.Unlock()
	if !ok {
		t, err := r.store.Get(ctx, id, version)
		switch {
		case errors.Is(err, templates.ErrNotFound):
			return Rendered{}, &Error{Template: name, Channel: channel, Problem: ErrUnknownTemplate, Detail: fmt.Sprintf("version %d of locale %q is gone", version, locale)}
		case err != nil:
			return Rendered{}, &Error{Template: name, Channel: channel, Problem: ErrUnavailable, Err: err}
		}
		if c, err = templates.Compile(t); err != nil {
			return Rendered{}, &Error{Template: name, Channel: channel, Problem: ErrUnknownTemplate, Detail: fmt.Sprintf("stored version %d is invalid: %v", t.Version, err)}
		}
		r.mu.Lock()
		if len(r.versions) >= maxCached {
			clear(r.versions)
		}
		r.versions[k] = c
		r.mu.Unlock()
	}
	subject, text, html, err := c.Execute(data)
	if err != nil {
		return Rendered{}, &Error{Template: name, Channel: channel, Problem: ErrMissingParam, Detail: err.Error()}
	}
	return Rendered{Subject: subject, Body: text, HTML: html, TemplateVersion: c.Version, TemplateLocale: c.Locale}, nil
}

func (r *Renderer) lookup(ctx context.Context, in Input) (*templates.Compiled, error) {
	k := cacheKey{in.Tenant, in.Template, in.Channel, in.Locale}
	now := r.now()
	if c, ok := r.cache.Get(k, now); ok {
		return c, nil
	}
	t, err := r.store.Resolve(ctx, in.Tenant, in.Template, in.Channel, templates.Fallback(in.Locale))
	switch {
	case errors.Is(err, templates.ErrNotFound):
		return nil, &Error{Template: in.Template, Channel: in.Channel, Problem: ErrUnknownTemplate}
	case err != nil:
		return nil, &Error{Template: in.Template, Channel: in.Channel, Problem: ErrUnavailable, Err: err}
	}
	c, err := templates.Compile(t)
	if err != nil {
		// Stores refuse such templates; one that is there anyway (written
		// around the store) cannot render any message.
		return nil, &Error{Template: in.Template, Channel: in.Channel, Problem: ErrUnknownTemplate, Detail: fmt.Sprintf("stored version %d is invalid: %v", t.Version, err)}
	}
	r.cache.Put(k, c, now)
	return c, nil
}
