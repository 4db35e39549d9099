package lambdaenv

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestEnv(t *testing.T) {
	t.Parallel()
	vars := map[string]string{"D": "5s", "BAD_D": "soon", "NEG_D": "-1s", "N": "7", "BAD_N": "x", "S": " v "}
	e := New(func(k string) string { return vars[k] })
	if got := e.Duration("D", time.Second); got != 5*time.Second {
		t.Errorf("Duration = %s", got)
	}
	if got := e.Duration("UNSET", time.Second); got != time.Second {
		t.Errorf("default Duration = %s", got)
	}
	if got := e.Int("N", 1); got != 7 {
		t.Errorf("Int = %d", got)
	}
	if got := e.String("S", "d"); got != "v" {
		t.Errorf("String = %q", got)
	}
	if e.Err() != nil {
		t.Fatalf("Err = %v before any bad value", e.Err())
	}
	e.Duration("BAD_D", time.Second)
	e.Duration("NEG_D", time.Second)
	e.Int("BAD_N", 1)
	e.Required("MISSING")
	err := e.Err()
	for _, want := range []string{`BAD_D="soon"`, `NEG_D="-1s"`, `BAD_N="x"`, "MISSING is required"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Err = %v, want it to mention %s", err, want)
		}
	}
}

type flushCount struct{ n int }

func (f *flushCount) Flush() error { f.n++; return errors.New("sink closed") }

func TestFlushAfterFlushesOnError(t *testing.T) {
	t.Parallel()
	f := &flushCount{}
	h := FlushAfter(f, Logger(&strings.Builder{}, func(string) string { return "" }), func(context.Context, int) (int, error) {
		return 0, errors.New("handler failed")
	})
	if _, err := h(context.Background(), 1); err == nil || err.Error() != "handler failed" {
		t.Fatalf("err = %v, want the handler's", err)
	}
	if f.n != 1 {
		t.Errorf("flushed %d times, want 1", f.n)
	}
}
