package templates_test

import (
	"errors"
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
