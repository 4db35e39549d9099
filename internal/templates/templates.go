// Package templates is the message content of sendonce as data: templates
// stored per tenant, name, channel and locale, each put creating a new
// immutable version.
//
// A Template holds Go text/template sources over the request's data
// ("Hello {{.name}}"): a Text part for every channel, a Subject for email
// (required) and push (the title, optional), and an optional HTML part for
// email, an html/template that escapes what it inserts. Validate parses
// every part, so a template that does not parse is refused when it is put,
// never when a message is sent.
//
// A Store keeps the versions (package dynamotemplates in the sendonce
// table, package memtemplates in memory; both pass the suite in package
// templatestest). Rendering, caching and locale fallback are package
// render's.
//
// # Locale fallback
//
// A template put without a locale is the template's default. A message in
// locale "pt-BR" uses the "pt-BR" variant when there is one, else "pt",
// else the default (Fallback lists the candidates in that order).
//
// # Tenants
//
// Every template belongs to one tenant, and every Store method is scoped
// by it: tenant B asking for tenant A's template gets ErrNotFound, exactly
// as for a name nobody stored.
package templates

import (
	"context"
	"errors"
	"fmt"
	htmltemplate "html/template"
	"regexp"
	"strings"
	texttemplate "text/template"
	"time"
	"unicode/utf8"
)

// Size limits of a template's parts, in bytes. They keep a stored version
// (two copies of it live in one DynamoDB item each) far below DynamoDB's
// 400 KB item limit.
const (
	MaxSubjectSize = 1024
	MaxTextSize    = 64 * 1024
	MaxHTMLSize    = 128 * 1024
)

// Channels a template can be for (the request's channels).
var Channels = []string{"sms", "email", "push"}

// ID names a template: every version of it shares the ID.
type ID struct {
	Tenant  string
	Name    string
	Channel string
	// Locale is "" for the template's default.
	Locale string
}

func (id ID) String() string {
	s := id.Tenant + "/" + id.Name + "/" + id.Channel
	if id.Locale != "" {
		s += "/" + id.Locale
	}
	return s
}

// Template is one version of a template.
type Template struct {
	ID
	// Version counts the puts of the ID from 1. A Store assigns it.
	Version int
	// Subject is the email subject (required for email) or the push title
	// (optional); never set for sms.
	Subject string
	// Text is the message body: the SMS text, the push body, the email's
	// text/plain part. Required.
	Text string
	// HTML is the email's optional text/html part (html/template); never
	// set for sms or push.
	HTML string
	// CreatedAt is when the version was put. A Store assigns it.
	CreatedAt time.Time
}

// Errors, matched with errors.Is.
var (
	// ErrNotFound: no template (or no such version) for the ID under its
	// tenant.
	ErrNotFound = errors.New("unknown template")
	// ErrInvalid matches every *InvalidError.
	ErrInvalid = errors.New("invalid template")
)

// InvalidError says why a template was refused. Field is "tenant", "name",
// "channel", "locale", "subject", "text" or "html".
type InvalidError struct {
	Field  string
	Reason string
}

func (e *InvalidError) Error() string {
	return "invalid template: " + e.Field + ": " + e.Reason
}

// Is makes errors.Is(err, ErrInvalid) true.
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

var (
	tenantRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)
	nameRE   = regexp.MustCompile(`^[a-z0-9_.-]{1,64}$`)
	localeRE = regexp.MustCompile(`^[A-Za-z]{2,3}([_-][A-Za-z0-9]{2,8})*$`)
)

// ValidateID checks id's parts against the request's rules (a template's
// name is the request's "template" field). The error is an *InvalidError.
func ValidateID(id ID) error {
	switch {
	case !tenantRE.MatchString(id.Tenant):
		return &InvalidError{"tenant", "must be 1 to 64 of A-Z a-z 0-9 . _ -"}
	case !nameRE.MatchString(id.Name):
		return &InvalidError{"name", "must be 1 to 64 of a-z 0-9 _ . -"}
	case id.Channel != "sms" && id.Channel != "email" && id.Channel != "push":
		return &InvalidError{"channel", "must be one of sms, email, push"}
	case id.Locale != "" && !localeRE.MatchString(id.Locale):
		return &InvalidError{"locale", "is not a language tag such as en or pt-BR"}
	}
	return nil
}

