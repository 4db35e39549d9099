package idempotency_test

import (
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/api/idempotency"
)

func TestFingerprintDiffer(t *testing.T) {
	t.Parallel()
	a := idempotency.Fingerprint{Fields: map[string]string{"channel": "1", "template": "2", "data": "3"}}
	b := idempotency.Fingerprint{Fields: map[string]string{"channel": "1", "template": "x", "locale": "4"}}
	if got, want := strings.Join(a.Differ(b), ","), "data,locale,template"; got != want {
		t.Errorf("Differ = %q, want %q", got, want)
	}
}
