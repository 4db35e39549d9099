package api

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sendonce/sendonce/internal/testsupport"
)

func FuzzParseRequest(f *testing.F) {
	body := `{"channel":"sms","template":"order_shipped","recipient":{"id":"user-42","phone":"+15551234567"}}`
	f.Add("k1", "Bearer so_0123456789abcdef_"+strings.Repeat("ab", 32), body, false)
	f.Add("", "", "", false)
	f.Add(" k", "bearer x", `{"tenant_id":"x"}`, false)
	f.Add(strings.Repeat("k", 255), "Basic abc", base64.StdEncoding.EncodeToString([]byte(body)), true)
	f.Add("k\x7f", "Bearer", "not base64!", true)
	f.Add("k", "Bearer  t ", `{"channel":"email","template":"t","recipient":{"id":"u","email":"a@b.co"},"data":{"n":1e400}}`, false)
	f.Add("k", "", `null`, false)
	f.Add("k", "", `{} {}`, false)
	f.Add("k", "", body+`]`, false)
	f.Add("k", "", body+`}garbage`, false)
	f.Add("k", "", `{"event_id":"evt_1","channel":"sms","template":"t","recipient":{"id":"u","phone":"+15551234567"}}`, false)
	f.Add("k", "", `{"channel":"sms","template":"t","recipient":{"id":"u","phone":"+15551234567"},"class":"otp","expires_at":"2026-12-01T12:05:00Z"}`, false)
	f.Add("k", "", `{"channel":"sms","template":"t","recipient":{"id":"u","phone":"+15551234567"},"expires_at":"2026-12-01T12:05"}`, false)
	f.Add("k", "", `{"event_id":null,"channel":"sms","template":"t","recipient":{"id":"u","phone":"+15551234567"}}`, false)
	f.Fuzz(func(t *testing.T, key, auth, body string, isBase64 bool) {
		headers := map[string]string{"Idempotency-Key": key, "authorization": auth}
		if tok := bearerToken(headers); tok != strings.TrimSpace(tok) {
			t.Errorf("bearerToken(%q) = %q: untrimmed", auth, tok)
		}
		sub, p := parseSubmission("acme", headers, body, isBase64)
		if p != nil {
			if p.Status != http.StatusBadRequest && p.Status != http.StatusRequestEntityTooLarge {
				t.Errorf("status %d, want 400 or 413", p.Status)
			}
			if p.Detail == "" || p.Type == "" || p.Title == "" || !utf8.ValidString(p.Detail) {
				t.Errorf("problem %+v lacks type, title or a valid detail", p)
			}
			return
		}
		if sub.key != key || len(key) == 0 || len(key) > MaxIdempotencyKeyLen {
			t.Errorf("accepted key %q (header %q)", sub.key, key)
		}
		for i := 0; i < len(key); i++ {
			if key[i] < 0x20 || key[i] > 0x7e {
				t.Fatalf("accepted key %q with a non-printable byte", key)
			}
		}
		r := sub.req
		// The event id is the body's or, absent, EventID(key) (a body that
		// names event_id, possibly escaped, may set its own).
		if r.TenantID != "acme" || (r.EventID != EventID(key) && !strings.Contains(body, "event") && !strings.Contains(body, `\u`) && !isBase64) {
			t.Errorf("tenant %q event %q: want acme and EventID(key)", r.TenantID, r.EventID)
		}
		if err := r.Validate(); err != nil {
			t.Errorf("accepted a request that does not validate: %v", err)
		}
		if r.ExpiresAt != "" && r.Expiry().IsZero() {
			t.Errorf("accepted expires_at %q that is not a time", r.ExpiresAt)
		}
		raw := []byte(body)
		if isBase64 {
			raw, _ = base64.StdEncoding.DecodeString(body)
		}
		testsupport.RoundTrip(t, raw, r)
		if fingerprint(r, key).Sum != fingerprint(r, key).Sum {
			t.Errorf("fingerprint is not deterministic")
		}
	})
}
