package localpipeline

import (
	"context"
	"errors"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/metrics"
	"github.com/sendonce/sendonce/internal/testenv"
	"github.com/sendonce/sendonce/notify"
)

func TestParseEMF(t *testing.T) {
	t.Parallel()
	valid := `{"DuplicatesPrevented":2,"Sent":3,"ClaimLatency":[1.5],"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"sendonce","Dimensions":[["channel","service"]],"Metrics":[{"Name":"DuplicatesPrevented","Unit":"Count"},{"Name":"Sent","Unit":"Count"},{"Name":"ClaimLatency","Unit":"Milliseconds"}]}]},"channel":"sms","service":"sender"}`
	tests := []struct {
		name        string
		logs        []string
		wantDocs    int
		wantInvalid int
		want        map[string]int
	}{
		{name: "Sums", logs: []string{valid + "\n" + valid, valid}, wantDocs: 3, want: map[string]int{"DuplicatesPrevented": 6, "Sent": 9, "ClaimLatency": 0}},
		{name: "SkipsOtherLines", logs: []string{"START RequestId: x\n{\"level\":\"INFO\",\"msg\":\"m\"}\n" + valid + "\nEND RequestId: x"}, wantDocs: 1, want: map[string]int{"Sent": 3}},
		{name: "InvalidDocument", logs: []string{`{"Sent":1,"_aws":{"CloudWatchMetrics":[]}}`}, wantInvalid: 1, want: map[string]int{"Sent": 0}},
		{name: "BrokenJSON", logs: []string{`{"_aws": {`}, wantInvalid: 1},
		// CloudWatch Logs drops an event over its size limit: ParseEMF
		// checks the line as metrics.ValidateLine does.
		{name: "OverSizeLimit", logs: []string{strings.Replace(valid, `"channel":"sms"`, `"channel":"sms","pad":"`+strings.Repeat("x", metrics.MaxDocumentSize)+`"`, 1)}, wantInvalid: 1, want: map[string]int{"Sent": 0}},
		{name: "Empty", logs: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := ParseEMF(tc.logs...)
			if got.Documents != tc.wantDocs || len(got.Invalid) != tc.wantInvalid {
				t.Errorf("documents %d, invalid %v; want %d, %d", got.Documents, got.Invalid, tc.wantDocs, tc.wantInvalid)
			}
			for name, want := range tc.want {
				if g := got.Get(name); g != want {
					t.Errorf("%s = %d, want %d", name, g, want)
				}
			}
		})
	}
	if got := ParseEMF(valid).Dim(metrics.Sent, "channel", "sms"); got != 3 {
		t.Errorf("Dim(Sent, channel=sms) = %d, want 3", got)
	}
}

func TestNewWorkload(t *testing.T) {
	t.Parallel()
	o := WorkloadOptions{N: 200, Seed: 7, Permanent: 0.02, Undeliverable: 0.01, Invalid: 6}
	w := NewWorkload(o)
	if again := NewWorkload(o); !reflect.DeepEqual(w, again) {
		t.Fatalf("the same options gave two different workloads")
	}
	var valid, invalid, faults, wantFailed int
	keys, bodies := map[string]bool{}, map[string]bool{}
	for _, m := range w.Messages {
		bodies[m.Body] = true
		req, err := notify.Parse([]byte(m.Body))
		if !m.Valid {
			invalid++
			var ie *notify.InvalidError
			if !errors.As(err, &ie) || ie.Field != m.InvalidField {
				t.Errorf("invalid body %s: Parse error %v, want one on field %q", m.Body, err, m.InvalidField)
			}
			continue
		}
		valid++
		if err != nil || req.Key() != m.Key || req.Address() != m.Address {
			t.Errorf("valid body %s: %v (key %s, want %s)", m.Body, err, req.Key(), m.Key)
		}
		if keys[m.Key] {
			t.Errorf("key %s used twice", m.Key)
		}
		keys[m.Key] = true
		if m.Fault.Kind != "" {
			faults++
			if m.Fault.Reference != m.Key || m.Fault.Count != 1 {
				t.Errorf("fault %+v: want it restricted to %s, once", m.Fault, m.Key)
			}
		}
		if m.WantFailed {
			wantFailed++
		}
	}
	if valid != o.N || invalid != o.Invalid {
		t.Errorf("got %d valid and %d invalid, want %d and %d", valid, invalid, o.N, o.Invalid)
	}
	if faults != 6 || wantFailed != 4 {
		t.Errorf("%d messages with a planned fault, %d planned failures; want 6 and 4", faults, wantFailed)
	}
	if len(w.First) != len(w.Messages) || len(bodies) != len(w.Messages) {
		t.Errorf("%d bodies to send, %d distinct, for %d messages: want each once", len(w.First), len(bodies), len(w.Messages))
	}
	for _, b := range w.First {
		if !bodies[b] {
			t.Errorf("body %s sent but not a message's", b)
		}
	}
}

