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

// TestEnvReportsEveryProblemOnce: two bad variables give one error that
// names both, so an operator fixes them in one deployment; a variable
// read twice is reported once.
func TestEnvReportsEveryProblemOnce(t *testing.T) {
	t.Parallel()
	vars := map[string]string{"A_TIMEOUT": "soon", "B_ENABLED": "maybe"}
	e := New(func(k string) string { return vars[k] })
	e.Duration("A_TIMEOUT", time.Second)
	e.Bool("B_ENABLED", true)
	e.Duration("A_TIMEOUT", time.Second) // read twice, reported once
	if n := e.Problems(); n != 2 {
		t.Fatalf("Problems = %d, want 2", n)
	}
	err := e.Err()
	if err == nil || !strings.HasPrefix(err.Error(), "configuration: ") {
		t.Fatalf("Err = %v, want one configuration error", err)
	}
	for _, want := range []string{`A_TIMEOUT="soon"`, `B_ENABLED="maybe" is not true or false`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Err = %q, want it to name %s", err, want)
		}
	}
	e.Fail(nil)
	if n := e.Problems(); n != 2 {
		t.Errorf("Fail(nil) recorded a problem: %d", n)
	}
}

func TestEnvBoolAndValue(t *testing.T) {
	t.Parallel()
	vars := map[string]string{"T": " TRUE ", "F": "false", "N": "42", "BAD_N": "x"}
	e := New(func(k string) string { return vars[k] })
	if !e.Bool("T", false) || e.Bool("F", true) || !e.Bool("UNSET", true) {
		t.Error("Bool of true, false and unset")
	}
	parse := func(v string) (int, error) {
		if v == "42" {
			return 42, nil
		}
		return 0, errors.New("not the answer")
	}
	if got := Value(e, "N", 1, parse); got != 42 {
		t.Errorf("Value = %d, want 42", got)
	}
	if got := Value(e, "UNSET", 1, parse); got != 1 {
		t.Errorf("Value of unset = %d, want the default", got)
	}
	if e.Err() != nil {
		t.Fatalf("Err = %v before any bad value", e.Err())
	}
	if got := Value(e, "BAD_N", 1, parse); got != 1 {
		t.Errorf("Value of a bad value = %d, want the default", got)
	}
	if err := e.Err(); err == nil || !strings.Contains(err.Error(), "BAD_N: not the answer") {
		t.Errorf("Err = %v, want the parse error after the variable's name", err)
	}
}

// TestEnvSecret: a secret is given plainly or by where it is stored, not
// both; the error names the variables and never shows the value.
func TestEnvSecret(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		name    string
		vars    map[string]string
		want    string
		wantErr string
	}{
		{"Plain", map[string]string{"S": " shh "}, "shh", ""},
		{"Unset", nil, "", ""},
		{"Both", map[string]string{"S": "shh", "S_PARAM": "/sendonce/s"}, "", "S and S_PARAM are both set: set one"},
		{"ParamNoResolver", map[string]string{"S_PARAM": "/sendonce/s"}, "", "S_PARAM: no secrets resolver"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := New(getenv(tt.vars))
			if got := e.Secret(ctx, "S"); got != tt.want {
				t.Errorf("Secret = %q, want %q", got, tt.want)
			}
			if set := e.SecretSet("S"); set != (len(tt.vars) > 0) {
				t.Errorf("SecretSet = %v with %v", set, tt.vars)
			}
			err := e.Err()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("Err = %v, want nil", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr) || strings.Contains(err.Error(), "shh")):
				t.Errorf("Err = %v, want %q and no secret", err, tt.wantErr)
			}
		})
	}
}

// TestCacheTTL: a cache's TTL may be zero (the cache off), not negative;
// the error names the variable.
func TestCacheTTL(t *testing.T) {
	t.Parallel()
	const name, def = "SENDONCE_X_CACHE", 7 * time.Second
	for v, want := range map[string]time.Duration{"": def, "0": 0, "0s": 0, " 30s ": 30 * time.Second, "2m": 2 * time.Minute} {
		e := New(func(string) string { return v })
		if got, err := e.CacheTTL(name, def), e.Err(); err != nil || got != want {
			t.Errorf("CacheTTL(%q) = %v, %v; want %v", v, got, err, want)
		}
	}
	for _, v := range []string{"-1s", "soon", "10"} {
		e := New(func(string) string { return v })
		if got, err := e.CacheTTL(name, def), e.Err(); got != def || err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("CacheTTL(%q) = %v, %v; want the default and an error naming the variable", v, got, err)
		}
	}
}
