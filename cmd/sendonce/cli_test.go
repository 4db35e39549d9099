package main

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"
)

func TestAPIKeyList(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var secrets, ids []string
	for _, tenant := range []string{"acme", "acme", "globex"} {
		r := b.run(t, "apikey", "create", "--tenant", tenant)
		if r.code != 0 {
			t.Fatalf("create: %s", r.stderr)
		}
		secret := strings.TrimSpace(r.stdout)
		secrets = append(secrets, secret)
		ids = append(ids, secret[3:19])
	}
	if r := b.run(t, "apikey", "revoke", ids[1]); r.code != 0 {
		t.Fatal(r.stderr)
	}
	r := b.run(t, "apikey", "list", "--tenant", "acme")
	got := okRowsBy(t, r, "id", 2)
	for _, row := range got {
		if row["tenant"] != "acme" || row["created_at"] == nil {
			t.Errorf("row %v: want acme with a creation time", row)
		}
	}
	if got[ids[0]]["revoked"] != false || got[ids[1]]["revoked"] != true || got[ids[1]]["revoked_at"] == nil {
		t.Errorf("rows %v: want %s live and %s revoked with a time", got, ids[0], ids[1])
	}
	for _, s := range secrets {
		if strings.Contains(r.stdout, s[20:]) {
			t.Errorf("apikey list printed a secret")
		}
	}
	if tab := b.run(t, "apikey", "list", "--tenant", "globex", "--output", "table"); tab.code != 0 || !strings.Contains(tab.stdout, ids[2]) || !strings.HasPrefix(tab.stdout, "ID") {
		t.Errorf("table = %q", tab.stdout)
	}
	if none := b.run(t, "apikey", "list", "--tenant", "initech"); none.code != 0 || none.stdout != "" {
		t.Errorf("a tenant without keys: exit %d %q", none.code, none.stdout)
	}
	oneLineError(t, b.run(t, "apikey", "list", "--tenant", "a b"), "is not 1 to 64")
	if u := b.run(t, "apikey", "list"); u.code != exitUsage {
		t.Errorf("no --tenant: exit %d, want 2", u.code)
	}
}

func TestVersionAndHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--version"}, {"version"}} {
		r := runWith(t, nil, "", args...)
		if r.code != 0 || !strings.HasPrefix(r.stdout, "sendonce ") || !strings.Contains(r.stdout, "go1.") {
			t.Errorf("%v: exit %d, stdout %q", args, r.code, r.stdout)
		}
	}
	for _, c := range leaves(newRoot(&app{})) {
		words := strings.Fields(name(c))
		for _, args := range [][]string{append([]string{"help"}, words...), append(words, "-h")} {
			r := runWith(t, nil, "", args...)
			if r.code != 0 || !strings.HasPrefix(r.stdout, "Usage:\n  sendonce "+name(c)) || !strings.Contains(r.stdout, "--endpoint-url") {
				t.Errorf("%v: exit %d, stdout %.80q", args, r.code, r.stdout)
			}
		}
	}
	for _, g := range []string{"apikey", "dlq", "template"} {
		if r := runWith(t, nil, "", "help", g); r.code != 0 || !strings.Contains(r.stdout, "sendonce "+g+" list") {
			t.Errorf("help %s: exit %d %q", g, r.code, r.stdout)
		}
	}
}

// leaves returns the commands under c that do the work (not the groups,
// not help), depth first.
func leaves(c *cobra.Command) []*cobra.Command {
	var out []*cobra.Command
	for _, s := range c.Commands() {
		switch {
		case !s.IsAvailableCommand() || s.Name() == "help":
		case s.HasSubCommands():
			out = append(out, leaves(s)...)
		default:
			out = append(out, s)
		}
	}
	return out
}

// TestRunbook checks docs/operations.md against template.yaml and the
// CLI: every alarm the template declares has a section naming it, each
// section names at least one sendonce command, and every sendonce command
// the runbook names exists and its flags parse.
func TestRunbook(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := os.ReadFile("../../template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var template struct {
		Resources map[string]struct {
			Type string `yaml:"Type"`
		} `yaml:"Resources"`
	}
	if err := yaml.Unmarshal(tpl, &template); err != nil {
		t.Fatal(err)
	}
	sections := map[string]string{} // heading → body
	var heading string
	for _, l := range strings.Split(string(doc), "\n") {
		if h, ok := strings.CutPrefix(l, "## "); ok {
			heading = h
			continue
		}
		sections[heading] += l + "\n"
	}
	alarms := 0
	for name, r := range template.Resources {
		if r.Type != "AWS::CloudWatch::Alarm" {
			continue
		}
		alarms++
		found := false
		for h, body := range sections {
			if strings.Contains(body, "Alarm: `"+name+"`") {
				found = true
				if len(runbookCommands(body)) == 0 {
					t.Errorf("section %q (%s) names no sendonce command", h, name)
				}
			}
		}
		if !found {
			t.Errorf("alarm %s has no runbook section (a line \"Alarm: `%s`\")", name, name)
		}
	}
	if alarms == 0 {
		t.Fatal("template.yaml declares no alarms: the test reads the wrong file")
	}
	cmds := runbookCommands(string(doc))
	if len(cmds) < alarms {
		t.Fatalf("only %d sendonce commands in the runbook", len(cmds))
	}
	for _, args := range cmds {
		// -h at the end: every flag before it is parsed, then the
		// command's help is printed (exit 0); an unknown command or flag,
		// or a bad flag value, is a usage error (exit 2).
		r := runWith(t, nil, "", append(args, "-h")...)
		c, _, err := newRoot(&app{}).Find(args)
		if r.code != 0 || err != nil || !c.HasParent() || !strings.HasPrefix(r.stdout, "Usage:\n  sendonce "+name(c)) {
			t.Errorf("runbook command %q: exit %d, stderr %q", strings.Join(args, " "), r.code, r.stderr)
		}
	}
}

var (
	codeSpanRE = regexp.MustCompile("`(sendonce [^`]+)`")
	codeLineRE = regexp.MustCompile(`(?m)^ {4,}(sendonce .+)$`)
)

// runbookCommands returns the sendonce commands in markdown text (inline
// code and indented code lines), split into arguments as a shell would
// (double and single quotes; no expansion), without "sendonce" and
// without a trailing "< file" or "| ...".
func runbookCommands(text string) [][]string {
	var out [][]string
	for _, re := range []*regexp.Regexp{codeSpanRE, codeLineRE} {
		for _, m := range re.FindAllStringSubmatch(text, -1) {
			line := m[1]
			if i := strings.IndexAny(line, "<|#"); i >= 0 {
				line = line[:i]
			}
			args := shellSplit(line)[1:]
			if len(args) > 0 {
				out = append(out, args)
			}
		}
	}
	return out
}

func shellSplit(s string) []string {
	var (
		args  []string
		cur   strings.Builder
		quote rune
		inArg bool
	)
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '"' || r == '\'':
			quote, inArg = r, true
		case r == ' ' || r == '\t':
			if inArg {
				args = append(args, cur.String())
				cur.Reset()
				inArg = false
			}
		default:
			cur.WriteRune(r)
			inArg = true
		}
	}
	if inArg {
		args = append(args, cur.String())
	}
	return args
}

func TestShellSplit(t *testing.T) {
	t.Parallel()
	got := shellSplit(`sendonce resolve KEY --as sent --reason "checked with the provider" --x 'a b'`)
	want := []string{"sendonce", "resolve", "KEY", "--as", "sent", "--reason", "checked with the provider", "--x", "a b"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("shellSplit = %q, want %q", got, want)
	}
}