// Validate checks t's ID, which parts its channel allows, their sizes, and
// that every part parses. The error is an *InvalidError.
func Validate(t Template) error {
	_, err := Compile(t)
	return err
}

// Compiled is a validated template with its parts parsed.
type Compiled struct {
	Template
	subject *texttemplate.Template // nil when there is no subject
	text    *texttemplate.Template
	html    *htmltemplate.Template // nil when there is no HTML part
}

// Compile validates t (see Validate) and parses its parts. Missing map
// keys are errors when executed (option missingkey=error), so a required
// parameter is written {{.name}} and an optional one {{index . "name"}}.
func Compile(t Template) (*Compiled, error) {
	if err := ValidateID(t.ID); err != nil {
		return nil, err
	}
	switch {
	case t.Channel == "email" && strings.TrimSpace(t.Subject) == "":
		return nil, &InvalidError{"subject", "is required for email"}
	case t.Channel == "sms" && t.Subject != "":
		return nil, &InvalidError{"subject", "is not allowed for sms"}
	case t.Channel != "email" && t.HTML != "":
		return nil, &InvalidError{"html", "is allowed for email only"}
	case strings.TrimSpace(t.Text) == "":
		return nil, &InvalidError{"text", "is required"}
	case strings.ContainsAny(t.Subject, "\r\n"):
		return nil, &InvalidError{"subject", "must be one line"}
	}
	for _, p := range [...]struct {
		field, s string
		max      int
	}{{"subject", t.Subject, MaxSubjectSize}, {"text", t.Text, MaxTextSize}, {"html", t.HTML, MaxHTMLSize}} {
		if len(p.s) > p.max {
			return nil, &InvalidError{p.field, fmt.Sprintf("is %d bytes, more than the %d allowed", len(p.s), p.max)}
		}
		if !utf8.ValidString(p.s) {
			return nil, &InvalidError{p.field, "is not valid UTF-8"}
		}
	}
	c := &Compiled{Template: t}
	var err error
	if t.Subject != "" {
		if c.subject, err = texttemplate.New("subject").Option("missingkey=error").Parse(t.Subject); err != nil {
			return nil, &InvalidError{"subject", parseDetail(err)}
		}
	}
	if c.text, err = texttemplate.New("text").Option("missingkey=error").Parse(t.Text); err != nil {
		return nil, &InvalidError{"text", parseDetail(err)}
	}
	if t.HTML != "" {
		if c.html, err = htmltemplate.New("html").Option("missingkey=error").Parse(t.HTML); err != nil {
			return nil, &InvalidError{"html", parseDetail(err)}
		}
	}
	return c, nil
}

// ExecError is a failure to execute a compiled template on the given data:
// a missing or unusable parameter.
type ExecError struct {
	Part   string // "subject", "text" or "html"
	Detail string
}

func (e *ExecError) Error() string { return e.Part + ": " + e.Detail }

// MaxRenderedSize bounds each rendered part, in bytes: a template that
// nests templates can otherwise produce output exponential in its size.
const MaxRenderedSize = 256 * 1024

// errTooLarge stops an execution whose output passed MaxRenderedSize.
var errTooLarge = fmt.Errorf("the rendered output exceeds %d bytes", MaxRenderedSize)

// cappedBuilder is a strings.Builder that fails once it would pass
// MaxRenderedSize.
type cappedBuilder struct{ strings.Builder }

func (b *cappedBuilder) Write(p []byte) (int, error) {
	if b.Len()+len(p) > MaxRenderedSize {
		return 0, errTooLarge
	}
	return b.Builder.Write(p)
}

