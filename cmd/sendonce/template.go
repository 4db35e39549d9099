package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sendonce/sendonce/internal/render"
	"github.com/sendonce/sendonce/internal/templates"
	"github.com/sendonce/sendonce/internal/templates/dynamotemplates"
)

func templateCmd(a *app) *cobra.Command {
	g := group("template", "store, read, list and preview a tenant's message templates",
		templatePutCmd(a), templateGetCmd(a), templateListCmd(a), templateRenderCmd(a), templateImportCmd(a))
	g.Long = `
Message templates live in the table, per tenant, name, channel and locale;
every put stores a new immutable version. The syntax is Go's text/template
over the request's data ("Hello {{.name}}"); a required parameter is
{{.name}} (a message without it fails, FAILED with the reason), an optional
one {{index . "name"}}. The HTML part of an email is an html/template, which
escapes what it inserts. A template that does not parse is refused here,
never at send time. See docs/templates.md.

Every subcommand takes --table NAME (default $SENDONCE_TABLE).`
	return g
}

// templateFlags are the flags naming a template.
type templateFlags struct {
	table, tenant, name, channel, locale *string
}

func newTemplateFlags(c *cobra.Command, withID bool) templateFlags {
	f := templateFlags{table: tableFlag(c), tenant: tenantFlag(c)}
	if withID {
		fs := c.Flags()
		f.name = fs.String("name", "", "the template's `NAME` (required)")
		f.channel = fs.String("channel", "", "the `CHANNEL`: sms, email or push (required)")
		f.locale = fs.String("locale", "", "the `LOCALE` (default: the template's default version)")
	}
	return f
}

// check returns a usage error for a missing required flag or table, and
// the table.
func (f templateFlags) check(a *app, c *cobra.Command) (string, error) {
	need := []struct{ flag, v string }{{"--tenant", *f.tenant}}
	if f.name != nil {
		need = append(need, struct{ flag, v string }{"--name", *f.name}, struct{ flag, v string }{"--channel", *f.channel})
	}
	for _, n := range need {
		if n.v == "" {
			return "", &usageError{cmd: c, msg: name(c) + " needs " + n.flag}
		}
	}
	return a.table(c, *f.table)
}

func (f templateFlags) id() templates.ID {
	return templates.ID{Tenant: *f.tenant, Name: *f.name, Channel: *f.channel, Locale: *f.locale}
}

// store checks c's flags and returns the template store on the table.
func (f templateFlags) store(ctx context.Context, a *app, c *cobra.Command) (*dynamotemplates.Store, error) {
	table, err := f.check(a, c)
	if err != nil {
		return nil, err
	}
	db, err := a.dynamoClient(ctx)
	if err != nil {
		return nil, err
	}
	return dynamotemplates.New(db, table, dynamotemplates.Config{}), nil
}

// readSource reads FILE, or stdin for "-".
func readSource(e env, path string) (string, error) {
	var (
		b   []byte
		err error
	)
	if path == "-" {
		b, err = io.ReadAll(io.LimitReader(e.stdin, templates.MaxHTMLSize+1))
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return "", fmt.Errorf("template put: read %s: %w", path, err)
	}
	return string(b), nil
}

// templateError turns a store error into the CLI's one-line message.
func templateError(sub string, id templates.ID, err error) error {
	var ie *templates.InvalidError
	switch {
	case errors.As(err, &ie):
		return fmt.Errorf("template %s: refused: %s: %s", sub, ie.Field, ie.Reason)
	case errors.Is(err, templates.ErrNotFound):
		return fmt.Errorf("template %s: unknown template %s", sub, id)
	}
	return fmt.Errorf("template %s: %w", sub, err)
}

