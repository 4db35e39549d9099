package lambdaprovider_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/sendonce/sendonce/internal/provider/lambdaprovider"
	"github.com/sendonce/sendonce/provider"
)

const schemaPath = "../../../schema/lambda-provider.v1.json"

// compile compiles one definition of the published schema: "request",
// "sendAnswer" or "lookupAnswer".
func compile(t testing.TB, def string) *jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	sch, err := c.Compile(schemaPath + "#/$defs/" + def)
	if err != nil {
		t.Fatalf("compile %s#/$defs/%s: %v", schemaPath, def, err)
	}
	return sch
}

// valid reports whether sch accepts the JSON document b (false, with the
// reason, when b is not one JSON value).
func valid(sch *jsonschema.Schema, b []byte) (bool, error) {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return false, err
	}
	err = sch.Validate(v)
	return err == nil, err
}

const (
	key   = "v1_a5ce46682abd7dc1fbbc58b114c4d26e0c9886586f14d590ea4ef4f1f6ee0b71"
	phone = "+15551234567"
)

// TestRequestJSON: the adapter's payload for each kind of message, byte
// for byte, and the published schema accepts each.
func TestRequestJSON(t *testing.T) {
	t.Parallel()
	sch := compile(t, "request")
	at := time.Date(2026, 11, 29, 13, 0, 0, 123456789, time.FixedZone("CET", 3600))
	until := at.Add(time.Minute)
	now := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	sms := provider.Message{Key: key, Tenant: "acme", Channel: "sms", Class: "otp", To: phone, Body: "Your code is 123456",
		AttemptedAt: at, AttemptedUntil: until, ProviderMessageID: "msg_7"}
	email := provider.Message{Key: key, Tenant: "acme", Channel: "email", Class: "transactional", To: "ana@example.com",
		Subject: "Shipped", Body: "Your order shipped", HTML: `<p>Your order <b>shipped</b> & "soon"</p>`, AttemptedAt: at}
	noTime := sms
	noTime.AttemptedAt, noTime.AttemptedUntil, noTime.Class = time.Time{}, time.Time{}, ""
	tests := []struct {
		name string
		op   lambdaprovider.Op
		m    provider.Message
		want string
	}{
		{"SendSMS", lambdaprovider.OpSend, sms,
			`{"version":1,"op":"send","key":"` + key + `","tenant":"acme","channel":"sms","class":"otp","to":"+15551234567",` +
				`"content":{"text":"Your code is 123456"},"attempted_at":"2026-11-29T12:00:00.123Z"}`},
		{"SendEmailWithHTML", lambdaprovider.OpSend, email,
			`{"version":1,"op":"send","key":"` + key + `","tenant":"acme","channel":"email","class":"transactional","to":"ana@example.com",` +
				`"content":{"subject":"Shipped","text":"Your order shipped","html":"\u003cp\u003eYour order \u003cb\u003eshipped\u003c/b\u003e \u0026 \"soon\"\u003c/p\u003e"},` +
				`"attempted_at":"2026-11-29T12:00:00.123Z"}`},
		{"LookupWithWindowAndID", lambdaprovider.OpLookup, sms,
			`{"version":1,"op":"lookup","key":"` + key + `","tenant":"acme","channel":"sms","class":"otp","to":"+15551234567",` +
				`"content":{"text":"Your code is 123456"},"attempted_at":"2026-11-29T12:00:00.123Z",` +
				`"attempted_until":"2026-11-29T12:01:00.123Z","provider_message_id":"msg_7"}`},
		{"LookupWithoutWindow", lambdaprovider.OpLookup, email,
			`{"version":1,"op":"lookup","key":"` + key + `","tenant":"acme","channel":"email","class":"transactional","to":"ana@example.com",` +
				`"content":{"subject":"Shipped","text":"Your order shipped","html":"\u003cp\u003eYour order \u003cb\u003eshipped\u003c/b\u003e \u0026 \"soon\"\u003c/p\u003e"},` +
				`"attempted_at":"2026-11-29T12:00:00.123Z"}`},
		{"NoAttemptTimeIsNow", lambdaprovider.OpSend, noTime,
			`{"version":1,"op":"send","key":"` + key + `","tenant":"acme","channel":"sms","to":"+15551234567",` +
				`"content":{"text":"Your code is 123456"},"attempted_at":"2026-11-30T08:00:00.000Z"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := json.Marshal(lambdaprovider.NewRequest(tt.op, tt.m, now))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("payload\n got %s\nwant %s", got, tt.want)
			}
			if ok, err := valid(sch, got); !ok {
				t.Errorf("the schema refuses the payload: %v", err)
			}
		})
	}
}

// TestRequestSchemaRefuses: the schema is not vacuous: it refuses
// requests that break the protocol.
func TestRequestSchemaRefuses(t *testing.T) {
	t.Parallel()
	sch := compile(t, "request")
	good := `"key":"` + key + `","tenant":"acme","channel":"sms","to":"+1555","content":{"text":"hi"},"attempted_at":"2026-11-29T12:00:00Z"`
	if ok, err := valid(sch, []byte(`{"version":1,"op":"send",`+good+`}`)); !ok {
		t.Fatalf("the base request is refused: %v", err)
	}
	for name, body := range map[string]string{
		"Version2":     `{"version":2,"op":"send",` + good + `}`,
		"UnknownOp":    `{"version":1,"op":"cancel",` + good + `}`,
		"NoText":       `{"version":1,"op":"send",` + strings.Replace(good, `"text":"hi"`, `"subject":"x"`, 1) + `}`,
		"BadKey":       `{"version":1,"op":"send",` + strings.Replace(good, key, "k1", 1) + `}`,
		"BadTime":      `{"version":1,"op":"send",` + strings.Replace(good, "2026-11-29T12:00:00Z", "yesterday", 1) + `}`,
		"BadChannel":   `{"version":1,"op":"send",` + strings.Replace(good, `"sms"`, `"fax"`, 1) + `}`,
		"EmptyTo":      `{"version":1,"op":"send",` + strings.Replace(good, `"+1555"`, `""`, 1) + `}`,
		"NotAnObject":  `["send"]`,
		"MissingField": `{"version":1,"op":"send","key":"` + key + `"}`,
	} {
		if ok, _ := valid(sch, []byte(body)); ok {
			t.Errorf("%s: the schema accepts %s", name, body)
		}
	}
}

func TestParseAnswer(t *testing.T) {
	t.Parallel()
	send, lookup := lambdaprovider.OpSend, lambdaprovider.OpLookup
	tests := []struct {
		name    string
		op      lambdaprovider.Op
		payload string
		want    lambdaprovider.Answer
		wantErr bool
	}{
		{"Accepted", send, `{"status":"accepted","id":"msg_1"}`, lambdaprovider.Answer{Status: "accepted", ID: "msg_1"}, false},
		{"AcceptedWithVersion", send, `{"version":1,"status":"accepted","id":"msg_1"}`, lambdaprovider.Answer{Version: 1, Status: "accepted", ID: "msg_1"}, false},
		{"AcceptedUnknownFieldsIgnored", send, `{"status":"accepted","id":"m","price":{"usd":0.01},"extra":[1]}`, lambdaprovider.Answer{Status: "accepted", ID: "m"}, false},
		{"Rejected", send, `{"status":"rejected","reason":"invalid number","code":"21211"}`, lambdaprovider.Answer{Status: "rejected", Reason: "invalid number", Code: "21211"}, false},
		{"RejectedNulls", send, `{"status":"rejected","reason":null,"code":null,"id":null,"version":null}`, lambdaprovider.Answer{Status: "rejected"}, false},
		{"Retry", send, `{"status":"retry","reason":"throttled","code":"429"}`, lambdaprovider.Answer{Status: "retry", Reason: "throttled", Code: "429"}, false},
		{"LookupNotFound", lookup, `{"status":"not_found"}`, lambdaprovider.Answer{Status: "not_found"}, false},
		{"LookupRejectedWithID", lookup, `{"status":"rejected","id":"m2","reason":"undelivered"}`, lambdaprovider.Answer{Status: "rejected", ID: "m2", Reason: "undelivered"}, false},
		{"LookupAccepted", lookup, `{"status":"accepted","id":"m3"}`, lambdaprovider.Answer{Status: "accepted", ID: "m3"}, false},
		{"LookupRetry", lookup, `{"status":"retry"}`, lambdaprovider.Answer{Status: "retry"}, false},

		{"SendNotFound", send, `{"status":"not_found"}`, lambdaprovider.Answer{}, true},
		{"AcceptedNoID", send, `{"status":"accepted"}`, lambdaprovider.Answer{}, true},
		{"AcceptedNullID", send, `{"status":"accepted","id":null}`, lambdaprovider.Answer{}, true},
		{"AcceptedBlankID", send, `{"status":"accepted","id":" \t"}`, lambdaprovider.Answer{}, true},
		{"RetryBlankID", send, `{"status":"retry","id":" "}`, lambdaprovider.Answer{Status: "retry", ID: " "}, false},
		{"AcceptedNumericID", send, `{"status":"accepted","id":42}`, lambdaprovider.Answer{}, true},
		{"AcceptedLongID", send, `{"status":"accepted","id":"` + strings.Repeat("x", lambdaprovider.MaxIDLen+1) + `"}`, lambdaprovider.Answer{}, true},
		{"Version2", send, `{"version":2,"status":"accepted","id":"m"}`, lambdaprovider.Answer{}, true},
		{"VersionString", send, `{"version":"1","status":"accepted","id":"m"}`, lambdaprovider.Answer{}, true},
		{"UnknownStatus", send, `{"status":"sent","id":"m"}`, lambdaprovider.Answer{}, true},
		{"StatusCase", send, `{"status":"ACCEPTED","id":"m"}`, lambdaprovider.Answer{}, true},
		{"NoStatus", send, `{"id":"m"}`, lambdaprovider.Answer{}, true},
		{"ReasonNotString", send, `{"status":"rejected","reason":{"text":"x"}}`, lambdaprovider.Answer{}, true},
		{"Null", send, `null`, lambdaprovider.Answer{}, true},
		{"Array", send, `[{"status":"accepted","id":"m"}]`, lambdaprovider.Answer{}, true},
		{"String", send, `"accepted"`, lambdaprovider.Answer{}, true},
		{"Empty", send, ``, lambdaprovider.Answer{}, true},
		{"ErrorDocument", send, `{"errorMessage":"boom","errorType":"errorString"}`, lambdaprovider.Answer{}, true},
		{"EmulatorTimeout", send, `Task timed out after 1.00 seconds`, lambdaprovider.Answer{}, true},
		{"TrailingData", send, `{"status":"accepted","id":"m"} {}`, lambdaprovider.Answer{}, true},
	}
	schemas := map[lambdaprovider.Op]*jsonschema.Schema{send: compile(t, "sendAnswer"), lookup: compile(t, "lookupAnswer")}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := lambdaprovider.ParseAnswer(tt.op, []byte(tt.payload))
			if tt.wantErr {
				if err == nil || !errors.Is(err, lambdaprovider.ErrUnreadable) {
					t.Errorf("ParseAnswer = %+v, %v; want an ErrUnreadable", got, err)
				}
			} else if err != nil || got != tt.want {
				t.Errorf("ParseAnswer = %+v, %v; want %+v", got, err, tt.want)
			}
			// The published schema agrees, on every case of this table.
			if ok, serr := valid(schemas[tt.op], []byte(tt.payload)); ok != !tt.wantErr {
				t.Errorf("schema valid = %v (%v), parser valid = %v", ok, serr, !tt.wantErr)
			}
		})
	}
}

// FuzzParseAnswer: whatever a function answers, ParseAnswer does not
// panic, and what it accepts the published schema accepts, answers the op,
// carries an id when accepted, and reads back the same after a round trip.
func FuzzParseAnswer(f *testing.F) {
	for _, s := range []string{
		`{"status":"accepted","id":"msg_1"}`, `{"version":1,"status":"rejected","reason":"r","code":"c"}`,
		`{"status":"retry"}`, `{"status":"not_found"}`, `{"status":"accepted","id":null}`, `{"status":"accepted","id":"\u00a0"}`,
		`{"errorType":"x","errorMessage":"y"}`, `Task timed out after 3.00 seconds`, `{"status":"rejected","id":" "}`,
		`{"version":1.0,"status":"retry"}`, `{"status":"accepted","id":"a","status":"retry"}`, "{\"status\":\"retry\",\"reason\":\"\xff\"}",
	} {
		f.Add(true, []byte(s))
		f.Add(false, []byte(s))
	}
	schemas := map[lambdaprovider.Op]*jsonschema.Schema{
		lambdaprovider.OpSend: compile(f, "sendAnswer"), lambdaprovider.OpLookup: compile(f, "lookupAnswer"),
	}
	f.Fuzz(func(t *testing.T, isSend bool, payload []byte) {
		op := lambdaprovider.OpLookup
		if isSend {
			op = lambdaprovider.OpSend
		}
		a, err := lambdaprovider.ParseAnswer(op, payload)
		if err != nil {
			if !errors.Is(err, lambdaprovider.ErrUnreadable) {
				t.Fatalf("error %v does not wrap ErrUnreadable", err)
			}
			return
		}
		if ok, serr := valid(schemas[op], payload); !ok {
			t.Fatalf("ParseAnswer accepts %q as %+v; the schema refuses it: %v", payload, a, serr)
		}
		switch a.Status {
		case lambdaprovider.StatusAccepted, lambdaprovider.StatusRejected, lambdaprovider.StatusRetry:
		case lambdaprovider.StatusNotFound:
			if isSend {
				t.Fatalf("not_found accepted as an answer to a send: %q", payload)
			}
		default:
			t.Fatalf("status %q accepted: %q", a.Status, payload)
		}
		if a.Status == lambdaprovider.StatusAccepted && strings.TrimSpace(a.ID) == "" {
			t.Fatalf("accepted without an id: %q", payload)
		}
		again, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		b, err := lambdaprovider.ParseAnswer(op, again)
		if err != nil || b != a {
			t.Fatalf("round trip of %+v: %+v, %v", a, b, err)
		}
	})
}
