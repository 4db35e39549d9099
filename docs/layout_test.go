// Package docs_test keeps the repository's maps true: the README's layout
// table against the packages and directories that exist, and
// docs/architecture.md against the package docs it follows.
package docs_test

import (
	"bufio"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// root is the repository root, seen from this package's directory.
const root = ".."

// layoutPaths returns the paths the first column of the README's layout
// table names: every backticked token of that column, one path each.
func layoutPaths(t *testing.T, readme string) map[string]bool {
	t.Helper()
	_, section, ok := strings.Cut(readme, "\n## Layout\n")
	if !ok {
		t.Fatal("README.md has no \"## Layout\" section")
	}
	if next := strings.Index(section, "\n## "); next >= 0 {
		section = section[:next]
	}
	tick := regexp.MustCompile("`([^`]+)`")
	paths := map[string]bool{}
	for line := range strings.Lines(section) {
		cells := strings.Split(line, "|")
		if !strings.HasPrefix(line, "|") || len(cells) < 3 || strings.HasPrefix(strings.TrimSpace(cells[1]), "---") {
			continue
		}
		for _, m := range tick.FindAllStringSubmatch(cells[1], -1) {
			paths[strings.TrimSuffix(m[1], "/")] = true
		}
	}
	if len(paths) == 0 {
		t.Fatal("README.md's layout table names no paths")
	}
	return paths
}

// goPackages returns the directory (slash-separated, relative to dir) of
// every package `go list ./...` reports in the module at dir: every
// directory holding a .go file, test files included, except those go
// leaves out of ./... (testdata, names starting with "." or "_", other
// modules) and node_modules. Symbolic links are not followed, as go does
// not follow them.
func goPackages(t *testing.T, dir string) []string {
	t.Helper()
	seen := map[string]bool{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			name := d.Name()
			if rel != "." && (name == "testdata" || name == "node_modules" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); rel != "." && err == nil {
				return filepath.SkipDir // another module
			}
			return nil
		}
		if strings.HasSuffix(d.Name(), ".go") && d.Type().IsRegular() {
			seen[path.Dir(rel)] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	pkgs := make([]string, 0, len(seen))
	for p := range seen {
		pkgs = append(pkgs, p)
	}
	slices.Sort(pkgs)
	return pkgs
}

// topDirs returns the top-level directories of the repository at dir,
// except .git and what .gitignore ignores at the top ("/name" and
// "/name/" lines: installs and build output).
func topDirs(t *testing.T, dir string) []string {
	t.Helper()
	ignored := map[string]bool{".git": true}
	if f, err := os.Open(filepath.Join(dir, ".gitignore")); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if name, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "/"); ok && !strings.Contains(strings.TrimSuffix(name, "/"), "/") {
				ignored[strings.TrimSuffix(name, "/")] = true
			}
		}
		f.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, e := range entries {
		if e.IsDir() && !ignored[e.Name()] {
			dirs = append(dirs, e.Name())
		}
	}
	return dirs
}

// TestLayoutCoversEveryPackage fails when a package or a top-level
// directory has no row in the README's layout table, or a row names a path
// that does not exist.
func TestLayoutCoversEveryPackage(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	listed := layoutPaths(t, string(readme))
	for _, p := range goPackages(t, root) {
		if p == "." && !listed["."] {
			t.Errorf("the Go package at the module root has no row (`.`) in README.md's layout table")
		} else if !listed[p] {
			t.Errorf("package %s has no row in README.md's layout table", p)
		}
	}
	for _, d := range topDirs(t, root) {
		if !covered(listed, d) {
			t.Errorf("directory %s/ has no row in README.md's layout table", d)
		}
	}
	for p := range listed {
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(p))); err != nil {
			t.Errorf("README.md's layout table names %s, which does not exist", p)
		}
	}
}

// covered reports whether the table lists dir or a path under it.
func covered(listed map[string]bool, dir string) bool {
	for p := range listed {
		if p == dir || strings.HasPrefix(p, dir+"/") {
			return true
		}
	}
	return false
}

