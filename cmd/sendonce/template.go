package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sendonce/sendonce/internal/render"
	"github.com/sendonce/sendonce/internal/templates"
	"github.com/sendonce/sendonce/internal/templates/dynamotemplates"
)

var templateCmd = &command{
	name:     "template",
	synopsis: "template put|get|list|render|import-examples [FLAGS]",
	summary:  "store, read, list and preview a tenant's message templates",
	help: `
Message templates live in the table, per tenant, name, channel and locale;
every put stores a new immutable version. The syntax is Go's text/template
over the request's data ("Hello {{.name}}"); a required parameter is
{{.name}} (a message without it fails, FAILED with the reason), an optional
one {{index . "name"}}. The HTML part of an email is an html/template, which
escapes what it inserts. A template that does not parse is refused here,
never at send time. See docs/templates.md.

  sendonce template put --tenant T --name N --channel sms|email|push [--locale L]
                        --text FILE [--subject S] [--html FILE]
      stores a new version and prints its number alone on stdout. FILE "-" is
      stdin. Email needs --subject; --html is for email only. Without --locale
      the version is the template's default, used when no variant matches a
      message's locale (pt-BR falls back to pt, then to the default).
  sendonce template get --tenant T --name N --channel C [--locale L] [--version V]
      prints a version (default the latest) as JSON.
  sendonce template list --tenant T [--output table|json]
      the tenant's templates with their latest versions (json: one object a line).
  sendonce template render --tenant T --name N --channel C [--locale L]
                           [--data JSON] [--output text|json]
      previews the message a request with this data would get, resolving the
      locale as the sender does.
  sendonce template import-examples --tenant T
      stores the example templates shipped with sendonce for tenant T (each
      as a new version) and lists them.

Every subcommand takes --table NAME (default $SENDONCE_TABLE).
`,
	run: runTemplate,
}

func runTemplate(ctx context.Context, c *command, e env, args []string) error {
	if len(args) == 0 {
		return &usageError{cmd: c, msg: "template needs a subcommand: put, get, list, render or import-examples"}
	}
	sub, rest := args[0], args[1:]
	switch sub {
	case "put":
		return templatePut(ctx, c, e, rest)
	case "get":
		return templateGet(ctx, c, e, rest)
	case "list":
		return templateList(ctx, c, e, rest)
	case "render":
		return templateRender(ctx, c, e, rest)
	case "import-examples":
		return templateImport(ctx, c, e, rest)
	case "-h", "-help", "--help", "help":
		return helpRequest{cmd: c}
	}
	return &usageError{cmd: c, msg: fmt.Sprintf("unknown template subcommand %q (want put, get, list, render or import-examples)", sub)}
}

// templateFlags are the flags naming a template.
type templateFlags struct {
	table, tenant, name, channel, locale *string
	aws                                  *common
}

func newTemplateFlags(fs *flag.FlagSet, e env, withID bool) templateFlags {
	f := templateFlags{table: tableFlag(fs, e), tenant: fs.String("tenant", "", ""), aws: awsFlags(fs)}
	if withID {
		f.name, f.channel, f.locale = fs.String("name", "", ""), fs.String("channel", "", ""), fs.String("locale", "", "")
	}
	return f
}

// check parses args and returns a usage error for positional arguments or
// a missing required flag.
func (f templateFlags) check(c *command, sub string, fs *flag.FlagSet, args []string) error {
	pos, err := parse(c, fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return &usageError{cmd: c, msg: "template " + sub + ": unexpected arguments: " + strings.Join(pos, " ")}
	}
	need := []struct{ flag, v string }{{"--tenant", *f.tenant}}
	if f.name != nil {
		need = append(need, struct{ flag, v string }{"--name", *f.name}, struct{ flag, v string }{"--channel", *f.channel})
	}
	for _, n := range need {
		if n.v == "" {
			return &usageError{cmd: c, msg: "template " + sub + " needs " + n.flag}
		}
	}
	return needTable(c, *f.table)
}

func (f templateFlags) id() templates.ID {
	return templates.ID{Tenant: *f.tenant, Name: *f.name, Channel: *f.channel, Locale: *f.locale}
}

