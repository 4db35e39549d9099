package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/sendonce/sendonce/internal/provider/lambdaprovider"
	"github.com/sendonce/sendonce/provider"
)

// These tests hold the example to the published contract from both sides:
// the schema (schema/lambda-provider.v1.json), and sendonce's own adapter
// (package lambdaprovider), whose requests this function must read and
// which must read this function's answers.

const schemaPath = "../../schema/lambda-provider.v1.json"

func compile(t testing.TB, def string) *jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	sch, err := c.Compile(schemaPath + "#/$defs/" + def)
	if err != nil {
		t.Fatalf("compile %s: %v", def, err)
	}
	return sch
}

func schemaValid(sch *jsonschema.Schema, b []byte) (bool, error) {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return false, err
	}
	err = sch.Validate(v)
	return err == nil, err
}

const testKey = "v1_a5ce46682abd7dc1fbbc58b114c4d26e0c9886586f14d590ea4ef4f1f6ee0b71"

// base is a valid send request; cases edit it.
func base() map[string]any {
	return map[string]any{
		"version": 1, "op": "send", "key": testKey, "tenant": "acme", "channel": "sms", "class": "otp",
		"to": "+15551234567", "content": map[string]any{"text": "Your code is 123456"},
		"attempted_at": "2026-11-29T12:00:00.123Z",
	}
}

func encode(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseRequest(t *testing.T) {
	t.Parallel()
	with := func(edit func(m map[string]any)) map[string]any {
		m := base()
		edit(m)
		return m
	}
	tests := []struct {
		name    string
		payload any
		want    Request
		wantErr error
	}{
		{"SendSMS", base(), Request{Version: 1, Op: "send", Key: testKey, Tenant: "acme", Channel: "sms", Class: "otp",
			To: "+15551234567", Content: Content{Text: "Your code is 123456"}, AttemptedAt: "2026-11-29T12:00:00.123Z"}, nil},
		{"EmailWithHTML", with(func(m map[string]any) {
			m["channel"], m["to"], m["class"] = "email", "ana@example.com", "transactional"
			m["content"] = map[string]any{"subject": "Shipped", "text": "Shipped.", "html": "<p>Shipped.</p>"}
		}), Request{Version: 1, Op: "send", Key: testKey, Tenant: "acme", Channel: "email", Class: "transactional", To: "ana@example.com",
			Content: Content{Subject: "Shipped", Text: "Shipped.", HTML: "<p>Shipped.</p>"}, AttemptedAt: "2026-11-29T12:00:00.123Z"}, nil},
		{"LookupWithWindow", with(func(m map[string]any) {
			m["op"], m["attempted_until"], m["provider_message_id"] = "lookup", "2026-11-29T12:01:00+01:00", "msg_9"
			delete(m, "class")
		}), Request{Version: 1, Op: "lookup", Key: testKey, Tenant: "acme", Channel: "sms", To: "+15551234567",
			Content: Content{Text: "Your code is 123456"}, AttemptedAt: "2026-11-29T12:00:00.123Z",
			AttemptedUntil: "2026-11-29T12:01:00+01:00", ProviderMessageID: "msg_9"}, nil},
		{"UnknownFieldsIgnored", with(func(m map[string]any) { m["priority"] = "high"; m["content"].(map[string]any)["amp"] = "x" }),
			Request{Version: 1, Op: "send", Key: testKey, Tenant: "acme", Channel: "sms", Class: "otp",
				To: "+15551234567", Content: Content{Text: "Your code is 123456"}, AttemptedAt: "2026-11-29T12:00:00.123Z"}, nil},

		{"Version2", with(func(m map[string]any) { m["version"] = 2 }), Request{}, ErrUnsupported},
		{"NoVersion", with(func(m map[string]any) { delete(m, "version") }), Request{}, ErrUnsupported},
		{"UnknownOp", with(func(m map[string]any) { m["op"] = "cancel" }), Request{}, ErrUnsupported},
		{"NoKey", with(func(m map[string]any) { delete(m, "key") }), Request{}, ErrInvalid},
		{"NullKey", with(func(m map[string]any) { m["key"] = nil }), Request{}, ErrInvalid},
		{"NoTo", with(func(m map[string]any) { m["to"] = "" }), Request{}, ErrInvalid},
		{"NoText", with(func(m map[string]any) { m["content"] = map[string]any{"subject": "x"} }), Request{}, ErrInvalid},
		{"ContentNotObject", with(func(m map[string]any) { m["content"] = "hi" }), Request{}, ErrInvalid},
		{"HTMLNotString", with(func(m map[string]any) { m["content"] = map[string]any{"text": "x", "html": 1} }), Request{}, ErrInvalid},
		{"NotAnObject", []any{"send"}, Request{}, ErrInvalid},
		{"Null", nil, Request{}, ErrUnsupported},
	}
	sch := compile(t, "request")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			payload := encode(t, tt.payload)
			got, err := ParseRequest(payload)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Errorf("ParseRequest = %+v, %v; want %v", got, err, tt.wantErr)
				}
			} else if err != nil || got != tt.want {
				t.Errorf("ParseRequest =\n %+v, %v\nwant %+v", got, err, tt.want)
			}
			if ok, serr := schemaValid(sch, payload); ok != (tt.wantErr == nil) {
				t.Errorf("schema valid = %v (%v); the parser says %v", ok, serr, tt.wantErr == nil)
			}
		})
	}
}

