package webhook

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/sendonce/sendonce/internal/sendkey"
)

var testKey = sendkey.Derive(sendkey.Parts{Tenant: "acme", EventID: "evt_1", RecipientID: "user-42", Channel: "sms", Template: "order_shipped"})

func TestParseHTTPCallback(t *testing.T) {
	t.Parallel()
	okBody := `{"event_id":"evt_9","message_id":"msg_123","reference":"` + testKey + `","status":"delivered","timestamp":"2026-11-29T12:00:00Z"}`
	t.Run("OK", func(t *testing.T) {
		t.Parallel()
		got, err := ParseHTTPCallback([]byte(okBody))
		if err != nil {
			t.Fatalf("ParseHTTPCallback: %v", err)
		}
		want := Callback{Provider: ProviderHTTP, EventID: "evt_9", Key: testKey, Status: StatusDelivered,
			At: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC), ProviderMessageID: "msg_123"}
		if got != want {
			t.Errorf("got %+v, want %+v", got, want)
		}
		if id := got.DedupID(); id != "cb#http#evt_9" {
			t.Errorf("DedupID = %q, want cb#http#evt_9", id)
		}
	})
	t.Run("NoTimestamp", func(t *testing.T) {
		t.Parallel()
		got, err := ParseHTTPCallback([]byte(`{"event_id":"e","reference":"` + testKey + `","status":"sent","extra":1}`))
		if err != nil {
			t.Fatalf("ParseHTTPCallback: %v", err)
		}
		if !got.At.IsZero() || got.Status != StatusSent {
			t.Errorf("got %+v, want zero At and status sent", got)
		}
	})
	bad := []struct{ name, body string }{
		{"Empty", ``},
		{"NotJSON", `hello`},
		{"Array", `[]`},
		{"Trailing", okBody + `{}`},
		{"TrailingBracket", okBody + `]`},
		{"TrailingBraceGarbage", okBody + `}garbage`},
		{"NoEventID", `{"reference":"` + testKey + `","status":"sent"}`},
		{"LongEventID", `{"event_id":"` + strings.Repeat("e", 257) + `","reference":"` + testKey + `","status":"sent"}`},
		{"ControlInEventID", `{"event_id":"e\u0001","reference":"` + testKey + `","status":"sent"}`},
		{"NoReference", `{"event_id":"e","status":"sent"}`},
		{"BadReference", `{"event_id":"e","reference":"v1_xyz","status":"sent"}`},
		{"UnknownStatus", `{"event_id":"e","reference":"` + testKey + `","status":"exploded"}`},
		{"BadTimestamp", `{"event_id":"e","reference":"` + testKey + `","status":"sent","timestamp":"yesterday"}`},
		{"WrongType", `{"event_id":5,"reference":"` + testKey + `","status":"sent"}`},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseHTTPCallback([]byte(tt.body))
			if !errors.Is(err, ErrMalformed) {
				t.Errorf("err = %v, want ErrMalformed", err)
			}
		})
	}
}

func TestDedupID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, event, want string
	}{
		{"Plain", "evt_9", "cb#twilio#evt_9"},
		{"TwilioFallback", "SM123:delivered", "cb#twilio#SM123:delivered"},
		{"Hashed", "evt#9", "cb#twilio#h_"},
		{"HashedLong", strings.Repeat("a", 129), "cb#twilio#h_"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := Callback{Provider: ProviderTwilio, EventID: tt.event}.DedupID()
			if !strings.HasPrefix(got, tt.want) {
				t.Errorf("DedupID(%q) = %q, want prefix %q", tt.event, got, tt.want)
			}
			if strings.HasSuffix(tt.want, "h_") && len(got) != len(tt.want)+64 {
				t.Errorf("DedupID(%q) = %q, want a 64-hex hash", tt.event, got)
			}
		})
	}
}

func FuzzParseHTTPCallback(f *testing.F) {
	f.Add([]byte(`{"event_id":"evt_9","message_id":"msg_123","reference":"` + testKey + `","status":"delivered","timestamp":"2026-11-29T12:00:00Z"}`))
	f.Add([]byte(`{"event_id":"evt_9","reference":"` + testKey + `","status":"sent"}]`))
	f.Add([]byte(`{"event_id":"evt_9","reference":"` + testKey + `","status":"sent"}}garbage`))
	f.Fuzz(func(t *testing.T, body []byte) {
		cb, err := ParseHTTPCallback(body)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not match ErrMalformed", err)
			}
			return
		}
		if !json.Valid(body) {
			t.Fatalf("accepted a body that is not one JSON value: %q", body)
		}
		if !sendkey.Valid(cb.Key) || !cb.Status.Known() || cb.EventID == "" || len(cb.EventID) > maxEventIDLen || !utf8.ValidString(cb.EventID) {
			t.Fatalf("accepted an invalid callback %+v", cb)
		}
		if id := cb.DedupID(); !strings.HasPrefix(id, "cb#http#") || len(id) > 200 {
			t.Fatalf("DedupID = %q", id)
		}
	})
}
