package infra

import (
	"fmt"
	"go.yaml.in/yaml/v3"
	"os"
	"strings"
	"testing"
)

const (
	guidedBegin = "<!-- BEGIN guided session: made by infra's TestGuidedSession from template.yaml and samconfig.toml (make template) -->\n"
	guidedEnd   = "<!-- END guided session -->\n"
)

// guidedRegion stands for the deployer's default Region in the session
// the README shows.
const guidedRegion = "us-east-1"

// guidedSession renders the prompts as the README shows them.
func guidedSession(prompts []Prompt) string {
	var b strings.Builder
	b.WriteString("    $ sam build && sam deploy --guided\n")
	b.WriteString("    ...\n")
	b.WriteString("            Setting default arguments for 'sam deploy'\n")
	b.WriteString("            =========================================\n")
	for _, p := range prompts {
		if p.Text == "Deploy this changeset? [y/N]:" {
			b.WriteString("    ...\n    Previewing CloudFormation changeset before deployment\n    ...\n")
			fmt.Fprintf(&b, "    %s\n", p.Text)
			continue
		}
		if p.Note != "" {
			fmt.Fprintf(&b, "            %s\n", p.Note)
		}
		fmt.Fprintf(&b, "            %s\n", p.Text)
	}
	return b.String()
}