func (f templateFlags) store(ctx context.Context, e env) (*dynamotemplates.Store, error) {
	db, err := dynamoClient(ctx, e, f.aws)
	if err != nil {
		return nil, err
	}
	return dynamotemplates.New(db, *f.table), nil
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

func templatePut(ctx context.Context, c *command, e env, args []string) error {
	fs := newFlags(c)
	f := newTemplateFlags(fs, e, true)
	text, subject, html := fs.String("text", "", ""), fs.String("subject", "", ""), fs.String("html", "", "")
	if err := f.check(c, "put", fs, args); err != nil {
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
	if t.Text, err = readSource(e, *text); err != nil {
		return err
	}
	if *html != "" {
		if t.HTML, err = readSource(e, *html); err != nil {
			return err
		}
	}
	s, err := f.store(ctx, e)
	if err != nil {
		return err
	}
	got, err := s.Put(ctx, t)
	if err != nil {
		return templateError("put", t.ID, err)
	}
	if _, err := fmt.Fprintln(e.stdout, got.Version); err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "sendonce: stored %s version %d\n", got.ID, got.Version)
	return nil
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

func templateGet(ctx context.Context, c *command, e env, args []string) error {
	fs := newFlags(c)
	f := newTemplateFlags(fs, e, true)
	version := fs.Int("version", 0, "")
	if err := f.check(c, "get", fs, args); err != nil {
		return err
	}
	if *version < 0 {
		return &usageError{cmd: c, msg: "template get: --version must be 1 or more"}
	}
	s, err := f.store(ctx, e)
	if err != nil {
		return err
	}
	t, err := s.Get(ctx, f.id(), *version)
	if err != nil {
		if *version > 0 && errors.Is(err, templates.ErrNotFound) {
			return fmt.Errorf("template get: %s has no version %d", f.id(), *version)
		}
		return templateError("get", f.id(), err)
	}
	return printJSON(e.stdout, viewOf(t, true))
}

func templateList(ctx context.Context, c *command, e env, args []string) error {
	fs := newFlags(c)
	f := newTemplateFlags(fs, e, false)
	output := fs.String("output", "table", "")
	if err := f.check(c, "list", fs, args); err != nil {
		return err
	}
	if *output != "table" && *output != "json" {
		return &usageError{cmd: c, msg: "template list: --output must be table or json"}
	}
	s, err := f.store(ctx, e)
	if err != nil {
		return err
	}
	ts, err := s.List(ctx, *f.tenant)
	if err != nil {
		return fmt.Errorf("template list: %w", err)
	}
	if *output == "json" {
		for _, t := range ts {
			if err := printJSON(e.stdout, viewOf(t, false)); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tCHANNEL\tLOCALE\tVERSION\tCREATED")
	for _, t := range ts {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", t.Name, t.Channel, orDash(t.Locale), t.Version, t.CreatedAt.UTC().Format(time.RFC3339))
	}
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func templateRender(ctx context.Context, c *command, e env, args []string) error {
	fs := newFlags(c)
	f := newTemplateFlags(fs, e, true)
	data := fs.String("data", "{}", "")
	output := fs.String("output", "text", "")
	if err := f.check(c, "render", fs, args); err != nil {
		return err
	}
	if *output != "text" && *output != "json" {
		return &usageError{cmd: c, msg: "template render: --output must be text or json"}
	}
	var params map[string]any
	dec := json.NewDecoder(strings.NewReader(*data))
	dec.UseNumber() // as the sender decodes a request's data
	if err := dec.Decode(&params); err != nil {
		return &usageError{cmd: c, msg: "template render: --data must be a JSON object: " + err.Error()}
	}
	s, err := f.store(ctx, e)
	if err != nil {
		return err
	}
	m, err := render.New(s, render.WithCacheTTL(0)).Render(ctx, render.Input{
		Tenant: *f.tenant, Template: *f.name, Channel: *f.channel, Locale: *f.locale, Data: params,
	})
	if err != nil {
		return fmt.Errorf("template render: %w", err)
	}
	if *output == "json" {
		return printJSON(e.stdout, struct {
			Version int    `json:"version"`
			Locale  string `json:"locale,omitempty"`
			Subject string `json:"subject,omitempty"`
			Text    string `json:"text"`
			HTML    string `json:"html,omitempty"`
		}{m.TemplateVersion, m.TemplateLocale, m.Subject, m.Body, m.HTML})
	}
	var b strings.Builder
	if m.Subject != "" {
		fmt.Fprintf(&b, "Subject: %s\n\n", m.Subject)
	}
	b.WriteString(m.Body + "\n")
	if m.HTML != "" {
		fmt.Fprintf(&b, "\n--- HTML part ---\n%s\n", strings.TrimRight(m.HTML, "\n"))
	}
	if _, err := io.WriteString(e.stdout, b.String()); err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "sendonce: rendered %s version %d\n", templates.ID{Tenant: *f.tenant, Name: *f.name, Channel: *f.channel, Locale: m.TemplateLocale}, m.TemplateVersion)
	return nil
}

func templateImport(ctx context.Context, c *command, e env, args []string) error {
	fs := newFlags(c)
	f := newTemplateFlags(fs, e, false)
	if err := f.check(c, "import-examples", fs, args); err != nil {
		return err
	}
	if err := templates.ValidateID(templates.ID{Tenant: *f.tenant, Name: "x", Channel: "sms"}); err != nil {
		return templateError("import-examples", templates.ID{Tenant: *f.tenant}, err)
	}
	s, err := f.store(ctx, e)
	if err != nil {
		return err
	}
	got, err := templates.ImportExamples(ctx, s, *f.tenant)
	if err != nil {
		return fmt.Errorf("template import-examples: %w", err)
	}
	for _, t := range got {
		fmt.Fprintf(e.stdout, "%s\t%s\t%s\t%s\n", t.Name, t.Channel, orDash(t.Locale), "v"+strconv.Itoa(t.Version))
	}
	return nil
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
