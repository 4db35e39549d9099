package notify_test

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/sendonce/sendonce/internal/testsupport"
	"github.com/sendonce/sendonce/notify"
)

const valid = `{"tenant_id":"acme","event_id":"evt_01J9Z3","channel":"sms","template":"order_shipped",
 "recipient":{"id":"user-42","phone":"+15551234567"},"data":{"order_id":"A-1001"},"unknown":1}`

func TestParseValid(t *testing.T) {
	t.Parallel()
	r, err := notify.Parse([]byte(valid))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if r.Class != notify.ClassTransactional {
		t.Errorf("Class = %q, want default %q", r.Class, notify.ClassTransactional)
	}
	if got, want := r.Key(), "v1_a5ce46682abd7dc1fbbc58b114c4d26e0c9886586f14d590ea4ef4f1f6ee0b71"; got != want {
		t.Errorf("Key = %s, want %s", got, want)
	}
	if r.Address() != "+15551234567" {
		t.Errorf("Address = %q", r.Address())
	}
}

func TestParseInvalid(t *testing.T) {
	t.Parallel()
	base := func(edit func(s string) string) string { return edit(valid) }
	tests := []struct {
		name, body, field, reason string
	}{
		{"Empty", "", "", "body is empty"},
		{"NotJSON", "hello", "", "not JSON"},
		{"Truncated", `{"tenant_id":"a"`, "", "ends early"},
		{"Array", `[1]`, "", "object"},
		{"TwoValues", `{} {}`, "", "more than one"},
		{"TrailingBracket", valid + `]`, "", "more than one"},
		{"TrailingBraceGarbage", valid + `}garbage`, "", "more than one"},
		{"WrongType", `{"tenant_id": 5}`, "tenant_id", "must be a JSON string"},
		{"RecipientWrongType", `{"recipient": "x"}`, "recipient", "must be a JSON object"},
		{"MissingTenant", base(func(s string) string { return strings.Replace(s, `"tenant_id":"acme",`, "", 1) }), "tenant_id", "required"},
		{"BadTenant", base(func(s string) string { return strings.Replace(s, `"acme"`, `"ac me"`, 1) }), "tenant_id", "must be"},
		{"MissingEvent", base(func(s string) string { return strings.Replace(s, `"evt_01J9Z3"`, `""`, 1) }), "event_id", "required"},
		{"LongEvent", base(func(s string) string { return strings.Replace(s, `"evt_01J9Z3"`, `"`+strings.Repeat("e", 257)+`"`, 1) }), "event_id", "at most 256"},
		{"BadChannel", base(func(s string) string { return strings.Replace(s, `"sms"`, `"fax"`, 1) }), "channel", "not one of"},
		{"BadTemplate", base(func(s string) string { return strings.Replace(s, `"order_shipped"`, `"Order Shipped"`, 1) }), "template", "must be"},
		{"MissingRecipientID", base(func(s string) string { return strings.Replace(s, `"id":"user-42",`, "", 1) }), "recipient.id", "required"},
		{"MissingPhone", base(func(s string) string { return strings.Replace(s, `,"phone":"+15551234567"`, "", 1) }), "recipient.phone", "required for sms"},
		{"BadPhone", base(func(s string) string { return strings.Replace(s, `+15551234567`, `555-1234`, 1) }), "recipient.phone", "E.164"},
		{"BadClass", base(func(s string) string { return strings.Replace(s, `"data"`, `"class":"spam","data"`, 1) }), "class", "not one of"},
		{"BadLocale", base(func(s string) string { return strings.Replace(s, `"data"`, `"locale":"../x","data"`, 1) }), "locale", "language tag"},
		{"EmailMissing", base(func(s string) string { return strings.Replace(s, `"sms"`, `"email"`, 1) }), "recipient.email", "required for email"},
		{"EmailHeaderInjection", `{"tenant_id":"a","event_id":"e","channel":"email","template":"t","recipient":{"id":"r","email":"a@b.c\r\nBcc: x@y.z"}}`, "recipient.email", "not an email"},
		{"PushNotARN", `{"tenant_id":"a","event_id":"e","channel":"push","template":"t","recipient":{"id":"r","push_target":"token"}}`, "recipient.push_target", "ARN"},
		{"InvalidUTF8", "{\"tenant_id\":\"\xff\"}", "", "UTF-8"},
		{"TooLarge", `{"x":"` + strings.Repeat("a", notify.MaxBodySize) + `"}`, "", "more than"},
		{"ContentWithoutText", base(func(s string) string { return strings.Replace(s, `"data"`, `"content":{},"data"`, 1) }), "content.text", "required"},
		{"ContentSubjectOnSMS", base(func(s string) string {
			return strings.Replace(s, `"data"`, `"content":{"text":"x","subject":"s"},"data"`, 1)
		}), "content.subject", "not allowed for sms"},
		{"ContentHTMLOnSMS", base(func(s string) string {
			return strings.Replace(s, `"data"`, `"content":{"text":"x","html":"<p>"},"data"`, 1)
		}), "content.html", "email only"},
		{"ContentEmailNeedsSubject", `{"tenant_id":"a","event_id":"e","channel":"email","template":"t","recipient":{"id":"r","email":"a@b.co"},"content":{"text":"x"}}`, "content.subject", "required for email"},
		{"ContentSubjectInjection", `{"tenant_id":"a","event_id":"e","channel":"email","template":"t","recipient":{"id":"r","email":"a@b.co"},"content":{"text":"x","subject":"a\r\nBcc: x@y.z"}}`, "content.subject", "one line"},
		{"ContentTextTooLong", base(func(s string) string {
			return strings.Replace(s, `"data"`, `"content":{"text":"`+strings.Repeat("é", notify.MaxContentText+1)+`"},"data"`, 1)
		}), "content.text", "at most"},
		{"CaseFoldedKeyIsUnknown", base(func(s string) string { return strings.Replace(s, `"tenant_id"`, `"Tenant_ID"`, 1) }), "tenant_id", "required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := notify.Parse([]byte(tt.body))
			var ie *notify.InvalidError
			if !errors.As(err, &ie) || !errors.Is(err, notify.ErrInvalid) {
				t.Fatalf("Parse error = %v, want *InvalidError", err)
			}
			if ie.Field != tt.field || !strings.Contains(ie.Reason, tt.reason) {
				t.Errorf("got field %q reason %q, want field %q reason containing %q", ie.Field, ie.Reason, tt.field, tt.reason)
			}
		})
	}
}

