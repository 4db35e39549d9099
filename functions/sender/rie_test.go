package main

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/ledger/dynamoledger"
	"github.com/sendonce/sendonce/internal/localpipeline"
	"github.com/sendonce/sendonce/internal/metrics"
	"github.com/sendonce/sendonce/internal/provider/simulator"
	"github.com/sendonce/sendonce/internal/redact"
	"github.com/sendonce/sendonce/internal/rie"
	"github.com/sendonce/sendonce/internal/sender"
	"github.com/sendonce/sendonce/internal/templates"
	"github.com/sendonce/sendonce/internal/templates/dynamotemplates"
	"github.com/sendonce/sendonce/internal/testenv"
	"github.com/sendonce/sendonce/internal/testsupport"
	"github.com/sendonce/sendonce/notify"
)

const simToken = "sender-rie-test-token"

type bundle struct {
	fn      *rie.Instance
	sim     *simulator.Simulator
	ledger  ledger.Ledger
	sqs     *sqs.Client
	dlqURL  string
	event   events.SQSEvent
	payload []byte
	// sms, email are the valid requests of the sample batch.
	sms, email notify.Request
	// rd makes the tokens of the function's redaction key.
	rd *redact.Redactor
}

func setup(t *testing.T) bundle {
	t.Helper()
	ctx := context.Background()
	// The sample batch, strictly: every field must be one of the SQS event's.
	ev, payload := testsupport.StrictFile[events.SQSEvent](t, "../../events/sqs-batch.json", "an SQS event")
	db := testenv.DynamoDB(t)
	table := testenv.NewTable(t, db)
	moto := testenv.MotoEndpoint(t)
	q := testenv.SQSAt(moto)
	dlq, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("sender-rie-dlq-" + testenv.RandomID())})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = q.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: dlq.QueueUrl}) })

	sim, simURL := testsupport.Simulator(t, simulator.Options{Token: simToken})

	led, err := dynamoledger.New(db, table, dynamoledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := templates.ImportExamples(ctx, dynamotemplates.New(db, table, dynamotemplates.Config{}), "acme"); err != nil {
		t.Fatal(err)
	}
	b := bundle{sim: sim, ledger: led, sqs: q, dlqURL: aws.ToString(dlq.QueueUrl), event: ev, payload: payload}
	for i, p := range []*notify.Request{&b.sms, &b.email} {
		if *p, err = notify.Parse([]byte(ev.Records[i].Body)); err != nil {
			t.Fatalf("record %d of sqs-batch.json: %v", i, err)
		}
	}
	keyARN, rd, err := localpipeline.NewRedactKeySecret(ctx, moto)
	if err != nil {
		t.Fatal(err)
	}
	b.rd = rd
	b.fn = rie.Start(t, rie.Build(t, "sender"), map[string]string{
		"AWS_LAMBDA_FUNCTION_TIMEOUT":  "30",
		"SENDONCE_TABLE":               table,
		"SENDONCE_DLQ_URL":             b.dlqURL,
		"SENDONCE_SMS_PROVIDER":        "http",
		"SENDONCE_EMAIL_PROVIDER":      "http",
		"SENDONCE_HTTP_PROVIDER_URL":   simURL,
		"SENDONCE_HTTP_PROVIDER_TOKEN": simToken,
		"SENDONCE_PROVIDER_TIMEOUT":    "2s",
		"SENDONCE_CLAIM_TIMEOUT":       "12s",
		// One record at a time, so that the redelivered copy always finds
		// the first one's outcome rather than racing it.
		"SENDONCE_CONCURRENCY": "1",
		// As template.yaml sets it (AWS::StackName): its metrics go to
		// the stack's namespace, the one its alarms read.
		"SENDONCE_STACK":            rieStack,
		"AWS_ENDPOINT_URL_DYNAMODB": testenv.DynamoDBEndpoint(t),
		"AWS_ENDPOINT_URL_SQS":      moto,
		// The redaction key, from Secrets Manager as template.yaml has it.
		"SENDONCE_REDACT_KEY_PARAM":        keyARN,
		"AWS_ENDPOINT_URL_SECRETS_MANAGER": moto,
	})
	return b
}

// rieStack is the stack name the bootstrap runs in.
const rieStack = "sendonce-rie"

func invoke(t *testing.T, fn *rie.Instance, payload []byte) events.SQSEventResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := fn.Invoke(ctx, payload)
	if err != nil {
		t.Fatalf("invoke: %v", err)
	}
	return testsupport.Strict[events.SQSEventResponse](t, out, "an SQS batch response")
}

func failedIDs(resp events.SQSEventResponse) []string {
	ids := []string{}
	for _, f := range resp.BatchItemFailures {
		ids = append(ids, f.ItemIdentifier)
	}
	slices.Sort(ids)
	return ids
}

// waitLogs waits until the function's output covers n invocations (the
// emulator copies it asynchronously) and returns the EMF totals.
func waitLogs(t *testing.T, fn *rie.Instance, n int) localpipeline.MetricTotals {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for strings.Count(fn.Logs(), "END RequestId") < n && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	return localpipeline.ParseEMF(fn.Logs())
}

