package sesevents_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/ledger/dynamoledger"
	"github.com/sendonce/sendonce/internal/metrics"
	"github.com/sendonce/sendonce/internal/rie"
	"github.com/sendonce/sendonce/internal/sendkey"
	"github.com/sendonce/sendonce/internal/sesevents"
	"github.com/sendonce/sendonce/internal/testenv"
	"github.com/sendonce/sendonce/internal/testsupport"
	"github.com/sendonce/sendonce/internal/webhook"
	"github.com/sendonce/sendonce/internal/webhook/dynamodedup"
)

// The keys and the address the samples in events/ carry.
const (
	keyA      = "v1_3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f"
	keyB      = "v1_a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7"
	recipient = "recipient@example.com"
)

// loadEvent reads a sample SNS event from the repository's events/,
// strictly (every field one of the SNS event's), with one record.
func loadEvent(t testing.TB, name string) (events.SNSEvent, []byte) {
	t.Helper()
	e, raw := testsupport.StrictFile[events.SNSEvent](t, "../../events/"+name, "an SNS event")
	if len(e.Records) != 1 {
		t.Fatalf("event %s has %d records, want 1", name, len(e.Records))
	}
	return e, raw
}

func message(t testing.TB, name string) string {
	t.Helper()
	e, _ := loadEvent(t, name)
	return e.Records[0].SNS.Message
}

// edit decodes an SES event, lets f change it, and encodes it again.
func edit(t *testing.T, msg string, f func(m map[string]any)) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(msg), &m); err != nil {
		t.Fatal(err)
	}
	f(m)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParseSamples(t *testing.T) {
	t.Parallel()
	tests := []struct {
		file    string
		key     string
		status  webhook.Status
		eventID string
		at      string
	}{
		{"ses-delivery.json", keyA, webhook.StatusDelivered, "delivery:010001912f8e2d10-6b2a4c1e-0a11-4c8e-9d5e-7f3b2c1d0e9f-000000", "2026-11-30T10:00:01.912Z"},
		{"ses-bounce.json", keyA, webhook.StatusBounced, "bounce:010001912f93a1b2-8c7d6e5f-4a3b-2c1d-0e9f-8a7b6c5d4e3f-000000", "2026-11-30T10:05:12Z"},
		{"ses-complaint.json", keyB, webhook.StatusComplained, "complaint:010001912fc4d5e6-7f8a9b0c-1d2e-3f4a-5b6c-7d8e9f0a1b2c-000000", "2026-11-30T11:30:00Z"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			cb, _, err := sesevents.Parse(message(t, tt.file))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			at, _ := time.Parse(time.RFC3339Nano, tt.at)
			if cb.Provider != sesevents.Provider || cb.Key != tt.key || cb.Status != tt.status || cb.EventID != tt.eventID || !cb.At.Equal(at) {
				t.Errorf("Parse = %+v, want key %s status %s event %s at %s", cb, tt.key, tt.status, tt.eventID, tt.at)
			}
			if !strings.HasPrefix(cb.DedupID(), "cb#ses#") {
				t.Errorf("DedupID %q is not a cb#ses# record", cb.DedupID())
			}
		})
	}
}

func TestParseVariants(t *testing.T) {
	t.Parallel()
	bounce := message(t, "ses-bounce.json")
	delivery := message(t, "ses-delivery.json")
	tests := []struct {
		name    string
		msg     string
		status  webhook.Status
		wantErr error
	}{
		{"TransientBounce", edit(t, bounce, func(m map[string]any) { m["bounce"].(map[string]any)["bounceType"] = "Transient" }), webhook.StatusUndelivered, nil},
		{"NotificationFormat", edit(t, bounce, func(m map[string]any) { m["notificationType"] = m["eventType"]; delete(m, "eventType") }), webhook.StatusBounced, nil},
		{"Reject", edit(t, delivery, func(m map[string]any) {
			m["eventType"] = "Reject"
			m["reject"] = map[string]any{"reason": "Bad content"}
		}), webhook.StatusRejected, nil},
		{"KeyFromHeaderOnly", edit(t, delivery, func(m map[string]any) { delete(m["mail"].(map[string]any)["tags"].(map[string]any), "sendonce-key") }), webhook.StatusDelivered, nil},
		{"Open", edit(t, delivery, func(m map[string]any) { m["eventType"] = "Open" }), "", sesevents.ErrIgnored},
		{"DeliveryDelay", edit(t, delivery, func(m map[string]any) { m["eventType"] = "DeliveryDelay" }), "", sesevents.ErrIgnored},
		{"NoKey", edit(t, delivery, func(m map[string]any) {
			mail := m["mail"].(map[string]any)
			delete(mail["tags"].(map[string]any), "sendonce-key")
			delete(mail, "headers")
		}), "", sesevents.ErrMalformed},
		{"ForeignKey", edit(t, delivery, func(m map[string]any) {
			m["mail"].(map[string]any)["tags"].(map[string]any)["sendonce-key"] = []any{"apikey#x"}
		}), "", sesevents.ErrMalformed},
		{"BounceNoFeedbackID", edit(t, bounce, func(m map[string]any) { delete(m["bounce"].(map[string]any), "feedbackId") }), "", sesevents.ErrMalformed},
		{"NoMessageID", edit(t, delivery, func(m map[string]any) { delete(m["mail"].(map[string]any), "messageId") }), "", sesevents.ErrMalformed},
		{"BadTimestamp", edit(t, delivery, func(m map[string]any) { m["delivery"].(map[string]any)["timestamp"] = "yesterday" }), "", sesevents.ErrMalformed},
		{"NoType", edit(t, delivery, func(m map[string]any) { delete(m, "eventType") }), "", sesevents.ErrMalformed},
		{"NotJSON", "Hello from SNS", "", sesevents.ErrMalformed},
		{"TrailingObject", delivery + "}", "", sesevents.ErrMalformed},
		{"TrailingArray", delivery + "]", "", sesevents.ErrMalformed},
		{"TwoObjects", delivery + delivery, "", sesevents.ErrMalformed},
		{"Array", "[" + delivery + "]", "", sesevents.ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cb, _, err := sesevents.Parse(tt.msg)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Parse error = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil || cb.Status != tt.status {
				t.Fatalf("Parse = %+v, %v; want status %s", cb, err, tt.status)
			}
		})
	}
}

