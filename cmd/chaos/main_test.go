package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// A run that cannot start (no emulators) fails with its reason and prints
// no report: an empty report would read "RESULT: OK".
func TestRunWithoutEmulatorsPrintsNoPass(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"-n=10", "-seed=1"}, func(string) string { return "" }, &stdout, &stderr)
	if code != 1 {
		t.Fatalf("exit code %d, want 1", code)
	}
	if strings.Contains(stdout.String(), "RESULT: OK") {
		t.Errorf("stdout reads as a pass:\n%s", stdout.String())
	}
	if !strings.Contains(stderr.String(), "endpoints are required") {
		t.Errorf("stderr does not say why: %q", stderr.String())
	}
}
