package lambdaenv

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// varName matches a SENDONCE_* variable's name.
var varName = regexp.MustCompile(`SENDONCE_[A-Z0-9_]*[A-Z0-9]`)

// harness reports whether name belongs to the tests and local scripts,
// not to a deployment (docs/configuration.md, "Not configuration").
func harness(name string) bool {
	return strings.HasPrefix(name, "SENDONCE_TEST_") || strings.HasPrefix(name, "SENDONCE_LOCAL_")
}

// TestConfigurationTable: docs/configuration.md lists every SENDONCE_*
// variable the code reads, and only those. The code's names are the
// string literals of the non-test Go files of functions/, internal/ and
// cmd/; a secret's row also lists its _PARAM form, which the code builds
// (Env.Secret) rather than spells.
func TestConfigurationTable(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	code := codeNames(t, root, "functions", "internal", "cmd", "lambdaapp", ".")
	table := tableNames(t, filepath.Join(root, "docs", "configuration.md"))
	if len(code) < 40 || len(table) < 40 {
		t.Fatalf("found %d names in the code and %d in the table: the scan is broken", len(code), len(table))
	}
	for name := range code {
		if _, ok := table[name]; !ok {
			t.Errorf("%s is read by the code (%s) but missing from docs/configuration.md", name, code[name])
		}
	}
	for name, secret := range table {
		if _, ok := code[name]; ok {
			continue
		}
		base, isParam := strings.CutSuffix(name, ParamSuffix)
		if isParam && secret && code[base] != "" {
			continue
		}
		t.Errorf("docs/configuration.md lists %s, which the code does not read", name)
	}
}

// codeNames returns the SENDONCE_* names in the string literals of the
// non-test Go files under root's dirs ("." for the root package's files,
// without its subdirectories), each with one file it is in.
func codeNames(t *testing.T, root string, dirs ...string) map[string]string {
	t.Helper()
	names := map[string]string{}
	fset := token.NewFileSet()
	for _, dir := range dirs {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() && dir == "." && path != filepath.Join(root, dir) {
				return fs.SkipDir // ".": the root package's own files only
			}
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					for _, name := range varName.FindAllString(lit.Value, -1) {
						if !harness(name) && names[name] == "" {
							names[name], _ = filepath.Rel(root, path)
						}
					}
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return names
}

// tableNames returns the names in the first cell of each row of the
// table of doc, each with whether its last cell says it is a secret.
func tableNames(t *testing.T, doc string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for line := range strings.Lines(string(b)) {
		cells := strings.Split(strings.TrimSpace(line), "|")
		if len(cells) < 4 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`SENDONCE_") {
			continue
		}
		secret := strings.TrimSpace(cells[len(cells)-2])
		if !slices.Contains([]string{"yes", "no"}, secret) {
			t.Errorf("row %q: the secret cell is %q, want yes or no", strings.TrimSpace(line), secret)
		}
		for _, name := range varName.FindAllString(cells[1], -1) {
			if _, dup := names[name]; dup {
				t.Errorf("docs/configuration.md lists %s twice", name)
			}
			names[name] = secret == "yes"
		}
	}
	return names
}