// Execute renders c's parts on data. The subject is trimmed and must stay
// on one line; the text must not be empty; no part may exceed
// MaxRenderedSize. Its error is an *ExecError.
func (c *Compiled) Execute(data map[string]any) (subject, text, html string, err error) {
	if data == nil {
		data = map[string]any{}
	}
	var b cappedBuilder
	if c.subject != nil {
		if err := c.subject.Execute(&b, data); err != nil {
			return "", "", "", &ExecError{"subject", execDetail(err)}
		}
		subject = strings.TrimSpace(b.String())
		if strings.ContainsAny(subject, "\r\n") {
			return "", "", "", &ExecError{"subject", "the rendered subject contains a line break"}
		}
		b.Reset()
	}
	if err := c.text.Execute(&b, data); err != nil {
		return "", "", "", &ExecError{"text", execDetail(err)}
	}
	text = strings.TrimRight(b.String(), "\n")
	if strings.TrimSpace(text) == "" {
		return "", "", "", &ExecError{"text", "the rendered text is empty"}
	}
	if c.html != nil {
		b.Reset()
		if err := c.html.Execute(&b, data); err != nil {
			return "", "", "", &ExecError{"html", execDetail(err)}
		}
		html = b.String()
	}
	return subject, text, html, nil
}

// parseDetail drops text/template's "template: name:" prefix, keeping the
// line and the problem ("1: unclosed action").
func parseDetail(err error) string {
	s := err.Error()
	s = strings.TrimPrefix(s, "template: ")
	if _, rest, ok := strings.Cut(s, ":"); ok {
		s = "line " + strings.TrimSpace(rest)
	}
	return "does not parse: " + s
}

// execDetail keeps the useful part of an execution error ("map has no
// entry for key \"order_id\"") and drops the template's internal position.
func execDetail(err error) string {
	if errors.Is(err, errTooLarge) {
		return errTooLarge.Error()
	}
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 {
		s = s[i+2:]
	}
	return s
}

// Fallback returns the locales a message in locale tries, most specific
// first, ending with "" (the default): "pt-BR" gives ["pt-BR", "pt", ""].
// An empty locale gives [""].
func Fallback(locale string) []string {
	var out []string
	for l := locale; l != ""; {
		out = append(out, l)
		i := strings.LastIndexAny(l, "-_")
		if i < 0 {
			break
		}
		l = l[:i]
	}
	return append(out, "")
}

// Store keeps template versions. Implementations are safe for concurrent
// use.
type Store interface {
	// Put validates t (Validate) and stores it as the next version of
	// t.ID; it returns the stored version with Version and CreatedAt set.
	// Concurrent puts of one ID get distinct, consecutive versions. The
	// error is an *InvalidError for a template that does not validate
	// (nothing is stored), else a storage error.
	Put(ctx context.Context, t Template) (Template, error)
	// Get returns the given version of id, or its latest when version is
	// 0. It returns ErrNotFound when the tenant has no such template or
	// version.
	Get(ctx context.Context, id ID, version int) (Template, error)
	// Resolve returns the latest version of the first of locales (see
	// Fallback) that tenant has a name/channel template for. It returns
	// ErrNotFound when it has none of them.
	Resolve(ctx context.Context, tenant, name, channel string, locales []string) (Template, error)
	// List returns the latest version of each of tenant's templates,
	// ordered by name, channel and locale. A tenant with none gets an
	// empty list.
	List(ctx context.Context, tenant string) ([]Template, error)
}

// Less orders IDs by tenant, name, channel and locale (List's order).
func Less(a, b ID) bool {
	if a.Tenant != b.Tenant {
		return a.Tenant < b.Tenant
	}
	if a.Name != b.Name {
		return a.Name < b.Name
	}
	if a.Channel != b.Channel {
		return a.Channel < b.Channel
	}
	return a.Locale < b.Locale
}