func templatePutCmd(a *app) *cobra.Command {
	c := &cobra.Command{
		Use:   "put --tenant T --name N --channel sms|email|push [--locale L] --text FILE [--subject S] [--html FILE]",
		Short: "store a new version of a template; prints its number",
		Long: `
Stores a new version and prints its number alone on stdout, whatever
--output says. FILE "-" is stdin. Email needs --subject; --html is for email
only. Without --locale the version is the template's default, used when no
variant matches a message's locale (pt-BR falls back to pt, then to the
default).`,
		Args:        noArgs,
		Annotations: map[string]string{annotValue: "prints the version alone"},
	}
	f := newTemplateFlags(c, true)
	text := c.Flags().String("text", "", "the text part's `FILE` (- for stdin; required)")
	subject := c.Flags().String("subject", "", "the email's `SUBJECT` template")
	html := c.Flags().String("html", "", "the email's HTML part's `FILE` (- for stdin)")
	c.RunE = func(c *cobra.Command, _ []string) error {
		if _, err := f.check(a, c); err != nil {
			return err
		}
		if *text == "" {
			return &usageError{cmd: c, msg: "template put needs --text FILE"}
		}
		if *text == "-" && *html == "-" {
			return &usageError{cmd: c, msg: "template put: --text and --html cannot both read stdin"}
		}
		t := templates.Template{ID: f.id(), Subject: *subject}
		var err error
		if t.Text, err = readSource(a.env, *text); err != nil {
			return err
		}
		if *html != "" {
			if t.HTML, err = readSource(a.env, *html); err != nil {
				return err
			}
		}
		s, err := f.store(c.Context(), a, c)
		if err != nil {
			return err
		}
		got, err := s.Put(c.Context(), t)
		if err != nil {
			return templateError("put", t.ID, err)
		}
		if _, err := fmt.Fprintln(a.stdout, got.Version); err != nil {
			return err
		}
		a.note("stored %s version %d", got.ID, got.Version)
		return nil
	}
	return c
}

// templateView is a template as get and list print it.
type templateView struct {
	Tenant    string `json:"tenant"`
	Name      string `json:"name"`
	Channel   string `json:"channel"`
	Locale    string `json:"locale,omitempty"`
	Version   int    `json:"version"`
	CreatedAt string `json:"created_at"`
	Subject   string `json:"subject,omitempty"`
	Text      string `json:"text,omitempty"`
	HTML      string `json:"html,omitempty"`
}

func viewOf(t templates.Template, full bool) templateView {
	v := templateView{Tenant: t.Tenant, Name: t.Name, Channel: t.Channel, Locale: t.Locale, Version: t.Version,
		CreatedAt: t.CreatedAt.UTC().Format(time.RFC3339)}
	if full {
		v.Subject, v.Text, v.HTML = t.Subject, t.Text, t.HTML
	}
	return v
}

func templateGetCmd(a *app) *cobra.Command {
	c := &cobra.Command{
		Use:   "get --tenant T --name N --channel C [--locale L] [--version V]",
		Short: "print a version of a template (default the latest)",
		Args:  noArgs,
	}
	f := newTemplateFlags(c, true)
	version := c.Flags().Int("version", 0, "the `VERSION` (default: the latest)")
	c.RunE = func(c *cobra.Command, _ []string) error {
		if *version < 0 {
			return &usageError{cmd: c, msg: "template get: --version must be 1 or more"}
		}
		s, err := f.store(c.Context(), a, c)
		if err != nil {
			return err
		}
		t, err := s.Get(c.Context(), f.id(), *version)
		if err != nil {
			if *version > 0 && errors.Is(err, templates.ErrNotFound) {
				return fmt.Errorf("template get: %s has no version %d", f.id(), *version)
			}
			return templateError("get", f.id(), err)
		}
		return a.printer().object(viewOf(t, true))
	}
	return c
}

// writeTemplates prints templates as a list (template list, import-examples).
func writeTemplates(p printer, ts []templates.Template) error {
	views := make([]templateView, len(ts))
	for i, t := range ts {
		views[i] = viewOf(t, false)
	}
	return writeList(p, views, []string{"NAME", "CHANNEL", "LOCALE", "VERSION", "CREATED"}, func(v templateView) []string {
		return []string{v.Name, v.Channel, v.Locale, fmt.Sprint(v.Version), v.CreatedAt}
	})
}

