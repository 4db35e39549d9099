package main

import (
	"context"
	"encoding/json"
	"maps"
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
	"github.com/sendonce/sendonce/internal/opstate"
	"github.com/sendonce/sendonce/internal/provider/httpprovider"
	"github.com/sendonce/sendonce/internal/provider/simulator"
	"github.com/sendonce/sendonce/internal/reconcile"
	"github.com/sendonce/sendonce/internal/redact"
	"github.com/sendonce/sendonce/internal/rie"
	"github.com/sendonce/sendonce/internal/sendkey"
	"github.com/sendonce/sendonce/internal/testenv"
	"github.com/sendonce/sendonce/internal/testsupport"
	"github.com/sendonce/sendonce/notify"
	"github.com/sendonce/sendonce/provider"
)

const simToken = "reconciler-rie-test-token"

// scheduleFile is the sample schedule event, read strictly as an
// EventBridge event.
const scheduleFile = "../../events/schedule.json"

func TestScheduleEventFile(t *testing.T) {
	t.Parallel()
	ev, _ := testsupport.StrictFile[events.EventBridgeEvent](t, scheduleFile, "an EventBridge event")
	if ev.DetailType != "Scheduled Event" || ev.Source != "aws.events" || len(ev.Resources) != 1 || !strings.HasPrefix(ev.Resources[0], "arn:aws:events:") || ev.Time.IsZero() {
		t.Errorf("schedule.json = %+v, want an EventBridge scheduled event naming its rule", ev)
	}
}

