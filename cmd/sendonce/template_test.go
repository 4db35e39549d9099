package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestTemplateCommands(t *testing.T) {
	t.Parallel()
	b := setup(t)
	v1 := writeFile(t, "v1.txt", "Hello {{.name}}")
	v2 := writeFile(t, "v2.txt", "Hi {{.name}}, v2")

	t.Run("PutPrintsVersion", func(t *testing.T) {
		for i, f := range []string{v1, v2} {
			r := b.run(t, "template", "put", "--tenant", "acme", "--name", "greet", "--channel", "sms", "--text", f)
			if r.code != exitOK || r.stdout != []string{"1\n", "2\n"}[i] {
				t.Fatalf("put %d: exit %d stdout %q stderr %q", i+1, r.code, r.stdout, r.stderr)
			}
		}
		r := runWith(t, b.vars, "Olá {{.name}}", "template", "put", "--tenant", "acme", "--name", "greet", "--channel", "sms", "--locale", "pt", "--text", "-")
		if r.code != exitOK || r.stdout != "1\n" {
			t.Fatalf("put pt from stdin: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
		}
		html := writeFile(t, "mail.html", "<p>Hello {{.name}}</p>")
		r = b.run(t, "template", "put", "--tenant", "acme", "--name", "greet", "--channel", "email", "--subject", "Hi {{.name}}", "--text", v1, "--html", html)
		if r.code != exitOK || r.stdout != "1\n" {
			t.Fatalf("put email: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
		}
	})

	t.Run("PutRefusesBadTemplate", func(t *testing.T) {
		bad := writeFile(t, "bad.txt", "Hello {{.name")
		oneLineError(t, b.run(t, "template", "put", "--tenant", "acme", "--name", "bad", "--channel", "sms", "--text", bad), "refused: text: does not parse")
		oneLineError(t, b.run(t, "template", "put", "--tenant", "acme", "--name", "bad", "--channel", "email", "--text", v1), "subject: is required for email")
		if r := b.run(t, "template", "get", "--tenant", "acme", "--name", "bad", "--channel", "sms"); r.code != exitError {
			t.Errorf("a refused template was stored: %+v", r)
		}
	})

	t.Run("Get", func(t *testing.T) {
		r := b.run(t, "template", "get", "--tenant", "acme", "--name", "greet", "--channel", "sms", "--version", "1")
		var v templateView
		if r.code != exitOK || json.Unmarshal([]byte(r.stdout), &v) != nil || v.Version != 1 || v.Text != "Hello {{.name}}" {
			t.Fatalf("get v1: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
		}
		oneLineError(t, b.run(t, "template", "get", "--tenant", "other", "--name", "greet", "--channel", "sms"), "unknown template other/greet/sms")
		oneLineError(t, b.run(t, "template", "get", "--tenant", "acme", "--name", "greet", "--channel", "sms", "--version", "9"), "has no version 9")
	})

	t.Run("Render", func(t *testing.T) {
		r := b.run(t, "template", "render", "--tenant", "acme", "--name", "greet", "--channel", "sms", "--locale", "pt-BR", "--data", `{"name":"Ana"}`, "--output", "text")
		if r.code != exitOK || r.stdout != "Olá Ana\n" {
			t.Fatalf("render pt-BR: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
		}
		r = b.run(t, "template", "render", "--tenant", "acme", "--name", "greet", "--channel", "sms", "--data", `{"name":"Ana"}`, "--output", "json")
		if r.code != exitOK || !strings.Contains(r.stdout, `"version": 2`) || !strings.Contains(r.stdout, `"text": "Hi Ana, v2"`) {
			t.Fatalf("render json: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
		}
		r = b.run(t, "template", "render", "--tenant", "acme", "--name", "greet", "--channel", "email", "--data", `{"name":"<b>"}`, "--output", "table")
		if r.code != exitOK || !strings.Contains(r.stdout, "Subject: Hi <b>\n\nHello <b>\n") || !strings.Contains(r.stdout, "<p>Hello &lt;b&gt;</p>") {
			t.Fatalf("render email: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
		}
		oneLineError(t, b.run(t, "template", "render", "--tenant", "acme", "--name", "greet", "--channel", "sms", "--data", `{}`), `no entry for key "name"`)
		oneLineError(t, b.run(t, "template", "render", "--tenant", "other", "--name", "greet", "--channel", "sms"), "unknown template")
		if r := b.run(t, "template", "render", "--tenant", "acme", "--name", "greet", "--channel", "sms", "--data", `[1]`); r.code != exitUsage {
			t.Errorf("bad --data: exit %d, want %d", r.code, exitUsage)
		}
	})

	t.Run("ListAndImport", func(t *testing.T) {
		r := b.run(t, "template", "import-examples", "--tenant", "shop", "--output", "text")
		if r.code != exitOK || strings.Count(r.stdout, "\n") != 8 || !strings.Contains(r.stdout, "order_shipped\tsms\tes\t1\t") {
			t.Fatalf("import: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
		}
		r = b.run(t, "template", "list", "--tenant", "acme", "--output", "table")
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if r.code != exitOK || len(lines) != 4 || !strings.HasPrefix(lines[0], "NAME") || !strings.Contains(lines[3], "greet  sms      pt      1") {
			t.Fatalf("list: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
		}
		// Piped, without --output: JSON lines, as every list (it printed
		// a table here once, against its help).
		r = b.run(t, "template", "list", "--tenant", "shop")
		if r.code != exitOK || strings.Count(r.stdout, "\n") != 8 || strings.Contains(r.stdout, `"text"`) || !strings.HasPrefix(r.stdout, `{"tenant":"shop"`) {
			t.Fatalf("list json: exit %d stdout %q", r.code, r.stdout)
		}
		if r := b.run(t, "template", "list", "--tenant", "nobody", "--output", "table"); r.code != exitOK || strings.Count(r.stdout, "\n") != 1 {
			t.Errorf("empty list: exit %d stdout %q", r.code, r.stdout)
		}
		if r := b.run(t, "template", "list", "--tenant", "nobody"); r.code != exitOK || r.stdout != "" {
			t.Errorf("empty list, json: exit %d stdout %q", r.code, r.stdout)
		}
	})
}

func TestTemplateUsage(t *testing.T) {
	t.Parallel()
	vars := map[string]string{"SENDONCE_TABLE": "t"}
	for _, args := range [][]string{
		{"template"}, {"template", "frobnicate"}, {"template", "put", "--tenant", "a", "--name", "n", "--channel", "sms"},
		{"template", "put", "--name", "n", "--channel", "sms", "--text", "f"}, {"template", "list"}, {"template", "get", "--tenant", "a", "--name", "n"},
		{"template", "list", "--tenant", "a", "--output", "xml"},
	} {
		if r := runWith(t, vars, "", args...); r.code != exitUsage || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, `(see "sendonce help template`) {
			t.Errorf("%q: exit %d stderr %q, want a one-line usage error", args, r.code, r.stderr)
		}
	}
	if r := runWith(t, vars, "", "help", "template"); r.code != exitOK || !strings.Contains(r.stdout, "import-examples") {
		t.Errorf("help template: exit %d stdout %q", r.code, r.stdout)
	}
	if r := runWith(t, vars, "", "template", "put", "--help"); r.code != exitOK {
		t.Errorf("template put --help: exit %d", r.code)
	}
}