// FuzzParse: whatever the message, Parse never panics, and an accepted
// message is JSON carrying a valid key, a tracked status and an event id.
func FuzzParse(f *testing.F) {
	for _, name := range []string{"ses-delivery.json", "ses-bounce.json", "ses-complaint.json"} {
		f.Add(message(f, name))
	}
	f.Add(`{"eventType":"Bounce"}`)
	f.Add(`{}]`)
	f.Fuzz(func(t *testing.T, msg string) {
		cb, _, err := sesevents.Parse(msg)
		if err != nil {
			if !errors.Is(err, sesevents.ErrMalformed) && !errors.Is(err, sesevents.ErrIgnored) {
				t.Fatalf("unclassified error %v", err)
			}
			return
		}
		if !json.Valid([]byte(msg)) {
			t.Fatalf("accepted a message that is not JSON: %q", msg)
		}
		if !sendkey.Valid(cb.Key) || cb.EventID == "" || cb.Provider != sesevents.Provider {
			t.Fatalf("accepted %+v", cb)
		}
		if _, ok := webhook.Rank("email", cb.Status); !ok {
			t.Fatalf("accepted untracked status %q", cb.Status)
		}
	})
}

// bundle is one test's ledger and dedup store on DynamoDB Local.
type bundle struct {
	table string
	led   *dynamoledger.Ledger
	dedup *dynamodedup.Dedup
	tally *metrics.Tally
	h     *sesevents.Handler
}

// setup returns the bundle with a row claimed for each of keys.
func setup(t *testing.T, keys ...string) *bundle {
	t.Helper()
	db := testenv.DynamoDB(t)
	b := &bundle{table: testenv.NewTable(t, db), tally: metrics.NewTally()}
	var err error
	if b.led, err = dynamoledger.New(db, b.table, dynamoledger.Config{}); err != nil {
		t.Fatal(err)
	}
	if b.dedup, err = dynamodedup.New(db, b.table, dynamodedup.Config{}); err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.DiscardHandler)
	apply, err := webhook.New(webhook.Config{Ledger: b.led, Dedup: b.dedup, Metrics: b.tally, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if b.h, err = sesevents.New(apply, b.tally, quiet); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		claim(t, b.led, k)
	}
	return b
}

// claim creates the email row a sample refers to, as the sender does.
func claim(t *testing.T, l ledger.Ledger, key string) {
	t.Helper()
	if _, err := l.Claim(context.Background(), ledger.Entry{
		Key: key, Tenant: "acme", Channel: "email", Class: "transactional", Provider: "ses",
		Template: "order_shipped", RecipientID: "user-42", Address: recipient, Subject: "s", Body: "b",
	}, time.Minute); err != nil {
		t.Fatalf("Claim %s: %v", key, err)
	}
}

func (b *bundle) status(t *testing.T, key string) string {
	t.Helper()
	r, err := b.led.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("Get %s: %v", key, err)
	}
	return r.DeliveryStatus
}

