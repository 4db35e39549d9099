package apicheck_test

import (
	"archive/zip"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"go/token"
	"go/types"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/exp/apidiff"
	"golang.org/x/tools/go/gcexportdata"
	"golang.org/x/tools/go/packages"

	"github.com/sendonce/sendonce/internal/apicheck"
)

var update = flag.Bool("update", false, "record the current public API as the baseline (make api-baseline)")

const (
	modulePath = "github.com/sendonce/sendonce"
	// baseline is the recorded API as export data, in the zip format of
	// golang.org/x/exp/cmd/apidiff -m -w, so that `apidiff -m
	// api/sendonce.apidiff github.com/sendonce/sendonce` reads it too.
	baseline = "../../api/sendonce.apidiff"
	// listing is the same API as text, for people reading a diff.
	listing = "../../api/sendonce.txt"
)

const hint = `
The public API (%s) differs from the recorded baseline in api/.
If the change is intended:
  1. record it:   make api-baseline   (go test ./internal/apicheck -run TestAPI -update)
  2. say it in CHANGELOG.md, under Unreleased: what was added, changed or
     removed; an incompatible change needs a new major version (or, before
     v1, a minor one) and a migration note.
  3. commit api/sendonce.apidiff and api/sendonce.txt with the change.`

// TestAPI fails on any change of the public packages' exported API,
// compatible or not, that the baseline in api/ does not record.
func TestAPI(t *testing.T) {
	fset := token.NewFileSet()
	current := load(t, fset)
	text := list(current)
	if *update {
		if err := write(baseline, fset, current); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(listing, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("recorded the API of %d packages in %s and %s", len(current.Packages), baseline, listing)
		return
	}
	recorded, err := read(baseline, fset)
	if err != nil {
		t.Fatalf("read the API baseline: %v\nrecord it with: make api-baseline", err)
	}
	var report bytes.Buffer
	if changes := apidiff.ModuleChanges(recorded, current); len(changes.Changes) > 0 {
		if err := changes.Text(&report); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(listing)
	if err != nil {
		t.Fatalf("read the API listing: %v\nrecord it with: make api-baseline", err)
	}
	if report.Len() == 0 && string(want) != text {
		// apidiff saw nothing, yet the text differs: a change apidiff
		// does not report (or a stale listing). Show the lines.
		report.WriteString(lineDiff(string(want), text))
	}
	if report.Len() > 0 {
		t.Errorf("%s\n"+hint, strings.TrimSpace(report.String()), strings.Join(apicheck.PublicPackages, ", "))
	}
}

// load type-checks the public packages as they are now.
func load(t *testing.T, fset *token.FileSet) *apidiff.Module {
	t.Helper()
	cfg := &packages.Config{Fset: fset, Mode: packages.NeedName | packages.NeedTypes, Context: t.Context()}
	pkgs, err := packages.Load(cfg, apicheck.PublicPackages...)
	if err != nil {
		t.Fatal(err)
	}
	m := &apidiff.Module{Path: modulePath}
	for _, p := range pkgs {
		for _, e := range p.Errors {
			t.Errorf("load %s: %v", p.PkgPath, e)
		}
		m.Packages = append(m.Packages, p.Types)
	}
	if len(m.Packages) != len(apicheck.PublicPackages) {
		t.Fatalf("loaded %d packages, want %d", len(m.Packages), len(apicheck.PublicPackages))
	}
	slices.SortFunc(m.Packages, func(a, b *types.Package) int { return strings.Compare(a.Path(), b.Path()) })
	return m
}

// write stores m as cmd/apidiff -m -w does: a zip whose entry "module"
// holds the module path and each "<package path>.x" its export data.
func write(name string, fset *token.FileSet, m *apidiff.Module) error {
	var buf bytes.Buffer
	z := zip.NewWriter(&buf)
	w, err := z.Create("module")
	if err != nil {
		return err
	}
	if _, err := io.WriteString(w, m.Path); err != nil {
		return err
	}
	for _, p := range m.Packages {
		w, err := z.Create(p.Path() + ".x")
		if err != nil {
			return err
		}
		if err := gcexportdata.Write(w, fset, p); err != nil {
			return fmt.Errorf("write %s: %w", p.Path(), err)
		}
	}
	if err := z.Close(); err != nil {
		return err
	}
	return os.WriteFile(name, buf.Bytes(), 0o644)
}

// read loads a baseline that write (or cmd/apidiff -m -w) stored.
func read(name string, fset *token.FileSet) (*apidiff.Module, error) {
	z, err := zip.OpenReader(name)
	if err != nil {
		return nil, err
	}
	defer z.Close()
	m := &apidiff.Module{}
	for _, f := range z.File {
		r, err := f.Open()
		if err != nil {
			return nil, err
		}
		data, err := io.ReadAll(r)
		r.Close()
		if err != nil {
			return nil, err
		}
		if f.Name == "module" {
			m.Path = string(data)
			continue
		}
		path, ok := strings.CutSuffix(f.Name, ".x")
		if !ok {
			return nil, fmt.Errorf("%s: unexpected entry %q", name, f.Name)
		}
		p, err := gcexportdata.Read(bytes.NewReader(data), fset, map[string]*types.Package{}, path)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", name, path, err)
		}
		m.Packages = append(m.Packages, p)
	}
	if m.Path != modulePath {
		return nil, errors.New(name + ": not a baseline of " + modulePath)
	}
	return m, nil
}

// list renders m's exported API one declaration a line, sorted: every
// exported package-level name with its type, and every exported method
// and struct field of the exported types.
func list(m *apidiff.Module) string {
	var b strings.Builder
	for _, p := range m.Packages {
		qual := func(other *types.Package) string {
			if other == p {
				return ""
			}
			return other.Path()
		}
		fmt.Fprintf(&b, "package %s\n", p.Path())
		var lines []string
		scope := p.Scope()
		for _, name := range scope.Names() {
			obj := scope.Lookup(name)
			if !obj.Exported() {
				continue
			}
			if c, ok := obj.(*types.Const); ok {
				lines = append(lines, types.ObjectString(obj, qual)+" = "+c.Val().ExactString())
				continue
			}
			tn, ok := obj.(*types.TypeName)
			if !ok {
				lines = append(lines, types.ObjectString(obj, qual))
				continue
			}
			under := tn.Type().Underlying()
			kind := "type " + name
			if tn.IsAlias() {
				kind += " = " + types.TypeString(tn.Type(), qual)
			} else if st, ok := under.(*types.Struct); ok {
				kind += " struct"
				for f := range st.Fields() {
					if f.Exported() {
						lines = append(lines, fmt.Sprintf("field %s.%s %s", name, f.Name(), types.TypeString(f.Type(), qual)))
					}
				}
			} else if it, ok := under.(*types.Interface); ok {
				kind += " interface"
				for fn := range it.Methods() {
					if fn.Exported() {
						lines = append(lines, fmt.Sprintf("method %s.%s%s", name, fn.Name(), strings.TrimPrefix(types.TypeString(fn.Type(), qual), "func")))
					}
				}
			} else {
				kind += " " + types.TypeString(under, qual)
			}
			if tp := typeParams(tn); tp != "" {
				kind += " " + tp
			}
			lines = append(lines, kind)
			if _, isIface := under.(*types.Interface); !isIface && !tn.IsAlias() {
				ms := types.NewMethodSet(types.NewPointer(tn.Type()))
				for sel := range ms.Methods() {
					fn := sel.Obj().(*types.Func)
					if fn.Exported() {
						sig := fn.Type().(*types.Signature)
						lines = append(lines, fmt.Sprintf("method (%s) %s%s", types.TypeString(sig.Recv().Type(), qual), fn.Name(), strings.TrimPrefix(types.TypeString(sig, qual), "func")))
					}
				}
			}
		}
		slices.Sort(lines)
		for _, l := range lines {
			b.WriteString("\t" + l + "\n")
		}
	}
	return b.String()
}

func typeParams(tn *types.TypeName) string {
	named, ok := tn.Type().(*types.Named)
	if !ok || named.TypeParams().Len() == 0 {
		return ""
	}
	var ps []string
	for p := range named.TypeParams().TypeParams() {
		ps = append(ps, p.Obj().Name()+" "+types.TypeString(p.Constraint(), nil))
	}
	return "[" + strings.Join(ps, ", ") + "]"
}

// lineDiff lists the lines only in want (-) and only in got (+).
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for _, l := range w {
		if !slices.Contains(g, l) {
			b.WriteString("- " + l + "\n")
		}
	}
	for _, l := range g {
		if !slices.Contains(w, l) {
			b.WriteString("+ " + l + "\n")
		}
	}
	return filepath.ToSlash(b.String())
}
