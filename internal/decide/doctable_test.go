package decide

import (
	"flag"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the decision table in decide.go's package doc from decide_test.go's table")

// docTableIntro ends the sentence of the package doc after which the
// generated table stands.
const docTableIntro = "// generated from it by TestDocTable (go test -run TestDocTable -update):\n//\n"

// docTable renders table, the rules TestTable checks Of against, as the
// package doc shows them: each rule's conditions (its dimensions other
// than "*") and its action, in order.
func docTable() string {
	var b strings.Builder
	width := 0
	conds := make([]string, len(table))
	for i, r := range table {
		var parts []string
		for _, f := range []struct{ name, v string }{
			{"caller", r.caller}, {"row", r.state}, {"provider", r.caps}, {"policy", r.policy}, {"settle", r.settle},
			{"age", r.age}, {"tries", r.tries}, {"lookup", r.lookup}, {"render", r.render}, {"time", r.time}, {"validity", r.validity}, {"health", r.health},
		} {
			if f.v != "*" {
				parts = append(parts, f.name+" "+f.v)
			}
		}
		conds[i] = strings.Join(parts, ", ")
		if conds[i] == "" {
			conds[i] = "(any)"
		}
		width = max(width, len(conds[i]))
	}
	for i, r := range table {
		b.WriteString("//\t" + conds[i] + strings.Repeat(" ", width-len(conds[i])+2) + r.want.String() + "\n")
	}
	return b.String()
}

// TestDocTable: the decision table of the package doc is the test's
// table, not a third copy written by hand: the switch in Of and the
// test's table are checked against each other by TestTable, and the doc
// is rendered from the test's table here.
func TestDocTable(t *testing.T) {
	src, err := os.ReadFile("decide.go")
	if err != nil {
		t.Fatal(err)
	}
	s := string(src)
	i := strings.Index(s, docTableIntro)
	if i < 0 {
		t.Fatalf("decide.go's package doc has no line ending %q", docTableIntro)
	}
	start := i + len(docTableIntro)
	end := start
	for end < len(s) && strings.HasPrefix(s[end:], "//\t") {
		end += strings.IndexByte(s[end:], '\n') + 1
	}
	want := docTable()
	if got := s[start:end]; got != want {
		if *update {
			if err := os.WriteFile("decide.go", []byte(s[:start]+want+s[end:]), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Errorf("decide.go's decision table is not the test's table; run go test ./internal/decide -run TestDocTable -update.\ngot:\n%s\nwant:\n%s", got, want)
	}
}
