// Package functions_test checks what every function of the SAM
// application shares: each one's real bootstrap, under the Lambda
// Runtime Interface Emulator.
package functions_test

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sendonce/sendonce/internal/apikey"
	"github.com/sendonce/sendonce/internal/apikey/dynamoapikey"
	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/ledger/dynamoledger"
	"github.com/sendonce/sendonce/internal/provider/httpprovider"
	"github.com/sendonce/sendonce/internal/provider/simulator"
	"github.com/sendonce/sendonce/internal/rie"
	"github.com/sendonce/sendonce/internal/sendkey"
	"github.com/sendonce/sendonce/internal/templates"
	"github.com/sendonce/sendonce/internal/templates/dynamotemplates"
	"github.com/sendonce/sendonce/internal/testenv"
	"github.com/sendonce/sendonce/internal/testsupport"
	"github.com/sendonce/sendonce/notify"
)

const (
	simToken       = "logs-test-token"
	callbackSecret = "logs-test-callback-secret"
)

// TestPowertoolsKeysUnderRIE: one invocation of each function, its real
// bootstrap under the RIE with an event of events/; every JSON log line
// carries Powertools for AWS Lambda's standard keys (service, cold_start,
// function_name, and within the invocation function_request_id), the
// invocation's lines the request id the emulator gave it, and the lines
// about a message its key. (The emulator hands the function no X-Ray
// trace header, so xray_trace_id is checked by lambdaenv's
// TestLoggerPowertoolsKeys with aws-lambda-go's context.)
func TestPowertoolsKeysUnderRIE(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testenv.DynamoDB(t)
	table := testenv.NewTable(t, db)
	moto := testenv.MotoEndpoint(t)
	_, simURL := testsupport.Simulator(t, simulator.Options{Token: simToken})
	q := testenv.SQSAt(moto)
	queue, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("logs-" + testenv.RandomID())})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = q.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: queue.QueueUrl}) })
	_, apiKey, err := apikey.New(dynamoapikey.New(db, table), apikey.Config{}).Create(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := templates.ImportExamples(ctx, dynamotemplates.New(db, table, dynamotemplates.Config{}), "acme"); err != nil {
		t.Fatal(err)
	}
	base := map[string]string{
		"SENDONCE_TABLE":             table,
		"SENDONCE_REDACT_KEY":        strings.Repeat("r", 32),
		"SENDONCE_LOG_LEVEL":         "debug",
		"AWS_ENDPOINT_URL_DYNAMODB":  testenv.DynamoDBEndpoint(t),
		"AWS_ENDPOINT_URL_SQS":       moto,
		"SENDONCE_SMS_PROVIDER":      "http",
		"SENDONCE_EMAIL_PROVIDER":    "http",
		"SENDONCE_HTTP_PROVIDER_URL": simURL,
		// The simulator's token; every function that reads the provider's
		// variables gets them.
		"SENDONCE_HTTP_PROVIDER_TOKEN":           simToken,
		"SENDONCE_PROVIDER_TIMEOUT":              "2s",
		"SENDONCE_CLAIM_TIMEOUT":                 "12s",
		"SENDONCE_DLQ_URL":                       aws.ToString(queue.QueueUrl),
		"SENDONCE_QUEUE_URL":                     aws.ToString(queue.QueueUrl),
		"SENDONCE_HTTP_PROVIDER_CALLBACK_SECRET": callbackSecret,
		// The row's attempt is older than this: a "no record" answer is
		// trusted.
		"SENDONCE_RECONCILE_SETTLE": "1ms",
	}

	// The sample batch's first request: its key is what the sender's,
	// the API's and the webhook's lines must carry.
	var batch events.SQSEvent
	readJSON(t, "sqs-batch.json", &batch)
	sms, err := notify.Parse([]byte(batch.Records[0].Body))
	if err != nil {
		t.Fatal(err)
	}
	var post events.APIGatewayV2HTTPRequest
	readJSON(t, "api-post.json", &post)
	post.Headers["authorization"] = "Bearer " + apiKey
	var hook events.LambdaFunctionURLRequest
	readJSON(t, "webhook-http.json", &hook)
	hook.Body = `{"event_id":"evt_logs","message_id":"msg_1","reference":"` + sms.Key() + `","status":"delivered","timestamp":"2026-11-29T12:00:00Z"}`
	hook.Headers["x-provider-signature"] = httpprovider.Sign([]byte(callbackSecret), time.Now(), []byte(hook.Body))
	// The reconcile worker's unit names an UNCERTAIN row, as a sender
	// whose provider call ended ambiguously leaves it.
	// Its own table: the reconciler's run would settle the row first.
	workerTable := testenv.NewTable(t, db)
	led, err := dynamoledger.New(db, workerTable, dynamoledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	row := ledger.Entry{Tenant: "acme", Channel: "sms", Class: "transactional", Provider: "http", Template: "order_shipped",
		RecipientID: "user-logs", Address: "+15550003333", Body: "Your order shipped"}
	row.Key = sendkey.Derive(sendkey.Parts{Tenant: row.Tenant, EventID: "evt-logs", RecipientID: row.RecipientID, Channel: row.Channel, Template: row.Template})
	c, err := led.Claim(ctx, row, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := led.Mark(ctx, c, ledger.Outcome{State: ledger.StateUncertain, Reason: "no answer after the request was written"}); err != nil {
		t.Fatal(err)
	}
	var unit events.SQSEvent
	readJSON(t, "reconcile-unit.json", &unit)
	unitKey := row.Key
	unit.Records[0].Body = strings.Replace(unit.Records[0].Body, "v1_example_key_not_in_the_ledger", unitKey, 1)

	tests := []struct {
		function string
		event    any
		key      string // a line must carry it; "" for a function whose lines name no message
		table    string // the function's table, when not the shared one
	}{
		{"sender", batch, sms.Key(), ""},
		{"api", post, "", ""}, // its key is the request's, checked below
		{"webhook", hook, sms.Key(), ""},
		{"reconciler", readRaw(t, "schedule.json"), "", ""},
		{"reconcileworker", unit, unitKey, workerTable},
		{"sesevents", readRaw(t, "ses-delivery.json"), "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.function, func(t *testing.T) {
			t.Parallel()
			const name = "stack-Function-1"
			env := maps.Clone(base)
			if tt.table != "" {
				env["SENDONCE_TABLE"] = tt.table
			}
			fn, err := rie.Launch(ctx, rie.Config{Bootstrap: rie.Build(t, tt.function), FunctionName: name, Env: env})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = fn.Close() })
			payload, ok := tt.event.(json.RawMessage)
			if !ok {
				if payload, err = json.Marshal(tt.event); err != nil {
					t.Fatal(err)
				}
			}
			ictx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			if out, err := fn.Invoke(ictx, payload); err != nil {
				t.Fatalf("invoke: %v %s", err, out)
			}
			logs := waitEnd(fn)
			requestID := startID(t, logs)
			var during, keyed, answered int
			for _, l := range jsonLines(logs) {
				if _, emf := l["_aws"]; emf {
					continue
				}
				for k, want := range map[string]any{"service": tt.function, "function_name": name} {
					if l[k] != want {
						t.Errorf("%s = %v, want %v: %v", k, l[k], want, l)
					}
				}
				if _, ok := l["cold_start"].(bool); !ok {
					t.Errorf("no cold_start: %v", l)
				}
				for _, k := range []string{"message", "timestamp", "level"} {
					if _, ok := l[k]; !ok {
						t.Errorf("no %s: %v", k, l)
					}
				}
				if id, ok := l["function_request_id"]; ok {
					during++
					if id != requestID || l["cold_start"] != true {
						t.Errorf("function_request_id %v, cold_start %v, want the invocation's %s on its first (cold) invocation: %v", id, l["cold_start"], requestID, l)
					}
				}
				if l["message"] == "provider answered" && l["provider"] == "http" && l["outcome"] != nil && l["key"] != nil {
					answered++
				}
				if tt.key != "" && l["key"] == tt.key {
					keyed++
				}
				if tt.function == "api" && strings.HasPrefix(fmtKey(l["key"]), "v1_") {
					keyed++
				}
			}
			if tt.function == "sender" && answered == 0 {
				t.Errorf("no \"provider answered\" line with provider, outcome and key:\n%s", logs)
			}
			if during == 0 {
				t.Errorf("no line of the invocation carries function_request_id:\n%s", logs)
			}
			if (tt.key != "" || tt.function == "api") && keyed == 0 {
				t.Errorf("no line carries the message's key %s:\n%s", tt.key, logs)
			}
		})
	}
}

func fmtKey(v any) string { s, _ := v.(string); return s }

func readRaw(t *testing.T, name string) json.RawMessage {
	t.Helper()
	b, err := os.ReadFile("../events/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func readJSON(t *testing.T, name string, v any) {
	t.Helper()
	if err := json.Unmarshal(readRaw(t, name), v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// waitEnd waits until the emulator has copied the invocation's output
// (its END line) and returns the output.
func waitEnd(fn *rie.Instance) string {
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(fn.Logs(), "END RequestId") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	return fn.Logs()
}

// startID returns the request id of the emulator's START line.
func startID(t *testing.T, logs string) string {
	t.Helper()
	for l := range strings.Lines(logs) {
		if rest, ok := strings.CutPrefix(l, "START RequestId: "); ok {
			return strings.Fields(rest)[0]
		}
	}
	t.Fatalf("no START line:\n%s", logs)
	return ""
}

// jsonLines decodes the lines of logs that are JSON objects.
func jsonLines(logs string) []map[string]any {
	var ls []map[string]any
	for l := range strings.Lines(logs) {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil {
			ls = append(ls, m)
		}
	}
	return ls
}
