package templates

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"slices"
	"strings"
)

// examples are the templates "sendonce template import-examples" stores:
// examples/<name>.<channel>[.<locale>].tmpl holds the text (an email's or
// push message's first line "Subject: ...", then a blank line), and an
// optional examples/<name>.<channel>[.<locale>].html the email's HTML part.
//
//go:embed examples/*
var examples embed.FS

// Examples returns the example templates for tenant, ordered as List
// orders them. They are valid (a test guards it).
func Examples(tenant string) ([]Template, error) {
	entries, err := fs.ReadDir(examples, "examples")
	if err != nil {
		return nil, fmt.Errorf("templates: read examples: %w", err)
	}
	var out []Template
	for _, e := range entries {
		base, ok := strings.CutSuffix(e.Name(), ".tmpl")
		if !ok {
			continue
		}
		parts := strings.Split(base, ".")
		if len(parts) < 2 || len(parts) > 3 {
			return nil, fmt.Errorf("templates: example %s is not name.channel[.locale].tmpl", e.Name())
		}
		t := Template{ID: ID{Tenant: tenant, Name: parts[0], Channel: parts[1]}}
		if len(parts) == 3 {
			t.Locale = parts[2]
		}
		src, err := fs.ReadFile(examples, "examples/"+e.Name())
		if err != nil {
			return nil, fmt.Errorf("templates: read example %s: %w", e.Name(), err)
		}
		t.Subject, t.Text = SplitSubject(string(src))
		if html, err := fs.ReadFile(examples, "examples/"+base+".html"); err == nil {
			t.HTML = string(html)
		}
		if err := Validate(t); err != nil {
			return nil, fmt.Errorf("templates: example %s: %w", e.Name(), err)
		}
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b Template) int {
		if Less(a.ID, b.ID) {
			return -1
		}
		return 1
	})
	return out, nil
}

// SplitSubject splits a source that starts with a "Subject: ..." line and
// a blank line into the subject and the rest; a source without one has
// no subject.
func SplitSubject(src string) (subject, text string) {
	rest, ok := strings.CutPrefix(src, "Subject: ")
	if !ok {
		return "", src
	}
	subject, text, _ = strings.Cut(rest, "\n")
	return strings.TrimSpace(subject), strings.TrimPrefix(text, "\n")
}

// ImportExamples puts every example template for tenant into s (each a new
// version) and returns what was stored.
func ImportExamples(ctx context.Context, s Store, tenant string) ([]Template, error) {
	ex, err := Examples(tenant)
	if err != nil {
		return nil, err
	}
	out := make([]Template, 0, len(ex))
	for _, t := range ex {
		got, err := s.Put(ctx, t)
		if err != nil {
			return out, fmt.Errorf("templates: import %s: %w", t.ID, err)
		}
		out = append(out, got)
	}
	return out, nil
}