func TestSampleBatchUnderRIE(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	invalid := b.event.Records[3]

	// First delivery: both valid messages are sent once; the redelivered
	// copy of the SMS finds it SENT; the invalid body goes to the DLQ.
	// Nothing is left for SQS to redeliver.
	if got := failedIDs(invoke(t, b.fn, b.payload)); len(got) != 0 {
		t.Errorf("batchItemFailures = %v, want none", got)
	}
	for _, req := range []notify.Request{b.sms, b.email} {
		if got := b.sim.Delivered(req.Key()); got != 1 {
			t.Errorf("%s: delivered %d times, want 1", req.Channel, got)
		}
		rec, err := b.ledger.Get(ctx, req.Key())
		if err != nil || rec.State != ledger.StateSent {
			t.Errorf("%s: ledger row %v, %v: want SENT", req.Channel, rec.State, err)
		}
	}

	out, err := b.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl: aws.String(b.dlqURL), MaxNumberOfMessages: 10, MessageAttributeNames: []string{"All"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Messages) != 1 {
		t.Fatalf("dead-letter queue holds %d messages, want 1 (the invalid body)", len(out.Messages))
	}
	dl := out.Messages[0]
	if got := aws.ToString(dl.Body); got != invalid.Body {
		t.Errorf("dead letter body = %q, want the original %q", got, invalid.Body)
	}
	attr := func(name string) string { return aws.ToString(dl.MessageAttributes[name].StringValue) }
	for name, want := range map[string]string{
		sender.AttrErrorReason:  "invalid request: event_id: is required",
		sender.AttrErrorField:   "event_id",
		sender.AttrSourceID:     invalid.MessageId,
		sender.AttrReceiveCount: "1",
	} {
		if got := attr(name); got != want {
			t.Errorf("dead letter attribute %s = %q, want %q", name, got, want)
		}
	}

	m := waitLogs(t, b.fn, 1)
	for name, want := range map[string]int{
		metrics.Sent: 2, metrics.DuplicatesPrevented: 1, metrics.InvalidRequests: 1, metrics.InFlightConflicts: 0,
	} {
		if got := m.Get(name); got != want {
			t.Errorf("EMF %s = %d, want %d", name, got, want)
		}
	}
	// Every EMF document of the stack's function is in the stack's own
	// namespace, which its alarms read (infra's TestTelemetryScopedToStack).
	if ns := metrics.StackNamespace(rieStack); m.Documents == 0 || m.Namespaces[ns] != m.Documents || len(m.Namespaces) != 1 {
		t.Errorf("EMF namespaces %v over %d documents, want every one in %s", m.Namespaces, m.Documents, ns)
	}

	// SQS delivers the same batch again (say, the function timed out after
	// the sends): nothing is sent again, the invalid body is dead-lettered
	// again with its reason.
	if got := failedIDs(invoke(t, b.fn, b.payload)); len(got) != 0 {
		t.Errorf("redelivered batch: batchItemFailures = %v, want none", got)
	}
	for _, req := range []notify.Request{b.sms, b.email} {
		if got := b.sim.Delivered(req.Key()); got != 1 {
			t.Errorf("after redelivery, %s delivered %d times, want 1", req.Channel, got)
		}
	}
	m = waitLogs(t, b.fn, 3)
	if got, want := m.Get(metrics.DuplicatesPrevented), 1+3; got != want {
		t.Errorf("EMF DuplicatesPrevented after redelivery = %d, want %d", got, want)
	}
	if got, want := m.Get(metrics.Sent), 2; got != want {
		t.Errorf("EMF Sent after redelivery = %d, want %d", got, want)
	}
	checkLogs(t, b, m)
}

func TestTransientFailureIsReported(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// The email provider answers 503 once: that record alone is reported,
	// and its claim released for the redelivery.
	b.sim.AddFault(simulator.Fault{Kind: simulator.FaultStatus, Status: 503, Reference: b.email.Key(), Count: 1})
	emailID := b.event.Records[1].MessageId
	if got, want := failedIDs(invoke(t, b.fn, b.payload)), []string{emailID}; !slices.Equal(got, want) {
		t.Errorf("batchItemFailures = %v, want %v (the email)", got, want)
	}
	if got := b.sim.Delivered(b.email.Key()); got != 0 {
		t.Errorf("email delivered %d times after a 503, want 0", got)
	}
	// The redelivery of the failed record alone sends it.
	ev := events.SQSEvent{Records: []events.SQSMessage{b.event.Records[1]}}
	ev.Records[0].Attributes["ApproximateReceiveCount"] = "2"
	payload, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	if got := failedIDs(invoke(t, b.fn, payload)); len(got) != 0 {
		t.Errorf("redelivery: batchItemFailures = %v, want none", got)
	}
	if got := b.sim.Delivered(b.email.Key()); got != 1 {
		t.Errorf("email delivered %d times after the redelivery, want 1", got)
	}
	m := waitLogs(t, b.fn, 2)
	if got := m.Get(metrics.Released); got != 1 {
		t.Errorf("EMF Released = %d, want 1", got)
	}
	checkLogs(t, b, m)
}

// checkLogs checks that every EMF document is valid and that the
// function's output holds no raw address and no address token that is not
// keyed with the deployment's key (localpipeline.Scan).
func checkLogs(t *testing.T, b bundle, m localpipeline.MetricTotals) {
	t.Helper()
	for _, bad := range m.Invalid {
		t.Errorf("invalid EMF document: %s", bad)
	}
	for _, leak := range localpipeline.Scan(map[string]string{"sender": b.fn.Logs()}, b.rd, []string{"+15551234567", "+15557654321", "ana@example.com"}) {
		t.Errorf("%v (token %q)", leak, leak.Token)
	}
}