func templateListCmd(a *app) *cobra.Command {
	c := &cobra.Command{
		Use:   "list --tenant T",
		Short: "the tenant's templates with their latest versions",
		Args:  noArgs,
	}
	f := newTemplateFlags(c, false)
	c.RunE = func(c *cobra.Command, _ []string) error {
		s, err := f.store(c.Context(), a, c)
		if err != nil {
			return err
		}
		ts, err := s.List(c.Context(), *f.tenant)
		if err != nil {
			return fmt.Errorf("template list: %w", err)
		}
		return writeTemplates(a.printer(), ts)
	}
	return c
}

// renderView is a rendered message as render prints it (json, --query).
type renderView struct {
	Version int    `json:"version"`
	Locale  string `json:"locale,omitempty"`
	Subject string `json:"subject,omitempty"`
	Text    string `json:"text"`
	HTML    string `json:"html,omitempty"`
}

func templateRenderCmd(a *app) *cobra.Command {
	c := &cobra.Command{
		Use:   "render --tenant T --name N --channel C [--locale L] [--data JSON]",
		Short: "preview the message a request with this data would get",
		Long: `
Previews the message a request with this data would get, resolving the
locale as the sender does: with --output text or table, the message as a
person reads it (the subject, the text, the HTML part); with --output json
(or --query), an object with version, locale, subject, text and html.`,
		Args: noArgs,
	}
	f := newTemplateFlags(c, true)
	data := c.Flags().String("data", "{}", "the request's data, a `JSON` object")
	c.RunE = func(c *cobra.Command, _ []string) error {
		if _, err := f.check(a, c); err != nil {
			return err
		}
		var params map[string]any
		dec := json.NewDecoder(strings.NewReader(*data))
		dec.UseNumber() // as the sender decodes a request's data
		if err := dec.Decode(&params); err != nil {
			return &usageError{cmd: c, msg: "template render: --data must be a JSON object: " + err.Error()}
		}
		s, err := f.store(c.Context(), a, c)
		if err != nil {
			return err
		}
		m, err := render.New(s, render.Config{CacheTTL: -1}).Render(c.Context(), render.Input{
			Tenant: *f.tenant, Template: *f.name, Channel: *f.channel, Locale: *f.locale, Data: params,
		})
		if err != nil {
			return fmt.Errorf("template render: %w", err)
		}
		p := a.printer()
		if p.format == "json" || p.format == "yaml" || p.query != nil {
			return p.object(renderView{m.TemplateVersion, m.TemplateLocale, m.Subject, m.Body, m.HTML})
		}
		var b strings.Builder
		if m.Subject != "" {
			fmt.Fprintf(&b, "Subject: %s\n\n", m.Subject)
		}
		b.WriteString(m.Body + "\n")
		if m.HTML != "" {
			fmt.Fprintf(&b, "\n--- HTML part ---\n%s\n", strings.TrimRight(m.HTML, "\n"))
		}
		if _, err := io.WriteString(a.stdout, b.String()); err != nil {
			return err
		}
		a.note("rendered %s version %d", templates.ID{Tenant: *f.tenant, Name: *f.name, Channel: *f.channel, Locale: m.TemplateLocale}, m.TemplateVersion)
		return nil
	}
	return c
}

func templateImportCmd(a *app) *cobra.Command {
	c := &cobra.Command{
		Use:   "import-examples --tenant T",
		Short: "store the example templates shipped with sendonce for a tenant, and list them",
		Long: `
Stores the example templates shipped with sendonce for tenant T (each as a
new version) and lists them as "template list" does.`,
		Args: noArgs,
	}
	f := newTemplateFlags(c, false)
	c.RunE = func(c *cobra.Command, _ []string) error {
		if _, err := f.check(a, c); err != nil {
			return err
		}
		if err := templates.ValidateID(templates.ID{Tenant: *f.tenant, Name: "x", Channel: "sms"}); err != nil {
			return templateError("import-examples", templates.ID{Tenant: *f.tenant}, err)
		}
		s, err := f.store(c.Context(), a, c)
		if err != nil {
			return err
		}
		got, err := templates.ImportExamples(c.Context(), s, *f.tenant)
		if err != nil {
			return fmt.Errorf("template import-examples: %w", err)
		}
		return writeTemplates(a.printer(), got)
	}
	return c
}
