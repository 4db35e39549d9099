package lambdaenv

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/infra"
)

// functionWords are the names docs/configuration.md gives the functions in
// its function(s) column, by the template's logical IDs.
var functionWords = map[string]string{
	"SenderFunction":          "sender",
	"ReconcilerFunction":      "reconciler",
	"ReconcileWorkerFunction": "reconcileworker",
	"WebhookFunction":         "webhook",
	"ApiFunction":             "api",
	"SesEventsFunction":       "sesevents",
}

// TestConfigurationFunctions: for every variable template.full.yaml sets
// on a function, docs/configuration.md's row names that function (or
// "all"), so the column says where an operator's setting takes effect.
// The column may name more functions (one that reads a variable with its
// default, which the template does not set).
func TestConfigurationFunctions(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	set := templateVariables(t, filepath.Join(root, "template.full.yaml"))
	if len(set) != len(functionWords) {
		t.Fatalf("template.full.yaml has the functions %v, want %d: update functionWords", slices.Sorted(mapKeys(set)), len(functionWords))
	}
	rows := functionColumn(t, filepath.Join(root, "docs", "configuration.md"))
	for id, vars := range set {
		fn := functionWords[id]
		for _, v := range vars {
			listed, ok := rows[v]
			if !ok {
				continue // TestConfigurationTable reports a missing row
			}
			if !listed["all"] && !listed[fn] {
				t.Errorf("docs/configuration.md: %s's row does not name %s, whose template sets it", v, fn)
			}
		}
	}
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// templateVariables returns the SENDONCE_* variables template sets on
// each function (its own Environment and the Globals'), by logical ID.
func templateVariables(t *testing.T, template string) map[string][]string {
	t.Helper()
	tpl, err := infra.Load(template)
	if err != nil {
		t.Fatal(err)
	}
	globals := variables(tpl.Globals["Function"])
	out := map[string][]string{}
	for id, r := range tpl.Resources {
		if r["Type"] == "AWS::Serverless::Function" {
			props, _ := r["Properties"].(map[string]any)
			out[id] = append(variables(props), globals...)
		}
	}
	return out
}

// variables returns the SENDONCE_* keys of properties' Environment.Variables.
func variables(properties map[string]any) []string {
	env, _ := properties["Environment"].(map[string]any)
	vars, _ := env["Variables"].(map[string]any)
	var vs []string
	for k := range vars {
		if strings.HasPrefix(k, "SENDONCE_") {
			vs = append(vs, k)
		}
	}
	return vs
}

// functionWord matches a function's name in the function(s) column.
var functionWord = regexp.MustCompile(`\b(all|sender|reconciler|reconcile ?worker|webhook|api|sesevents)\b`)

// functionColumn returns, for each variable of doc's table, the functions
// its second cell names ("reconcile worker" as reconcileworker).
func functionColumn(t *testing.T, doc string) map[string]map[string]bool {
	t.Helper()
	b, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]map[string]bool{}
	for line := range strings.Lines(string(b)) {
		cells := strings.Split(strings.TrimSpace(line), "|")
		if len(cells) < 4 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`SENDONCE_") {
			continue
		}
		fns := map[string]bool{}
		// Only the column's plain words: a parenthesis explains, it does
		// not list ("the reconciler reads it too").
		plain, _, _ := strings.Cut(cells[2], "(")
		for _, w := range functionWord.FindAllString(plain, -1) {
			fns[strings.ReplaceAll(w, " ", "")] = true
		}
		for _, name := range varName.FindAllString(cells[1], -1) {
			rows[name] = fns
		}
	}
	return rows
}
