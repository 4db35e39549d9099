package testsupport

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/sendonce/sendonce/notify"
)

// RoundTrip checks what must hold of every request body a parser
// accepted as r: the body is one JSON value, and r re-encoded parses to
// the same request with the same key, one encoding's worth of
// information with nothing lost or invented. It fails t when not.
func RoundTrip(t testing.TB, body []byte, r notify.Request) {
	t.Helper()
	if !json.Valid(body) {
		t.Fatalf("accepted a body that is not one JSON value: %q", body)
	}
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
