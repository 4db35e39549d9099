package cmdmain_test

import (
	"errors"
	"flag"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/cmdmain"
)

func TestFlagSet(t *testing.T) {
	t.Parallel()
	var stderr strings.Builder
	fs := cmdmain.FlagSet("demo", &stderr)
	n := fs.Int("n", 1, "count")
	if err := fs.Parse([]string{"-n", "3"}); err != nil || *n != 3 {
		t.Fatalf("Parse(-n 3): n = %d, err %v", *n, err)
	}
	if err := fs.Parse([]string{"-bogus"}); err == nil || errors.Is(err, flag.ErrHelp) {
		t.Fatalf("Parse(-bogus): err = %v, want a parse error (not an exit)", err)
	}
	if !strings.Contains(stderr.String(), "-bogus") || !strings.Contains(stderr.String(), "Usage of demo") {
		t.Errorf("stderr = %q, want the error and demo's usage", stderr.String())
	}
}