func TestFunctionURLRequest(t *testing.T) {
	t.Parallel()
	r := httptest.NewRequest("POST", "http://127.0.0.1:9999/callbacks/http?x=1", strings.NewReader(`{"a":1}`))
	r.Header.Set("X-Provider-Signature", "t=1,v1=ab")
	now := time.Unix(1764417600, 0)
	ev := FunctionURLRequest(r, []byte(`{"a":1}`), now)
	if ev.Version != "2.0" || ev.RawPath != "/callbacks/http" || ev.RawQueryString != "x=1" || ev.Body != `{"a":1}` || ev.IsBase64Encoded {
		t.Errorf("event = %+v", ev)
	}
	if got := ev.Headers["x-provider-signature"]; got != "t=1,v1=ab" {
		t.Errorf("signature header = %q, want it under its lower-case name", got)
	}
	if ev.RequestContext.HTTP.Method != "POST" || ev.RequestContext.HTTP.Path != "/callbacks/http" || ev.RequestContext.TimeEpoch != now.UnixMilli() {
		t.Errorf("request context = %+v", ev.RequestContext)
	}
}

func TestSQSEvent(t *testing.T) {
	t.Parallel()
	ev := SQSEvent("arn:aws:sqs:us-east-1:123456789012:q", []types.Message{{
		MessageId: aws.String("m1"), ReceiptHandle: aws.String("rh"), Body: aws.String("b"), MD5OfBody: aws.String("md5"),
		Attributes: map[string]string{"ApproximateReceiveCount": "3"},
		MessageAttributes: map[string]types.MessageAttributeValue{
			"k": {DataType: aws.String("String"), StringValue: aws.String("v")},
		},
	}})
	if len(ev.Records) != 1 {
		t.Fatalf("got %d records, want 1", len(ev.Records))
	}
	r := ev.Records[0]
	if r.MessageId != "m1" || r.ReceiptHandle != "rh" || r.Body != "b" || r.Attributes["ApproximateReceiveCount"] != "3" ||
		r.EventSource != "aws:sqs" || r.EventSourceARN != "arn:aws:sqs:us-east-1:123456789012:q" || aws.ToString(r.MessageAttributes["k"].StringValue) != "v" {
		t.Errorf("record = %+v", r)
	}
}

func TestWaiting(t *testing.T) {
	t.Parallel()
	rows := []ledger.Record{{State: ledger.StatePending}, {State: ledger.StateUncertain}, {State: ledger.StatePending, Released: true}}
	if p, u := Waiting(rows); p != 2 || u != 1 {
		t.Errorf("Waiting = %d pending, %d uncertain; want 2, 1", p, u)
	}
}

func TestEvery(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	Every(ctx, time.Millisecond, func() {
		if n++; n == 3 {
			cancel()
		}
	})
	if n != 3 {
		t.Errorf("Every called f %d times before ctx ended, want 3", n)
	}
}

func TestStartNeedsEndpoints(t *testing.T) {
	t.Parallel()
	_, err := Start(context.Background(), Options{})
	if err == nil || !strings.Contains(err.Error(), testenv.DynamoDBEndpointEnv) {
		t.Errorf("Start without endpoints: %v, want an error naming %s", err, testenv.DynamoDBEndpointEnv)
	}
}

func TestScanLogs(t *testing.T) {
	t.Parallel()
	phone, email, odd := "+15552000001", "demo.user0001@example.com", "555-0100-77"
	keyed := "phone:0123456789ab" // a token made with a key: not the plain hash
	tests := []struct {
		name string
		log  string
		want []string
	}{
		{name: "Clean", log: `{"msg":"sent","to":"` + keyed + `"}`},
		{name: "RawPhone", log: `{"msg":"sent","to":"` + phone + `"}`, want: []string{"raw " + phone}},
		{name: "RawEmail", log: `{"msg":"failed: <` + email + `>"}`, want: []string{"raw " + email}},
		{name: "RawInvalid", log: `{"error":"bad phone ` + odd + `"}`, want: []string{"raw " + odd}},
		{name: "UnkeyedToken", log: `{"to":"` + UnkeyedToken(phone) + `"}`, want: []string{"unkeyed token " + phone}},
		{name: "UnkeyedEmailToken", log: `{"to":"` + UnkeyedToken(email) + `"}`, want: []string{"unkeyed token " + email}},
		{name: "OtherNumber", log: `{"to":"+15559999999"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got []string
			for _, l := range Scan(map[string]string{"sender-1": tc.log}, nil, []string{phone, email, odd}) {
				if l.Instance != "sender-1" {
					t.Errorf("instance %q", l.Instance)
				}
				got = append(got, l.Form+" "+l.Address)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Scan = %q, want %q", got, tc.want)
			}
		})
	}
	if got := UnkeyedToken(phone); !strings.HasPrefix(got, "phone:") || len(got) != len("phone:")+12 {
		t.Errorf("UnkeyedToken(%s) = %q", phone, got)
	}
}
