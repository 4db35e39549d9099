// Package render turns a template name, channel, locale and parameters into
// the text a provider sends.
//
// Templates are embedded from templates/<name>.<channel>[.<locale>].tmpl
// and parsed once at start-up. Email and push templates begin with a
// "Subject: ..." line and a blank line; the rest is the body. Required
// parameters are referenced as {{.name}} and fail when missing; optional
// ones as {{index . "name"}}.
//
// Every failure is an *Error matching ErrUnknownTemplate or
// ErrMissingParam: a permanent failure of the message, stored in the
// ledger as its reason.
package render

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"text/template"
)

//go:embed templates/*.tmpl
var files embed.FS

// Message is a rendered message.
type Message struct {
	// Subject is empty for SMS.
	Subject string
	Body    string
}

// Errors matched with errors.Is on an *Error.
var (
	ErrUnknownTemplate = errors.New("unknown template")
	ErrMissingParam    = errors.New("template parameter missing or invalid")
)

// Error explains why a message could not be rendered.
type Error struct {
	Template string
	Channel  string
	Kind     error
	Detail   string
}

func (e *Error) Error() string {
	s := fmt.Sprintf("render %s for %s: %v", e.Template, e.Channel, e.Kind)
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// Is matches the error's kind.
func (e *Error) Is(target error) bool { return target == e.Kind }

// Renderer renders embedded templates. It is safe for concurrent use.
type Renderer struct {
	set map[string]entry // "<name>.<channel>[.<locale>]"
}

// entry is one template file: an optional subject template and the body.
type entry struct {
	subject *template.Template
	body    *template.Template
}

// New parses the embedded templates. It fails only if a template does not
// parse, which a test guards against.
func New() (*Renderer, error) {
	return newFromFS(files, "templates")
}

// MustNew is New for package-level wiring; it panics on a template that
// does not parse, which cannot happen with the shipped set (tested).
func MustNew() *Renderer {
	r, err := New()
	if err != nil {
		panic(err)
	}
	return r
}

func newFromFS(fsys fs.FS, dir string) (*Renderer, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("render: read templates: %w", err)
	}
	r := &Renderer{set: map[string]entry{}}
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".tmpl")
		if !ok {
			continue
		}
		b, err := fs.ReadFile(fsys, dir+"/"+e.Name())
		if err != nil {
			return nil, fmt.Errorf("render: read %s: %w", e.Name(), err)
		}
		var ent entry
		src := string(b)
		if rest, ok := strings.CutPrefix(src, "Subject: "); ok {
			subject, body, _ := strings.Cut(rest, "\n")
			if ent.subject, err = parse(name+".subject", subject); err != nil {
				return nil, fmt.Errorf("render: parse %s: %w", e.Name(), err)
			}
			src = strings.TrimPrefix(body, "\n")
		}
		if ent.body, err = parse(name, src); err != nil {
			return nil, fmt.Errorf("render: parse %s: %w", e.Name(), err)
		}
		r.set[name] = ent
	}
	return r, nil
}

// Has reports whether a template exists for name and channel (any locale).
func (r *Renderer) Has(name, channel string) bool {
	_, ok := r.set[name+"."+channel]
	return ok
}

// Render renders template name for channel, preferring the locale's
// variant ("pt-BR", then "pt", then the default).
func (r *Renderer) Render(name, channel, locale string, data map[string]any) (Message, error) {
	ent, ok := r.lookup(name, channel, locale)
	if !ok {
		return Message{}, &Error{Template: name, Channel: channel, Kind: ErrUnknownTemplate}
	}
	if data == nil {
		data = map[string]any{}
	}
	var m Message
	var buf bytes.Buffer
	if ent.subject != nil {
		if err := ent.subject.Execute(&buf, data); err != nil {
			return Message{}, &Error{Template: name, Channel: channel, Kind: ErrMissingParam, Detail: execDetail(err)}
		}
		m.Subject = strings.TrimSpace(buf.String())
		buf.Reset()
	}
	if err := ent.body.Execute(&buf, data); err != nil {
		return Message{}, &Error{Template: name, Channel: channel, Kind: ErrMissingParam, Detail: execDetail(err)}
	}
	m.Body = strings.TrimRight(buf.String(), "\n")
	if strings.ContainsAny(m.Subject, "\r\n") {
		return Message{}, &Error{Template: name, Channel: channel, Kind: ErrMissingParam, Detail: "subject contains a line break"}
	}
	if m.Body == "" {
		return Message{}, &Error{Template: name, Channel: channel, Kind: ErrMissingParam, Detail: "rendered body is empty"}
	}
	return m, nil
}

func (r *Renderer) lookup(name, channel, locale string) (entry, bool) {
	base := name + "." + channel
	for l := locale; l != ""; {
		if ent, ok := r.set[base+"."+l]; ok {
			return ent, true
		}
		i := strings.LastIndexAny(l, "-_")
		if i < 0 {
			break
		}
		l = l[:i]
	}
	ent, ok := r.set[base]
	return ent, ok
}

func parse(name, src string) (*template.Template, error) {
	return template.New(name).Option("missingkey=error").Parse(src)
}

// execDetail keeps the useful part of a text/template error ("map has no
// entry for key \"order_id\"") and drops the template's internal position.
func execDetail(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 {
		s = s[i+2:]
	}
	return s
}
