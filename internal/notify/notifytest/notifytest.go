// Package notifytest checks, in tests, the properties every accepted
// notify.Request must have, whichever parser built it (notify.Parse for an
// SQS body, the API's request parser for an HTTP one).
package notifytest

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/sendonce/sendonce/internal/notify"
)

// RoundTrip fails t unless r, encoded as JSON, parses back with
// notify.Parse to a request that encodes to the same bytes and has the
// same key: one encoding's worth of information, nothing lost or invented.
func RoundTrip(t testing.TB, r notify.Request) {
	t.Helper()
	enc, err := json.Marshal(r)
	if err != nil {
		t.Fatalf("re-encode: %v", err)
	}
	r2, err := notify.Parse(enc)
	if err != nil {
		t.Fatalf("re-encoded request %s does not parse: %v", enc, err)
	}
	if enc2, _ := json.Marshal(r2); !bytes.Equal(enc, enc2) || r2.Key() != r.Key() {
		t.Fatalf("re-encoded request parses to another one:\n%s\n%s", enc, enc2)
	}
}
