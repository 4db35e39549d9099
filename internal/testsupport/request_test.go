package testsupport_test

import (
	"testing"

	"github.com/sendonce/sendonce/internal/testsupport"
	"github.com/sendonce/sendonce/notify"
)

// TestRoundTrip: a parsed request round-trips; a body that is not one
// JSON value, or a request that re-encodes to another, fails the test.
func TestRoundTrip(t *testing.T) {
	t.Parallel()
	body := []byte(`{"tenant_id":"acme","event_id":"e1","channel":"sms","template":"t","recipient":{"id":"u","phone":"+15551234567"}}`)
	r, err := notify.Parse(body)
	if err != nil {
		t.Fatal(err)
	}
	testsupport.RoundTrip(t, body, r)
	other := r
	other.Recipient.Phone = "not a phone" // re-encoded, it does not parse
	for name, c := range map[string]struct {
		body []byte
		r    notify.Request
	}{"NotJSON": {append(body, '}'), r}, "Unparsable": {body, other}} {
		ft := &fatalT{TB: t}
		func() {
			defer func() { _ = recover() }()
			testsupport.RoundTrip(ft, c.body, c.r)
		}()
		if !ft.failed {
			t.Errorf("%s: RoundTrip passed", name)
		}
	}
}