// uncertain writes an UNCERTAIN row for a message to phone, as a sender
// whose provider call ended ambiguously leaves it.
func uncertain(t *testing.T, l ledger.Ledger, eventID, phone string) ledger.Entry {
	t.Helper()
	ctx := context.Background()
	e := ledger.Entry{
		Tenant: "acme", Channel: "sms", Class: "transactional", Provider: "http", Template: "order_shipped",
		RecipientID: "user-" + eventID, Address: phone, Body: "Your order " + eventID + " shipped",
	}
	e.Key = sendkey.Derive(sendkey.Parts{Tenant: e.Tenant, EventID: eventID, RecipientID: e.RecipientID, Channel: e.Channel, Template: e.Template})
	c, err := l.Claim(ctx, e, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Mark(ctx, c, ledger.Outcome{State: ledger.StateUncertain, Reason: "no answer after the request was written"}); err != nil {
		t.Fatal(err)
	}
	return e
}

// rows is what the reconciler's RIE tests start from: a table with two
// UNCERTAIN rows, one of which (reached) the provider simulator took
// before the connection dropped while the other (lost) never reached
// it, and the environment a reconciling bootstrap needs for them (the
// redaction key from Secrets Manager, as template.yaml has it).
type rows struct {
	led           *dynamoledger.Ledger
	sim           *simulator.Simulator
	reached, lost ledger.Entry
	rd            *redact.Redactor
	moto          string
	env           map[string]string
}

func setupRows(t *testing.T, prefix string, phones [2]string) rows {
	t.Helper()
	ctx := context.Background()
	db := testenv.DynamoDB(t)
	table := testenv.NewTable(t, db)
	led, err := dynamoledger.New(db, table, dynamoledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	sim, simURL := testsupport.Simulator(t, simulator.Options{Token: simToken})
	r := rows{led: led, sim: sim, moto: testenv.MotoEndpoint(t)}
	r.reached = uncertain(t, led, prefix+"-reached", phones[0])
	r.lost = uncertain(t, led, prefix+"-lost", phones[1])
	hp, err := httpprovider.New(httpprovider.Config{BaseURL: simURL, Token: simToken})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hp.Send(ctx, provider.Message{Key: r.reached.Key, Channel: notify.Channel(r.reached.Channel), To: r.reached.Address, Body: r.reached.Body}); err != nil {
		t.Fatal(err)
	}
	keyARN, rd, err := localpipeline.NewRedactKeySecret(ctx, r.moto)
	if err != nil {
		t.Fatal(err)
	}
	r.rd = rd
	r.env = map[string]string{
		"AWS_LAMBDA_FUNCTION_TIMEOUT":  "30",
		"SENDONCE_TABLE":               table,
		"SENDONCE_SMS_PROVIDER":        "http",
		"SENDONCE_HTTP_PROVIDER_URL":   simURL,
		"SENDONCE_HTTP_PROVIDER_TOKEN": simToken,
		"SENDONCE_PROVIDER_TIMEOUT":    "2s",
		"SENDONCE_CLAIM_TIMEOUT":       "12s",
		// The attempts are older than this: a "no record" answer is
		// trusted.
		"SENDONCE_RECONCILE_SETTLE":        "1ms",
		"AWS_ENDPOINT_URL_DYNAMODB":        testenv.DynamoDBEndpoint(t),
		"SENDONCE_REDACT_KEY_PARAM":        keyARN,
		"AWS_ENDPOINT_URL_SECRETS_MANAGER": r.moto,
	}
	return r
}

// wantRunRecorded checks that the table records a reconcile run of the
// last few seconds whose report holds field (package opstate: what
// `sendonce status` shows).
func (r rows) wantRunRecorded(t *testing.T, field string) {
	t.Helper()
	st, err := opstate.Read(t.Context(), testenv.DynamoDB(t), r.env["SENDONCE_TABLE"], time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if st.Reconcile == nil || time.Since(st.Reconcile.At) > 30*time.Second || !strings.Contains(string(st.Reconcile.Summary), field) {
		t.Errorf("last reconcile run %+v, want one just now with %s", st.Reconcile, field)
	}
}

func TestBootstrapUnderRIE(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, payload := testsupport.StrictFile[events.EventBridgeEvent](t, scheduleFile, "an EventBridge event")
	r := setupRows(t, "evt", [2]string{"+15550001111", "+15550002222"})
	led, sim, reached, lost, rd := r.led, r.sim, r.reached, r.lost, r.rd
	fn := rie.Start(t, rie.Build(t, "reconciler"), r.env)

	run := func() reconcile.Summary {
		t.Helper()
		ictx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		out, err := fn.Invoke(ictx, payload)
		if err != nil {
			t.Fatalf("invoke: %v", err)
		}
		return testsupport.Strict[reconcile.Summary](t, out, "a run summary")
	}

	sum := run()
	r.wantRunRecorded(t, `"examined":2`)
	want := map[string]int{string(reconcile.ActionReconciledSent): 1, string(reconcile.ActionResent): 1}
	if sum.Examined != 2 || !maps.Equal(sum.Actions, want) || sum.Truncated {
		t.Errorf("summary = %+v, want 2 examined, actions %v, not truncated", sum, want)
	}
	for _, e := range []ledger.Entry{reached, lost} {
		rec, err := led.Get(ctx, e.Key)
		if err != nil || rec.State != ledger.StateSent {
			t.Errorf("%s: row %v, %v: want SENT", e.RecipientID, rec.State, err)
		}
		if got := sim.Delivered(e.Key); got != 1 {
			t.Errorf("%s: delivered %d times, want 1", e.RecipientID, got)
		}
	}

	// Nothing is left: the next scheduled run examines nothing.
	if sum := run(); sum.Examined != 0 || len(sum.Actions) != 0 {
		t.Errorf("second run summary = %+v, want nothing examined", sum)
	}

	deadline := time.Now().Add(5 * time.Second)
	for strings.Count(fn.Logs(), "END RequestId") < 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	m := localpipeline.ParseEMF(fn.Logs())
	for _, bad := range m.Invalid {
		t.Errorf("invalid EMF document: %s", bad)
	}
	if got := m.Get(metrics.ReconciledSent); got != 1 {
		t.Errorf("EMF ReconciledSent = %d, want 1", got)
	}
	if got := m.Get(metrics.Resent); got != 1 {
		t.Errorf("EMF Resent = %d, want 1", got)
	}
	for _, leak := range localpipeline.Scan(map[string]string{"reconciler": fn.Logs()}, rd, []string{reached.Address, lost.Address}) {
		t.Errorf("%v (token %q)", leak, leak.Token)
	}
}

// TestHandOutUnderRIE runs the reconciliation as the template deploys
// it: the scheduled reconciler (SENDONCE_RECONCILE_QUEUE_URL set) only
// finds the due rows and hands them out to the units queue, and a
// reconcile worker (functions/reconcileworker) settles each unit Lambda's
// event source hands it. Both run as their bootstraps, so every call they
// make is evaluated against ReconcilerRole and ReconcileWorkerRole
// (package iamfront): the attention index's Query and the hand-out's
// SendMessage as the finder, the rows' reads, takeovers, marks and the
// resend as the worker.
func TestHandOutUnderRIE(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, payload := testsupport.StrictFile[events.EventBridgeEvent](t, scheduleFile, "an EventBridge event")
	r := setupRows(t, "evt-ho", [2]string{"+15550003333", "+15550004444"})
	led, sim, reached, lost := r.led, r.sim, r.reached, r.lost
	q := testenv.SQSAt(r.moto)
	created, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("sendonce-units-" + testenv.RandomID())})
	if err != nil {
		t.Fatal(err)
	}
	units := aws.ToString(created.QueueUrl)
	t.Cleanup(func() { _, _ = q.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: created.QueueUrl}) })
	env := maps.Clone(r.env)
	env["SENDONCE_RECONCILE_QUEUE_URL"] = units
	env["AWS_ENDPOINT_URL_SQS"] = r.moto
	finder := rie.Start(t, rie.Build(t, "reconciler"), env)
	worker := rie.Start(t, rie.Build(t, "reconcileworker"), env)

	ictx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	out, err := finder.Invoke(ictx, payload)
	if err != nil {
		t.Fatalf("reconciler: %v", err)
	}
	var rep struct{ Found, Units int }
	if err := json.Unmarshal(out, &rep); err != nil || rep.Found != 2 || rep.Units < 1 {
		t.Fatalf("hand-out %s (%v): want 2 rows found in at least one unit", out, err)
	}
	r.wantRunRecorded(t, `"found":2`)
	got, err := q.ReceiveMessage(ictx, &sqs.ReceiveMessageInput{QueueUrl: created.QueueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 2})
	if err != nil || len(got.Messages) != rep.Units {
		t.Fatalf("units queue: %d messages, %v: want %d", len(got.Messages), err, rep.Units)
	}
	var ev events.SQSEvent
	for _, m := range got.Messages {
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle),
			Body: aws.ToString(m.Body), EventSource: "aws:sqs", AWSRegion: testenv.Region,
			Attributes: map[string]string{"ApproximateReceiveCount": "1"}})
	}
	in, _ := json.Marshal(ev)
	out, err = worker.Invoke(ictx, in)
	if err != nil {
		t.Fatalf("reconcile worker: %v", err)
	}
	var resp events.SQSEventResponse
	if err := json.Unmarshal(out, &resp); err != nil || len(resp.BatchItemFailures) != 0 {
		t.Errorf("worker answered %s (%v): want no failures", out, err)
	}
	for _, e := range []ledger.Entry{reached, lost} {
		rec, err := led.Get(ctx, e.Key)
		if err != nil || rec.State != ledger.StateSent {
			t.Errorf("%s: row %v, %v: want SENT", e.RecipientID, rec.State, err)
		}
		if got := sim.Delivered(e.Key); got != 1 {
			t.Errorf("%s: delivered %d times, want 1", e.RecipientID, got)
		}
	}
	for _, fn := range []*rie.Instance{finder, worker} {
		if d := fn.IAMDenied(); len(d) > 0 {
			t.Errorf("denied: %q", d)
		}
	}
}
