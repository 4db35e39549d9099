package apicheck_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/apicheck"
)

// TestGodocNamesNoInternalPackage: the doc comments of the public
// packages (what a user reads on pkg.go.dev) never send the reader to a
// package they cannot import: no "internal/", no "dispatch.Dispatcher",
// no "package reconcile".
func TestGodocNamesNoInternalPackage(t *testing.T) {
	entries, err := os.ReadDir("..")
	if err != nil {
		t.Fatal(err)
	}
	public := map[string]bool{}
	for _, pkg := range apicheck.PublicPackages {
		public[pkg[strings.LastIndex(pkg, "/")+1:]] = true
	}
	var names []string
	for _, e := range entries {
		// internal/provider shares its name with the public package.
		if e.IsDir() && !public[e.Name()] {
			names = append(names, regexp.QuoteMeta(e.Name()))
		}
	}
	internalRef := regexp.MustCompile(`internal/|\b(` + strings.Join(names, "|") + `)\.[A-Z]\w*|\bpackages? (` + strings.Join(names, "|") + `)\b`)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, pkg := range apicheck.PublicPackages {
		dir := filepath.Join(root, strings.TrimPrefix(strings.TrimPrefix(pkg, "github.com/sendonce/sendonce"), "/"))
		fset := token.NewFileSet()
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			check := func(g *ast.CommentGroup) {
				if g == nil {
					return
				}
				text := strings.Join(strings.Fields(g.Text()), " ") // a name may span lines
				for _, m := range internalRef.FindAllString(text, -1) {
					t.Errorf("%s: %s: doc comment names an internal package: %q", pkg, fset.Position(g.Pos()), m)
				}
			}
			check(f.Doc)
			ast.Inspect(f, func(n ast.Node) bool {
				switch d := n.(type) {
				case *ast.GenDecl:
					check(d.Doc)
				case *ast.FuncDecl:
					if d.Name.IsExported() {
						check(d.Doc)
					}
				case *ast.TypeSpec:
					check(d.Doc)
				case *ast.ValueSpec:
					check(d.Doc)
				case *ast.Field:
					check(d.Doc)
				}
				return true
			})
		}
	}
}