// TestReadsTheAdaptersRequests: what sendonce's adapter sends, this
// function reads, field for field.
func TestReadsTheAdaptersRequests(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		op lambdaprovider.Op
		m  provider.Message
	}{
		{lambdaprovider.OpSend, provider.Message{Key: testKey, Tenant: "acme", Channel: "sms", Class: "otp", To: "+15551234567", Body: "code 1", AttemptedAt: at}},
		{lambdaprovider.OpSend, provider.Message{Key: testKey, Tenant: "acme", Channel: "email", Class: "marketing", To: "ana@example.com",
			Subject: "Sale", Body: "50% off", HTML: "<h1>50% off</h1>", AttemptedAt: at}},
		{lambdaprovider.OpSend, provider.Message{Key: testKey, Tenant: "t.1", Channel: "push", To: "arn:aws:sns:us-east-1:123456789012:endpoint/GCM/app/1",
			Subject: "Hi", Body: "push body"}},
		{lambdaprovider.OpLookup, provider.Message{Key: testKey, Tenant: "acme", Channel: "sms", Class: "transactional", To: "+15551234567", Body: "x",
			AttemptedAt: at, AttemptedUntil: at.Add(time.Minute), ProviderMessageID: "msg_3"}},
	} {
		payload := encode(t, lambdaprovider.NewRequest(tt.op, tt.m, at))
		r, err := ParseRequest(payload)
		if err != nil {
			t.Fatalf("the example refuses the adapter's %s: %v", payload, err)
		}
		if r.Op != string(tt.op) || r.Key != tt.m.Key || r.Tenant != tt.m.Tenant || r.Channel != string(tt.m.Channel) || r.Class != string(tt.m.Class) ||
			r.To != tt.m.To || r.Content != (Content{Subject: tt.m.Subject, Text: tt.m.Body, HTML: tt.m.HTML}) ||
			r.ProviderMessageID != tt.m.ProviderMessageID || r.AttemptedAt == "" {
			t.Errorf("read %+v from %s", r, payload)
		}
	}
}

