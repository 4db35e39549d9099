package docs_test

import (
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// publicPackages are the packages outside internal/ that a program
// imports: the module's public API (docs/library.md).
var publicPackages = []string{".", "lambdaapp", "notify", "provider", "provider/providertest",
	"provider/httpprovider", "provider/lambdaprovider", "provider/sesprovider", "provider/smtpprovider", "provider/snsprovider", "provider/twilioprovider"}

// TestPublicAPIDocumented fails when an exported name of a public package
// (a type, function, method, constant or variable) has no doc comment,
// or a public package has no package doc: `go doc` of each must read as
// a guide.
func TestPublicAPIDocumented(t *testing.T) {
	t.Parallel()
	for _, dir := range publicPackages {
		fset := token.NewFileSet()
		pkgs, err := parser.ParseDir(fset, filepath.Join(root, dir), func(fi fs.FileInfo) bool {
			return !strings.HasSuffix(fi.Name(), "_test.go")
		}, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		if len(pkgs) != 1 {
			t.Fatalf("%s: %d packages, want 1", dir, len(pkgs))
		}
		for _, pkg := range pkgs {
			files := make([]*ast.File, 0, len(pkg.Files))
			for _, f := range pkg.Files {
				files = append(files, f)
			}
			p, err := doc.NewFromFiles(fset, files, "github.com/sendonce/sendonce/"+dir)
			if err != nil {
				t.Fatal(err)
			}
			missing := func(kind, name, text string) {
				if strings.TrimSpace(text) == "" {
					t.Errorf("%s: %s %s has no doc comment", dir, kind, name)
				}
			}
			missing("package", p.Name, p.Doc)
			values := func(vs []*doc.Value) {
				for _, v := range vs {
					for _, spec := range v.Decl.Specs {
						vs := spec.(*ast.ValueSpec)
						for _, n := range vs.Names {
							if n.IsExported() && strings.TrimSpace(v.Doc) == "" && vs.Doc == nil && vs.Comment == nil {
								t.Errorf("%s: %s has no doc comment (on it or its group)", dir, n.Name)
							}
						}
					}
				}
			}
			values(p.Consts)
			values(p.Vars)
			for _, f := range p.Funcs {
				missing("func", f.Name, f.Doc)
			}
			for _, typ := range p.Types {
				missing("type", typ.Name, typ.Doc)
				values(typ.Consts)
				values(typ.Vars)
				for _, f := range typ.Funcs {
					missing("func", f.Name, f.Doc)
				}
				for _, m := range typ.Methods {
					if ast.IsExported(m.Name) {
						missing("method", typ.Name+"."+m.Name, m.Doc)
					}
				}
			}
		}
	}
}
