package api

import (
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
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

func TestParseRate(t *testing.T) {
	t.Parallel()
	good := map[string]Rate{
		"100/1m":  {100, time.Minute},
		" 5/30s ": {5, 30 * time.Second},
		"1/1h":    {1, time.Hour},
	}
	for in, want := range good {
		got, err := ParseRate(in)
		if err != nil || got != want {
			t.Errorf("ParseRate(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "100", "0/1m", "-1/1m", "x/1m", "5/", "5/0s", "5/500ms", "5/1.5s", "5/1m/2"} {
		if _, err := ParseRate(in); !errors.Is(err, ErrInvalidRate) {
			t.Errorf("ParseRate(%q) = %v, want ErrInvalidRate", in, err)
		}
	}
}

func TestLoadEnv(t *testing.T) {
	t.Parallel()
	base := map[string]string{EnvTable: "tbl", EnvQueueURL: "https://sqs/q"}
	tests := []struct {
		name    string
		set     map[string]string
		want    Env
		wantErr string
	}{
		{"Defaults", nil, Env{Table: "tbl", QueueURL: "https://sqs/q", Retention: DefaultRetention, TenantRate: DefaultTenantRate, RecipientRate: DefaultRecipientRate}, ""},
		{"Overrides", map[string]string{EnvRetention: "48h", EnvTenantRate: "10/1s", EnvRecipientRate: "2/1h"},
			Env{Table: "tbl", QueueURL: "https://sqs/q", Retention: 48 * time.Hour, TenantRate: Rate{10, time.Second}, RecipientRate: Rate{2, time.Hour}}, ""},
		{"NoTable", map[string]string{EnvTable: ""}, Env{}, EnvTable},
		{"NoQueue", map[string]string{EnvQueueURL: ""}, Env{}, EnvQueueURL},
		{"BadRetention", map[string]string{EnvRetention: "1d"}, Env{}, EnvRetention},
		{"ShortRetention", map[string]string{EnvRetention: "10s"}, Env{}, EnvRetention},
		{"BadTenantRate", map[string]string{EnvTenantRate: "lots"}, Env{}, EnvTenantRate},
		{"BadRecipientRate", map[string]string{EnvRecipientRate: "0/1m"}, Env{}, EnvRecipientRate},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := map[string]string{}
			for k, v := range base {
				env[k] = v
			}
			for k, v := range tt.set {
				env[k] = v
			}
			got, err := LoadEnv(func(k string) string { return env[k] })
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("LoadEnv = %v, want an error naming %s", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("LoadEnv = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}
