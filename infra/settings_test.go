package infra

import (
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// settingName matches a SENDONCE_* variable's name in a Go string literal.
var settingName = regexp.MustCompile(`SENDONCE_[A-Z0-9_]*[A-Z0-9]`)

// codeSettings returns the SENDONCE_* names in the string literals of the
// non-test Go files of pkg and of every package of this module it
// imports, directly or not (go list -deps): the variables its code may
// read. A secret's stored form (NAME_PARAM, which lambdaenv builds rather
// than spells) is included with each name.
func codeSettings(t *testing.T, pkgs ...string) map[string]bool {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-deps", "-f", `{{if not .Standard}}{{.Dir}}{{range .GoFiles}} {{.}}{{end}}{{end}}`}, pkgs...)...)
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkgs, err)
	}
	names := map[string]bool{}
	fset := token.NewFileSet()
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		if len(fields) < 2 || !strings.HasPrefix(filepath.ToSlash(fields[0]), moduleDir(t)) {
			continue // not this module's (the SDK's, aws-lambda-go's)
		}
		for _, file := range fields[1:] {
			f, err := parser.ParseFile(fset, filepath.Join(fields[0], file), nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					for _, name := range settingName.FindAllString(lit.Value, -1) {
						if !strings.HasPrefix(name, "SENDONCE_TEST_") && !strings.HasPrefix(name, "SENDONCE_LOCAL_") {
							names[name] = true
							if !strings.HasSuffix(name, "_PARAM") {
								names[name+"_PARAM"] = true
							}
						}
					}
				}
				return true
			})
		}
	}
	if len(names) < 10 {
		t.Fatalf("%s's code reads %d SENDONCE_* variables: the scan is broken", pkgs, len(names))
	}
	return names
}

// rootSettings returns the SENDONCE_* names in the string literals of the
// root package's functions and methods named funcs (and their _PARAM
// forms).
func rootSettings(t *testing.T, funcs ...string) map[string]bool {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "../lambdaapp/lambdaapp.go", nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	found := 0
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || !slices.Contains(funcs, fd.Name.Name) {
			continue
		}
		found++
		ast.Inspect(fd, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				for _, name := range settingName.FindAllString(lit.Value, -1) {
					names[name], names[name+"_PARAM"] = true, true
				}
			}
			return true
		})
	}
	if found != len(funcs) {
		t.Fatalf("lambdaapp/lambdaapp.go: found %d of the functions %v: the scan is broken", found, funcs)
	}
	return names
}

func moduleDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return filepath.ToSlash(dir)
}

// environment returns function fn's Environment Variables in tpl.
func environment(tpl *Template, fn string) map[string]any {
	return mapOf(mapOf(mapOf(tpl.Resources[fn]["Properties"])["Environment"])["Variables"])
}

// TestDecidingFunctionsAgree: the sender and the reconciler both decide
// what happens to an attempt whose outcome is unknown (package decide),
// so every setting both read must be the same in both: for each
// SENDONCE_* variable the code of both functions reads, the template
// gives the two functions the same value, or leaves it unset in both
// (issue 21, defect 5: the reconciler had SENDONCE_RECONCILE_SETTLE, the
// sender did not).
func TestDecidingFunctionsAgree(t *testing.T) {
	t.Parallel()
	// Each function reads its configuration through one method of
	// lambdaapp's Environment, which (like every package lambdaapp
	// imports) all five functions link: the scan follows that method
	// (rootSettings) and the packages it reads through, not the root's
	// whole closure.
	sender := codeSettings(t, "./internal/sendpath", "./internal/sender", "./internal/render")
	maps.Copy(sender, rootSettings(t, "SenderConfig", "sendPath"))
	reconciler := codeSettings(t, "./internal/sendpath", "./internal/reconcile")
	maps.Copy(reconciler, rootSettings(t, "ReconcilerConfig", "sendPath"))
	var both []string
	for name := range sender {
		if reconciler[name] {
			both = append(both, name)
		}
	}
	slices.Sort(both)
	for _, name := range []string{"SENDONCE_RECONCILE_SETTLE", "SENDONCE_PROVIDER_TIMEOUT", "SENDONCE_CLAIM_TIMEOUT", "SENDONCE_SMS_PROVIDER"} {
		if !slices.Contains(both, name) {
			t.Fatalf("%s is not among the variables both functions read (%v): the scan is broken", name, both)
		}
	}
	for _, path := range []string{templatePath, quickPath, sarPath} {
		tpl, _ := load(t, path)
		senv, renv := environment(tpl, "SenderFunction"), environment(tpl, "ReconcilerFunction")
		if len(senv) == 0 || len(renv) == 0 {
			t.Fatalf("%s: SenderFunction or ReconcilerFunction has no Environment Variables", path)
		}
		for _, name := range both {
			s, sok := senv[name]
			r, rok := renv[name]
			switch {
			case sok != rok:
				t.Errorf("%s: %s: the sender has %v (set: %v), the reconciler %v (set: %v)", path, name, s, sok, r, rok)
			case !reflect.DeepEqual(s, r):
				t.Errorf("%s: %s: the sender has %v, the reconciler %v", path, name, s, r)
			}
		}
	}
	t.Logf("compared the %d variables both functions read (and their _PARAM forms): %v", len(both)/2, slices.DeleteFunc(slices.Clone(both), func(n string) bool { return strings.HasSuffix(n, "_PARAM") }))
	// What only one of them reads is its own business; list it so a
	// reviewer sees what is not compared.
	only := func(a, b map[string]bool) []string {
		var out []string
		for _, n := range slices.Sorted(maps.Keys(a)) {
			if !b[n] && !strings.HasSuffix(n, "_PARAM") {
				out = append(out, n)
			}
		}
		return out
	}
	t.Logf("sender only: %v; reconciler only: %v", only(sender, reconciler), only(reconciler, sender))
}