// TestHandleAppliesInRankOrder: the bounce after the delivery is kept,
// the delivery replayed after the bounce changes nothing, a duplicate is
// recognised, and bounces and complaints are counted.
func TestHandleAppliesInRankOrder(t *testing.T) {
	t.Parallel()
	b := setup(t, keyA, keyB)
	ctx := context.Background()
	steps := []struct {
		file   string
		key    string
		status string
	}{
		{"ses-delivery.json", keyA, "delivered"},
		{"ses-bounce.json", keyA, "bounced"},
		{"ses-delivery.json", keyA, "bounced"}, // a repeat of the delivery: duplicate
		{"ses-bounce.json", keyA, "bounced"},   // SNS redelivers the bounce: duplicate
		{"ses-complaint.json", keyB, "complained"},
	}
	for _, s := range steps {
		e, _ := loadEvent(t, s.file)
		if err := b.h.Handle(ctx, e); err != nil {
			t.Fatalf("Handle %s: %v", s.file, err)
		}
		if got := b.status(t, s.key); got != s.status {
			t.Fatalf("after %s: status %q, want %q", s.file, got, s.status)
		}
	}
	for name, want := range map[string]int{
		metrics.CallbacksApplied: 3, metrics.DuplicateCallbacks: 2,
		sesevents.MetricBounces: 2, sesevents.MetricComplaints: 1,
	} {
		if got := b.tally.Get(name); got != want {
			t.Errorf("%s = %d, want %d", name, got, want)
		}
	}
}

// TestHandleSkipsBadRecords: a malformed or untracked record is counted
// and skipped; the other records of the event are applied and the
// invocation succeeds (a retry could not fix it).
func TestHandleSkipsBadRecords(t *testing.T) {
	t.Parallel()
	b := setup(t, keyA)
	good, _ := loadEvent(t, "ses-delivery.json")
	bad := good.Records[0]
	bad.SNS.Message = "not an SES event"
	open := good.Records[0]
	open.SNS.Message = edit(t, open.SNS.Message, func(m map[string]any) { m["eventType"] = "Open" })
	e := events.SNSEvent{Records: []events.SNSEventRecord{bad, open, good.Records[0]}}
	if err := b.h.Handle(context.Background(), e); err != nil {
		t.Fatalf("Handle: %v", err)
	}
	if got := b.status(t, keyA); got != "delivered" {
		t.Errorf("status %q, want delivered", got)
	}
	if got := b.tally.Get(metrics.InvalidCallbacks); got != 2 {
		t.Errorf("InvalidCallbacks = %d, want 2", got)
	}
}

// failingApplier fails every Apply, as an unreachable table would.
type failingApplier struct{}

func (failingApplier) Apply(context.Context, webhook.Callback) (webhook.Effect, error) {
	return "", errors.New("dynamodb: connection refused")
}

func TestHandleReturnsStoreErrors(t *testing.T) {
	t.Parallel()
	h, err := sesevents.New(failingApplier{}, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	e, _ := loadEvent(t, "ses-bounce.json")
	if err := h.Handle(context.Background(), e); err == nil {
		t.Fatal("Handle with a failing store = nil, want an error so Lambda retries")
	}
}

// TestBootstrapUnderRIE runs the real bootstrap of functions/sesevents
// under the Lambda Runtime Interface Emulator with the sample SNS events,
// against DynamoDB Local.
func TestBootstrapUnderRIE(t *testing.T) {
	t.Parallel()
	b := setup(t, keyA, keyB)
	ctx := context.Background()
	fn := rie.Start(t, rie.Build(t, "sesevents"), map[string]string{
		"AWS_LAMBDA_FUNCTION_NAME":  "sendonce-sesevents",
		"SENDONCE_TABLE":            b.table,
		"AWS_ENDPOINT_URL_DYNAMODB": testenv.DynamoDBEndpoint(t),
	})
	for _, s := range []struct{ file, key, status string }{
		{"ses-delivery.json", keyA, "delivered"},
		{"ses-bounce.json", keyA, "bounced"},
		{"ses-bounce.json", keyA, "bounced"},
		{"ses-delivery.json", keyA, "bounced"},
		{"ses-complaint.json", keyB, "complained"},
	} {
		_, raw := loadEvent(t, s.file)
		if out, err := fn.Invoke(ctx, raw); err != nil {
			t.Fatalf("Invoke %s: %v (%s)\n%s", s.file, err, out, fn.Logs())
		}
		if got := b.status(t, s.key); got != s.status {
			t.Fatalf("after %s: status %q, want %q", s.file, got, s.status)
		}
	}
	// A malformed record is skipped, not an invocation error.
	if out, err := fn.Invoke(ctx, []byte(`{"Records":[{"EventSource":"aws:sns","Sns":{"MessageId":"x","Message":"{}]"}}]}`)); err != nil {
		t.Fatalf("Invoke malformed: %v (%s)", err, out)
	}
	logs := fn.Logs()
	for _, want := range []string{`"EmailBounces":1`, `"EmailComplaints":1`, `"DuplicateCallbacks":1`, `"CallbacksApplied":1`, `"_aws"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("function output lacks %s:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, recipient) {
		t.Errorf("function output contains the raw recipient address")
	}
}