// TestAnswerJSON: the example's answers, byte for byte; the schema accepts
// each, and the adapter reads each as the answer it is.
func TestAnswerJSON(t *testing.T) {
	t.Parallel()
	rej := Rejected("21614", "not a mobile number")
	rej.ID = "msg_2"
	tests := []struct {
		name string
		a    Answer
		op   lambdaprovider.Op
		want string
	}{
		{"Accepted", Accepted("msg_1"), lambdaprovider.OpSend, `{"version":1,"status":"accepted","id":"msg_1"}`},
		{"Rejected", Rejected("400", "invalid number"), lambdaprovider.OpSend, `{"version":1,"status":"rejected","reason":"invalid number","code":"400"}`},
		{"Retry", Retry("429", "throttled"), lambdaprovider.OpSend, `{"version":1,"status":"retry","reason":"throttled","code":"429"}`},
		{"LookupRejected", rej, lambdaprovider.OpLookup, `{"version":1,"status":"rejected","id":"msg_2","reason":"not a mobile number","code":"21614"}`},
		{"LookupNotFound", NotFound(), lambdaprovider.OpLookup, `{"version":1,"status":"not_found"}`},
	}
	schemas := map[lambdaprovider.Op]*jsonschema.Schema{lambdaprovider.OpSend: compile(t, "sendAnswer"), lambdaprovider.OpLookup: compile(t, "lookupAnswer")}
	for _, tt := range tests {
		got := encode(t, tt.a)
		if string(got) != tt.want {
			t.Errorf("%s: %s, want %s", tt.name, got, tt.want)
		}
		if ok, err := schemaValid(schemas[tt.op], got); !ok {
			t.Errorf("%s: the schema refuses %s: %v", tt.name, got, err)
		}
		a, err := lambdaprovider.ParseAnswer(tt.op, got)
		if err != nil || string(a.Status) != tt.a.Status || a.ID != tt.a.ID || a.Reason != tt.a.Reason || a.Code != tt.a.Code {
			t.Errorf("%s: the adapter reads %+v, %v", tt.name, a, err)
		}
	}
}

// failBeforeWriting is a transport that fails every request before
// writing it: the gateway is unreachable.
type failBeforeWriting struct{}

func (failBeforeWriting) RoundTrip(*http.Request) (*http.Response, error) {
	return nil, errors.New("dial tcp 127.0.0.1:9: connect: connection refused")
}

// FuzzParseRequest: whatever the payload, ParseRequest does not panic and
// refuses it as unsupported or invalid, or accepts it with every required
// field, and reads the same after a round trip. The handler answers every payload (an answer the adapter
// reads) when the gateway cannot be reached: it fails only when the
// gateway may have taken the message.
func FuzzParseRequest(f *testing.F) {
	for _, v := range []any{
		base(), map[string]any{"version": 1, "op": "lookup"}, []int{1}, nil, "x",
		map[string]any{"version": 1, "op": "send", "key": testKey, "tenant": "acme", "channel": "email", "to": "a@b",
			"content": map[string]any{"text": "t", "html": "<p>"}, "attempted_at": "2026-11-29T12:00:00Z", "attempted_until": "2026-11-29T12:00:00+02:00"},
	} {
		f.Add(encode(f, v))
	}
	f.Add([]byte(`{"version":1,"op":"send","key":null}`))
	f.Add([]byte(`{"version":1.0,"op":"send"}`))
	h := &Handler{BaseURL: "http://127.0.0.1:9", Token: "t", Client: &http.Client{Transport: failBeforeWriting{}}}
	f.Fuzz(func(t *testing.T, payload []byte) {
		r, err := ParseRequest(payload)
		if err != nil {
			if errors.Is(err, ErrUnsupported) == errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v is not exactly one of ErrUnsupported, ErrInvalid", err)
			}
		} else {
			if r.Key == "" || r.Tenant == "" || r.Channel == "" || r.To == "" || r.Content.Text == "" || r.AttemptedAt == "" || (r.Op != OpSend && r.Op != OpLookup) {
				t.Fatalf("accepted %+v without a required field", r)
			}
			again, err := ParseRequest(encode(t, r))
			if err != nil || again != r {
				t.Fatalf("round trip of %+v: %+v, %v", r, again, err)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		a, herr := h.Handle(ctx, payload)
		if herr != nil {
			t.Fatalf("Handle failed (a function error) though nothing could be sent: %v", herr)
		}
		op := lambdaprovider.OpSend
		if err == nil && r.Op == OpLookup {
			op = lambdaprovider.OpLookup
		}
		if _, perr := lambdaprovider.ParseAnswer(op, encode(t, a)); perr != nil {
			t.Fatalf("the adapter cannot read the answer %+v to %q: %v", a, payload, perr)
		}
		if err != nil && strings.Contains(a.Status, "accepted") {
			t.Fatalf("accepted a request it refused: %+v", a)
		}
	})
}
