package templates_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/templates"
)

func TestFallback(t *testing.T) {
	t.Parallel()
	for locale, want := range map[string][]string{
		"pt-BR": {"pt-BR", "pt", ""}, "pt": {"pt", ""}, "": {""}, "zh_Hant_TW": {"zh_Hant_TW", "zh_Hant", "zh", ""},
	} {
		if got := templates.Fallback(locale); !slices.Equal(got, want) {
			t.Errorf("Fallback(%q) = %q, want %q", locale, got, want)
		}
	}
}

func TestExamplesValid(t *testing.T) {
	t.Parallel()
	ex, err := templates.Examples("acme")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ex {
		names = append(names, e.ID.String())
		if e.Channel == "email" && e.Subject == "" {
			t.Errorf("%s: email example without subject", e.ID)
		}
	}
	if len(ex) != 8 || !slices.Contains(names, "acme/order_shipped/sms/es") {
		t.Errorf("examples = %q", names)
	}
	if i := slices.Index(names, "acme/order_shipped/email"); i < 0 || !strings.Contains(ex[i].HTML, "<strong>") {
		t.Errorf("order_shipped email has no HTML part")
	}
}

func TestCompileErrors(t *testing.T) {
	t.Parallel()
	_, err := templates.Compile(templates.Template{ID: templates.ID{Tenant: "a", Name: "n", Channel: "sms"}, Text: "Hi {{.name"})
	var ie *templates.InvalidError
	if !errors.As(err, &ie) || ie.Field != "text" || !strings.Contains(ie.Reason, "does not parse: line 1") {
		t.Fatalf("err = %v", err)
	}
	big := templates.Template{ID: templates.ID{Tenant: "a", Name: "n", Channel: "sms"}, Text: strings.Repeat("x", templates.MaxTextSize+1)}
	if err := templates.Validate(big); !errors.As(err, &ie) || ie.Field != "text" {
		t.Fatalf("oversized text err = %v", err)
	}
}

func TestExecuteHTMLEscapes(t *testing.T) {
	t.Parallel()
	c, err := templates.Compile(templates.Template{ID: templates.ID{Tenant: "a", Name: "n", Channel: "email"},
		Subject: "Hi {{.name}}", Text: "Hi {{.name}}", HTML: "<p>Hi {{.name}}</p>"})
	if err != nil {
		t.Fatal(err)
	}
	s, text, html, err := c.Execute(map[string]any{"name": "<script>"})
	if err != nil || s != "Hi <script>" || text != "Hi <script>" || html != "<p>Hi &lt;script&gt;</p>" {
		t.Errorf("Execute = %q %q %q %v", s, text, html, err)
	}
}

// FuzzCompile: Compile never panics; what it accepts satisfies the rules it
// states, and executing it on any data ends in output or an *ExecError.
func FuzzCompile(f *testing.F) {
	f.Add("email", "Hi {{.name}}", "Hello {{.name}}", "<p>{{.name}}</p>", "name", "Ana")
	f.Add("sms", "", "{{range .}}{{.}}{{end}}", "", "x", "1")
	f.Add("push", "{{.t}}", "{{template \"x\"}}", "", "", "")
	f.Add("email", "s", "{{if .a}}{{end", "<a href=\"{{.u}}\">", "u", "javascript:alert(1)")
	f.Fuzz(func(t *testing.T, channel, subject, text, html, key, value string) {
		tpl := templates.Template{ID: templates.ID{Tenant: "acme", Name: "n", Channel: channel}, Subject: subject, Text: text, HTML: html}
		c, err := templates.Compile(tpl)
		if err != nil {
			var ie *templates.InvalidError
			if !errors.As(err, &ie) || ie.Reason == "" {
				t.Fatalf("Compile error %v is not an explained *InvalidError", err)
			}
			return
		}
		if strings.TrimSpace(text) == "" || strings.ContainsAny(subject, "\r\n") || (channel == "email") == (strings.TrimSpace(subject) == "") && channel == "email" {
			t.Fatalf("Compile accepted %+v", tpl)
		}
		if channel != "email" && html != "" {
			t.Fatalf("Compile accepted HTML for %s", channel)
		}
		s, body, _, err := c.Execute(map[string]any{key: value})
		if err != nil {
			var ee *templates.ExecError
			if !errors.As(err, &ee) {
				t.Fatalf("Execute error %v is not an *ExecError", err)
			}
			return
		}
		if strings.ContainsAny(s, "\r\n") || strings.TrimSpace(body) == "" {
			t.Fatalf("Execute returned subject %q body %q", s, body)
		}
	})
}

// TestExecuteOutputBounded: a template whose nested calls double the
// output 40 times fails with a clear error instead of exhausting memory.
func TestExecuteOutputBounded(t *testing.T) {
	t.Parallel()
	var src strings.Builder
	src.WriteString(`{{define "t0"}}xxxxxxxxxxxxxxxx{{end}}`)
	for i := 1; i <= 40; i++ {
		fmt.Fprintf(&src, `{{define "t%d"}}{{template "t%d"}}{{template "t%d"}}{{end}}`, i, i-1, i-1)
	}
	src.WriteString(`{{template "t40"}}`)
	c, err := templates.Compile(templates.Template{ID: templates.ID{Tenant: "a", Name: "n", Channel: "sms"}, Text: src.String()})
	if err != nil {
		t.Fatal(err)
	}
	_, _, _, err = c.Execute(nil)
	var ee *templates.ExecError
	if !errors.As(err, &ee) || !strings.Contains(ee.Detail, "exceeds") {
		t.Fatalf("Execute err = %v, want an *ExecError about the size", err)
	}
}