// A key that differs from a field's name only in case is unknown, so its
// value's type does not matter: encoding/json's folding used to reject
// `"DATA":1` as "data: must be a JSON object" before the exact-name decode
// ran, while the schema (and the contract) ignore the key.
func TestParseFoldedKeyOfWrongType(t *testing.T) {
	t.Parallel()
	for _, body := range []string{
		strings.Replace(valid, `"data"`, `"DATA":1,"data"`, 1),
		strings.Replace(valid, `"id":"user-42"`, `"ID":[true],"id":"user-42"`, 1),
		strings.Replace(valid, `"tenant_id":"acme"`, `"Tenant_Id":{"x":1},"tenant_id":"acme"`, 1),
	} {
		if _, err := notify.Parse([]byte(body)); err != nil {
			t.Errorf("Parse(%s) = %v, want the look-alike key ignored", body, err)
		}
	}
	// A wrong type under the exact name is still an error.
	if _, err := notify.Parse([]byte(strings.Replace(valid, `"data":`, `"DATA":{},"data":1,"x":`, 1))); err == nil || !strings.Contains(err.Error(), "data: must be a JSON object") {
		t.Errorf("exact-name wrong type: err = %v", err)
	}
}

func TestParseContent(t *testing.T) {
	t.Parallel()
	body := `{"tenant_id":"acme","event_id":"e","channel":"email","template":"welcome","recipient":{"id":"r","email":"a@b.co"},
	  "content":{"subject":"Hi <Ana>","text":"Hello\n  {{.not_a_template}}\n","html":"<p>Hello</p>"}}`
	r, err := notify.Parse([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	want := notify.Content{Subject: "Hi <Ana>", Text: "Hello\n  {{.not_a_template}}\n", HTML: "<p>Hello</p>"}
	if r.Content == nil || *r.Content != want {
		t.Fatalf("Content = %+v, want %+v", r.Content, want)
	}
	// Content is not part of the key: the template names the purpose.
	r2 := r
	r2.Content = nil
	if r.Key() != r2.Key() {
		t.Error("content changed the key")
	}
}

// TestParseExpiresAt: expires_at is an optional RFC 3339 time with a time
// zone, and it is not part of the key (docs/request.md): the same
// message with another validity, or none, is the same message.
func TestParseExpiresAt(t *testing.T) {
	t.Parallel()
	base := `{"tenant_id":"acme","event_id":"e","channel":"sms","template":"t","recipient":{"id":"u","phone":"+15551234567"}`
	for _, tc := range []struct {
		value string
		want  time.Time
	}{
		{`"2026-12-01T12:05:00Z"`, time.Date(2026, 12, 1, 12, 5, 0, 0, time.UTC)},
		{`"2026-12-01T13:05:00.250+01:00"`, time.Date(2026, 12, 1, 12, 5, 0, 250e6, time.UTC)},
		{`null`, time.Time{}},
		{`""`, time.Time{}},
	} {
		r, err := notify.Parse([]byte(base + `,"expires_at":` + tc.value + `}`))
		if err != nil {
			t.Fatalf("expires_at %s: %v", tc.value, err)
		}
		if got := r.Expiry(); !got.Equal(tc.want) {
			t.Errorf("expires_at %s: Expiry() = %v, want %v", tc.value, got, tc.want)
		}
		plain, _ := notify.Parse([]byte(base + `}`))
		if r.Key() != plain.Key() {
			t.Errorf("expires_at %s changed the key", tc.value)
		}
	}
	for _, bad := range []string{`"2026-12-01T12:05:00"`, `"2026-12-01 12:05:00Z"`, `"tomorrow"`, `"2026-13-01T00:00:00Z"`, `12`} {
		_, err := notify.Parse([]byte(base + `,"expires_at":` + bad + `}`))
		var ie *notify.InvalidError
		if !errors.As(err, &ie) || ie.Field != "expires_at" {
			t.Errorf("expires_at %s: err = %v, want an InvalidError of field expires_at", bad, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(valid))
	f.Add([]byte(`{"tenant_id":"a","event_id":"e","channel":"email","template":"t","recipient":{"id":"r","email":"a@b.co"}}`))
	f.Add([]byte(`{"recipient":null,"data":[1,2]}`))
	f.Add([]byte(`null`))
	f.Add([]byte(valid + `]`))
	f.Add([]byte(valid + `}garbage`))
	f.Add([]byte(`{"tenant_id":"a","event_id":"e","channel":"email","template":"t","recipient":{"id":"r","email":"a@b.co"},"content":{"subject":"s","text":"x","html":"<b>"}}`))
	f.Add([]byte(`{"Tenant_ID":"a","event_id":"e","channel":"sms","template":"t","recipient":{"ID":"r","phone":"+15551234567"},"content":{"TEXT":"x"}}`))
	f.Add([]byte(`{"tenant_id":"a","event_id":"e","channel":"sms","template":"t","recipient":{"id":"r","phone":"+15551234567"},"expires_at":"2026-12-01T12:05:00.5+01:00"}`))
	f.Add([]byte(`{"tenant_id":"a","event_id":"e","channel":"sms","template":"t","recipient":{"id":"r","phone":"+15551234567"},"expires_at":"2026-12-01T24:05:00Z"}`))
	f.Add([]byte(`{"DATA":1,"tenant_id":"a","event_id":"e","channel":"sms","template":"t","recipient":{"id":"r","phone":"+15551234567"}}`))
	sch := compileSchema(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := notify.Parse(body)
		// The published schema agrees with Parse on every body it can
		// judge (valid UTF-8 within the size limit; see
		// TestSchemaKnownExceptions for the rest).
		var ie *notify.InvalidError
		if utf8.Valid(body) && len(body) <= notify.MaxBodySize && !(errors.As(err, &ie) && ie.Field == "recipient.email") {
			if ok, serr := schemaValid(sch, body); ok != (err == nil) {
				t.Fatalf("Parse err = %v but schema valid = %v (%v)", err, ok, serr)
			}
		}
		if err != nil {
			if !errors.As(err, &ie) || ie.Reason == "" {
				t.Fatalf("Parse error %v is not an explained *InvalidError", err)
			}
			return
		}
		if c := r.Content; c != nil && (c.Text == "" || strings.ContainsAny(c.Subject, "\r\n")) {
			t.Fatalf("parsed content breaks its rules: %+v", c)
		}
		// A request that parses is valid, has an address and a well-formed key.
		if err := r.Validate(); err != nil {
			t.Fatalf("parsed request fails Validate: %v", err)
		}
		if r.Address() == "" || len(r.Key()) != 67 {
			t.Fatalf("parsed request has no address or a bad key: %+v", r)
		}
		// Its validity, when it has one, is a time; it never changes the key.
		if (r.ExpiresAt != "") == r.Expiry().IsZero() {
			t.Fatalf("expires_at %q parsed to %v", r.ExpiresAt, r.Expiry())
		}
		if r2 := r; r2.ExpiresAt != "" {
			r2.ExpiresAt = ""
			if r2.Key() != r.Key() {
				t.Fatal("expires_at changed the key")
			}
		}
		// It is one JSON value and, re-encoded, parses to the same request.
		testsupport.RoundTrip(t, body, r)
	})
}

func BenchmarkParse(b *testing.B) {
	body := []byte(valid)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := notify.Parse(body); err != nil {
			b.Fatal(err)
		}
	}
}