// TestGuidedSession: `sam deploy --guided` asks at most eight questions
// about the stack (template.yaml's parameters), and the README shows the
// whole session as the SAM CLI words it (GuidedPrompts; no SAM CLI runs
// here): make template rewrites the README's block after a change.
func TestGuidedSession(t *testing.T) {
	t.Parallel()
	tpl, err := os.ReadFile(quickPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile("../samconfig.toml")
	if err != nil {
		t.Fatal(err)
	}
	prompts, err := GuidedPrompts(tpl, ParseSAMConfig(cfg), guidedRegion)
	if err != nil {
		t.Fatal(err)
	}
	params := 0
	for _, p := range prompts {
		if p.Parameter != "" {
			params++
		}
	}
	if params == 0 || params > 8 {
		t.Errorf("sam deploy --guided asks %d questions about the stack, want 1 to 8", params)
	}
	t.Logf("%d prompts, %d of them template parameters", len(prompts), params)
	block := guidedBegin + guidedSession(prompts) + guidedEnd
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(readme)
	i, j := strings.Index(text, guidedBegin), strings.Index(text, guidedEnd)
	if i < 0 || j < i {
		t.Fatalf("README.md has no %q ... %q block", strings.TrimSpace(guidedBegin), strings.TrimSpace(guidedEnd))
	}
	if *update {
		text = text[:i] + block + text[j+len(guidedEnd):]
		if err := os.WriteFile("../README.md", []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if got := text[i : j+len(guidedEnd)]; got != block {
		t.Errorf("README.md's guided session is not what sam deploy --guided asks for template.yaml: run make template\ngot:\n%s\nwant:\n%s", got, block)
	}
}

// TestGuidedPrompts: the prompts follow the SAM CLI's rules on a small
// template: every parameter (samconfig's override, else its Default; a
// NoEcho one without a default), an authentication confirmation per API
// event without Auth and per Function URL with AuthType NONE, none for
// an API with Auth.
func TestGuidedPrompts(t *testing.T) {
	t.Parallel()
	tpl := `
Parameters:
  B: {Type: String, Default: x}
  A: {Type: String, Default: "", NoEcho: true}
  C: {Type: Number, Default: 3}
Resources:
  Open: {Type: AWS::Serverless::HttpApi}
  Closed: {Type: AWS::Serverless::HttpApi, Properties: {Auth: {EnableIamAuthorizer: true}}}
  F:
    Type: AWS::Serverless::Function
    Properties:
      FunctionUrlConfig: {AuthType: NONE}
      Events:
        One: {Type: HttpApi, Properties: {ApiId: !Ref Open, Path: /a, Method: GET}}
        Two: {Type: HttpApi, Properties: {ApiId: !Ref Closed, Path: /b, Method: GET}}
        Three: {Type: HttpApi, Properties: {ApiId: !Ref Open, Path: /c, Method: GET, Auth: {Authorizer: AWS_IAM}}}
        Queue: {Type: SQS, Properties: {Queue: arn}}
`
	got, err := GuidedPrompts([]byte(tpl), ParseSAMConfig([]byte("[default.global.parameters]\nstack_name = \"s\"\n[default.deploy.parameters]\nconfirm_changeset = false\nparameter_overrides = \"C=\\\"7\\\" B=\\\"\\\"\"\n[other.deploy.parameters]\nstack_name = \"no\"\n")), "eu-west-1")
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, p := range got {
		texts = append(texts, p.Text)
	}
	want := []string{
		"Stack Name [s]:", "AWS Region [eu-west-1]:",
		"Parameter B [x]:", "Parameter A:", "Parameter C [7]:",
		"Confirm changes before deploy [y/N]:", "Allow SAM CLI IAM role creation [Y/n]:", "Disable rollback [y/N]:",
		"F has no authentication. Is this okay? [y/N]:", "F Function Url has no authentication. Is this okay? [y/N]:",
		"Save arguments to configuration file [Y/n]:", "SAM configuration file [samconfig.toml]:", "SAM configuration environment [default]:",
	}
	if strings.Join(texts, "\n") != strings.Join(want, "\n") {
		t.Errorf("prompts:\n%s\nwant:\n%s", strings.Join(texts, "\n"), strings.Join(want, "\n"))
	}
}

const (
	tuningBegin = "<!-- BEGIN tuning: made by infra's TestTuningTable from template.full.yaml (make template) -->\n"
	tuningEnd   = "<!-- END tuning -->\n"
)

// TestTuningTable: docs/deploy.md lists every setting template.yaml does
// not ask for, with the default it fixes and what it sets, as
// template.full.yaml declares them (make template rewrites the table).
func TestTuningTable(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile(templatePath)
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		t.Fatal(err)
	}
	root := doc.Content[0]
	kept := map[string]bool{}
	for _, k := range QuickStart.Keep {
		kept[k.Name] = true
	}
	var b strings.Builder
	b.WriteString("| group | parameter | default | what it sets |\n|---|---|---|---|\n")
	rows := 0
	groups := get(get(get(root, "Metadata"), "AWS::CloudFormation::Interface"), "ParameterGroups")
	for _, grp := range groups.Content {
		label := get(get(grp, "Label"), "default").Value
		first := true
		for _, pn := range get(grp, "Parameters").Content {
			if kept[pn.Value] {
				continue
			}
			p := get(get(root, "Parameters"), pn.Value)
			def := get(p, "Default").Value
			if def == "" {
				def = "(empty)"
			}
			g := ""
			if first {
				g, first = label, false
			}
			desc := strings.Join(strings.Fields(get(p, "Description").Value), " ")
			desc = strings.NewReplacer("<", "&lt;", ">", "&gt;").Replace(desc)
			fmt.Fprintf(&b, "| %s | `%s` | `%s` | %s |\n", g, pn.Value, def, strings.ReplaceAll(desc, "|", `\|`))
			rows++
		}
	}
	if want := len(get(root, "Parameters").Content)/2 - len(kept); rows != want {
		t.Fatalf("the groups list %d of the %d parameters template.yaml fixes", rows, want)
	}
	params := len(get(root, "Parameters").Content) / 2
	for file, phrase := range map[string]string{
		"../docs/deploy.md": fmt.Sprintf("every setting as a parameter, %d in %d groups", params, len(groups.Content)),
		"../README.md":      fmt.Sprintf("every one of its %d settings", params),
	} {
		if data, err := os.ReadFile(file); err != nil || !strings.Contains(strings.Join(strings.Fields(string(data)), " "), phrase) {
			t.Errorf("%s does not say %q", file, phrase)
		}
	}
	block := tuningBegin + b.String() + tuningEnd
	path := "../docs/deploy.md"
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	i, j := strings.Index(text, tuningBegin), strings.Index(text, tuningEnd)
	if i < 0 || j < i {
		t.Fatalf("%s has no tuning block", path)
	}
	if *update {
		if err := os.WriteFile(path, []byte(text[:i]+block+text[j+len(tuningEnd):]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if text[i:j+len(tuningEnd)] != block {
		t.Errorf("%s's tuning table is not template.full.yaml's: run make template", path)
	}
}