// TestLayoutHelpers checks the helpers on a small tree, so the test above
// cannot pass by finding nothing.
func TestLayoutHelpers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, f := range []string{
		"go.mod", "a/a.go", "a/b/b_test.go", "a/testdata/x.go", ".hidden/h.go",
		"_skip/s.go", "node_modules/n/n.go", "nested/go.mod", "nested/n.go", "docs/x.md",
	} {
		p := filepath.Join(dir, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("package x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, ".gitignore"), []byte("/node_modules/\n/_skip\n*.out\n/bench/tmp/\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, want := goPackages(t, dir), []string{"a", "a/b"}; !slices.Equal(got, want) {
		t.Errorf("goPackages = %q, want %q", got, want)
	}
	if got, want := topDirs(t, dir), []string{".hidden", "a", "docs", "nested"}; !slices.Equal(got, want) {
		t.Errorf("topDirs = %q, want %q", got, want)
	}
	readme := "# x\n\n## Layout\n\n| path | what |\n|---|---|\n| `a`, `a/b/` | things |\n| `docs` | `not/a/path` in the second column |\n\n## Next\n\n| `later` | x |\n"
	got := layoutPaths(t, readme)
	if want := map[string]bool{"a": true, "a/b": true, "docs": true}; len(got) != len(want) || !got["a"] || !got["a/b"] || !got["docs"] {
		t.Errorf("layoutPaths = %v, want %v", got, want)
	}
	if !covered(got, "a") || covered(got, "nested") || covered(got, "a/b/c") {
		t.Errorf("covered(%v): want a, not nested nor a/b/c", got)
	}
	if !names("Package sendkey derives it; notify.Parse reads it.", "sendkey") || !names("notify.Parse", "notify") || names("the notifying step", "notify") {
		t.Error("names: want a package named as \"package x\" or by an x.Name identifier, nothing else")
	}
}

// pathSteps are the packages of one SQS record's path, in order
// (docs/architecture.md); render sits beside the path, between the key
// and the claim.
var pathSteps = []struct {
	dir string
	// neighbours are the packages of the steps before and after, which
	// the package doc must name. A public package (notify, provider)
	// names none: its godoc never names an internal package
	// (TestGodocNamesNoInternalPackage), and docs/architecture.md, which
	// it points at, follows the path through them.
	neighbours []string
}{
	{"internal/sender", []string{"events", "notify", "sendkey", "dispatch", "ledger", "provider"}},
	{"notify", nil},
	{"internal/sendkey", []string{"notify", "ledger"}},
	{"internal/ledger", []string{"dispatch", "sendkey", "provider", "sender"}},
	{"internal/dispatch", []string{"sendkey", "ledger", "provider", "sender"}},
	{"provider", nil},
	{"internal/render", []string{"notify", "sender"}},
}

// names reports whether doc names package pkg: "package pkg" or an
// identifier of it such as "pkg.Parse".
func names(doc, pkg string) bool {
	return regexp.MustCompile(`(?i:package) ` + pkg + `\b|\b` + pkg + `\.[A-Z]`).MatchString(doc)
}

// packageDoc returns the package comment of the Go package in dir.
func packageDoc(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var doc strings.Builder
	fset := token.NewFileSet()
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		if f.Doc != nil {
			doc.WriteString(f.Doc.Text())
		}
	}
	return doc.String()
}

// TestDataPathInPackageDocs checks that the package doc of every step of
// one SQS record's path points at docs/architecture.md and names the
// packages of the steps around it, and that the page links each of them.
func TestDataPathInPackageDocs(t *testing.T) {
	t.Parallel()
	arch, err := os.ReadFile("architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range pathSteps {
		doc := strings.Join(strings.Fields(packageDoc(t, filepath.Join(root, s.dir))), " ")
		if !strings.Contains(doc, "docs/architecture.md") {
			t.Errorf("the package doc of %s does not point at docs/architecture.md", s.dir)
		}
		for _, n := range s.neighbours {
			if !names(doc, n) {
				t.Errorf("the package doc of %s does not name %s, a step beside it", s.dir, n)
			}
		}
		if !strings.Contains(string(arch), "](../"+s.dir+")") {
			t.Errorf("docs/architecture.md does not link %s", s.dir)
		}
	}
}

// TestArchitectureLinks checks that every relative link of
// docs/architecture.md reaches a file or directory.
func TestArchitectureLinks(t *testing.T) {
	t.Parallel()
	arch, err := os.ReadFile("architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	links := regexp.MustCompile(`\]\(([^)#]+)(#[^)]*)?\)`).FindAllStringSubmatch(string(arch), -1)
	if len(links) < 10 {
		t.Fatalf("docs/architecture.md has %d links, want the packages of every step", len(links))
	}
	for _, l := range links {
		if strings.Contains(l[1], "://") {
			continue
		}
		if _, err := os.Stat(filepath.FromSlash(l[1])); err != nil {
			t.Errorf("docs/architecture.md links %s: %v", l[1], err)
		}
	}
}
