package testsupport_test

import (
	"testing"

	"github.com/sendonce/sendonce/internal/testsupport"
)

func TestStrict(t *testing.T) {
	t.Parallel()
	type pair struct{ A, B int }
	if got := testsupport.Strict[pair](t, []byte(`{"A":1,"B":2}`), "a pair"); got != (pair{1, 2}) {
		t.Errorf("Strict = %+v, want {1 2}", got)
	}
	for _, bad := range []string{`{"A":1,"C":3}`, `{"A":"x"}`, `[1]`, ``} {
		ft := &fatalT{TB: t}
		func() {
			defer func() { _ = recover() }()
			testsupport.Strict[pair](ft, []byte(bad), "a pair")
		}()
		if !ft.failed {
			t.Errorf("Strict accepted %q", bad)
		}
	}
}

// fatalT records a Fatalf instead of ending the test.
type fatalT struct {
	testing.TB
	failed bool
}

func (f *fatalT) Helper() {}

func (f *fatalT) Fatalf(string, ...any) {
	f.failed = true
	panic("fatal")
}
