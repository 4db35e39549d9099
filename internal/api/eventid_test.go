package api_test

import (
	"net/http"
	"slices"
	"testing"

	"github.com/sendonce/sendonce/internal/api"
	"github.com/sendonce/sendonce/internal/sendkey"
	"github.com/sendonce/sendonce/notify"
)

// withEvent is body1 with the client's event_id.
func withEvent(event string) string { return `{"event_id":"` + event + `",` + body1[1:] }

// TestEventIDFromBody: an event_id in the body is used as given, so the
// API's message has the key the same request through the queue has.
func TestEventIDFromBody(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	a := decodeAccepted(t, b.post(t, b.keyA, "idem-1", withEvent("evt_01J9Z3")))
	queued := sendkey.Derive(sendkey.Parts{Tenant: "acme", EventID: "evt_01J9Z3", RecipientID: "user-42", Channel: "sms", Template: "order_shipped"})
	if a.ID != queued {
		t.Errorf("id = %s, want the queue request's key %s", a.ID, queued)
	}
	msgs := b.messages(t)
	if len(msgs) != 1 {
		t.Fatalf("%d messages, want 1", len(msgs))
	}
	req, err := notify.Parse([]byte(*msgs[0].MessageBody))
	if err != nil || req.EventID != "evt_01J9Z3" {
		t.Errorf("enqueued event_id = %q (%v), want evt_01J9Z3", req.EventID, err)
	}
}

// TestEventIDDerivedWhenAbsent: without event_id (or with null) the event
// id comes from the Idempotency-Key.
func TestEventIDDerivedWhenAbsent(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	if a := decodeAccepted(t, b.post(t, b.keyA, "idem-2", body1)); a.ID != wantKey("acme", "idem-2") {
		t.Errorf("absent: id = %s, want %s", a.ID, wantKey("acme", "idem-2"))
	}
	if a := decodeAccepted(t, b.post(t, b.keyA, "idem-3", `{"event_id":null,`+body1[1:])); a.ID != wantKey("acme", "idem-3") {
		t.Errorf("null: id = %s, want %s", a.ID, wantKey("acme", "idem-3"))
	}
	for _, m := range b.messages(t) {
		req, err := notify.Parse([]byte(*m.MessageBody))
		if err != nil || (req.EventID != api.EventID("idem-2") && req.EventID != api.EventID("idem-3")) {
			t.Errorf("enqueued event_id = %q (%v), want one derived from the key", req.EventID, err)
		}
	}
}

// TestSameKeyOtherEventIDIsMismatch: reusing an Idempotency-Key with
// another event_id is 422 naming event_id; the same event_id again is a
// replay.
func TestSameKeyOtherEventIDIsMismatch(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	first := decodeAccepted(t, b.post(t, b.keyA, "idem-4", withEvent("evt_a")))
	p := decodeProblem(t, b.post(t, b.keyA, "idem-4", withEvent("evt_b")), http.StatusUnprocessableEntity)
	if !slices.Equal(p.Fields, []string{"event_id"}) {
		t.Errorf("fields = %q, want [event_id]", p.Fields)
	}
	// Omitting it derives another event id: a mismatch too.
	if p := decodeProblem(t, b.post(t, b.keyA, "idem-4", body1), http.StatusUnprocessableEntity); !slices.Equal(p.Fields, []string{"event_id"}) {
		t.Errorf("absent: fields = %q, want [event_id]", p.Fields)
	}
	again := b.post(t, b.keyA, "idem-4", withEvent("evt_a"))
	if a := decodeAccepted(t, again); a.ID != first.ID || again.Headers["Idempotent-Replayed"] != "true" {
		t.Errorf("same event_id again = %+v %v, want a replay of %s", a, again.Headers, first.ID)
	}
}
