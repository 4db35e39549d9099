package main

import (
	"context"
	"encoding/json"
	"net/http"
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
	"github.com/sendonce/sendonce/internal/metrics"
	"github.com/sendonce/sendonce/internal/rie"
	"github.com/sendonce/sendonce/internal/testenv"
	"github.com/sendonce/sendonce/internal/testsupport"
	"github.com/sendonce/sendonce/notify"
)

// readEvent decodes an events/ file strictly: every field must be one of
// the HTTP API payload 2.0 event's.
func readEvent(t *testing.T, name string) events.APIGatewayV2HTTPRequest {
	t.Helper()
	ev, _ := testsupport.StrictFile[events.APIGatewayV2HTTPRequest](t, "../../events/"+name, "an HTTP API payload 2.0 event")
	return ev
}

func TestEventFiles(t *testing.T) {
	t.Parallel()
	post := readEvent(t, "api-post.json")
	if post.Version != "2.0" || post.RequestContext.HTTP.Method != http.MethodPost || post.RawPath != "/v1/notifications" || post.Headers["idempotency-key"] == "" {
		t.Errorf("api-post.json: %+v", post)
	}
	if _, err := notify.Parse([]byte(strings.Replace(post.Body, "{", `{"tenant_id":"acme","event_id":"e",`, 1))); err != nil {
		t.Errorf("api-post.json body is not a request: %v", err)
	}
	get := readEvent(t, "api-get.json")
	if get.Version != "2.0" || get.RequestContext.HTTP.Method != http.MethodGet || get.RawPath != "/v1/notifications/"+get.PathParameters["id"] {
		t.Errorf("api-get.json: %+v", get)
	}
}

func invoke(t *testing.T, fn *rie.Instance, ev events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
	t.Helper()
	payload, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := fn.Invoke(ctx, payload)
	if err != nil {
		t.Fatalf("invoke: %v", err)
	}
	var resp events.APIGatewayV2HTTPResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		t.Fatalf("response %s: %v", out, err)
	}
	return resp
}

func TestBootstrapUnderRIE(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testenv.DynamoDB(t)
	table := testenv.NewTable(t, db)
	moto := testenv.MotoEndpoint(t)
	sq := testenv.SQSAt(moto)
	q, err := sq.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("api-rie-" + testenv.RandomID())})
	if err != nil {
		t.Fatal(err)
	}
	_, key, err := apikey.New(dynamoapikey.New(db, table), apikey.Config{}).Create(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}

	fn := rie.Start(t, rie.Build(t, "api"), map[string]string{
		"SENDONCE_TABLE":              table,
		"SENDONCE_QUEUE_URL":          *q.QueueUrl,
		"SENDONCE_API_TENANT_RATE":    "50/1m",
		"AWS_ENDPOINT_URL_DYNAMODB":   testenv.DynamoDBEndpoint(t),
		"AWS_ENDPOINT_URL_SQS":        moto,
		"SENDONCE_API_RECIPIENT_RATE": "10/1m",
	})

	post := readEvent(t, "api-post.json")
	post.Headers["authorization"] = "Bearer " + key
	resp := invoke(t, fn, post)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST = %d %s, want 202", resp.StatusCode, resp.Body)
	}
	var acc struct{ ID, Status string }
	if err := json.Unmarshal([]byte(resp.Body), &acc); err != nil {
		t.Fatal(err)
	}
	again := invoke(t, fn, post)
	if again.StatusCode != http.StatusAccepted || again.Body != resp.Body || again.Headers["Idempotent-Replayed"] != "true" {
		t.Errorf("replay = %d %v %s, want the stored 202 with Idempotent-Replayed", again.StatusCode, again.Headers, again.Body)
	}
	msgs, err := sq.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, MaxNumberOfMessages: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs.Messages) != 1 {
		t.Fatalf("got %d messages, want 1", len(msgs.Messages))
	}
	req, err := notify.Parse([]byte(*msgs.Messages[0].Body))
	if err != nil || req.Key() != acc.ID || req.TenantID != "acme" {
		t.Errorf("enqueued %+v, %v: want tenant acme and key %s", req, err, acc.ID)
	}

	// The sender claims and sends; the GET event then reads the row.
	led, err := dynamoledger.New(db, table, dynamoledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := led.Claim(ctx, ledger.Entry{Key: acc.ID, Tenant: "acme", Channel: "sms", Template: req.Template, RecipientID: req.Recipient.ID, Address: req.Recipient.Phone}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := led.Mark(ctx, c, ledger.Outcome{State: ledger.StateSent, ProviderMessageID: "msg_1"}); err != nil {
		t.Fatal(err)
	}
	get := readEvent(t, "api-get.json")
	get.Headers["authorization"] = "Bearer " + key
	get.RawPath = "/v1/notifications/" + acc.ID
	get.RequestContext.HTTP.Path = get.RawPath
	get.PathParameters["id"] = acc.ID
	got := invoke(t, fn, get)
	if got.StatusCode != http.StatusOK || !strings.Contains(got.Body, `"state":"SENT"`) || strings.Contains(got.Body, req.Recipient.Phone) {
		t.Errorf("GET = %d %s, want 200 with state SENT and no address", got.StatusCode, got.Body)
	}

	// Every invocation flushed one valid EMF document for service "api".
	var emf int
	for _, line := range strings.Split(fn.Logs(), "\n") {
		if !strings.Contains(line, `"_aws"`) {
			continue
		}
		var doc map[string]any
		if err := json.Unmarshal([]byte(line), &doc); err != nil {
			t.Errorf("EMF line %q: %v", line, err)
			continue
		}
		if err := metrics.Validate(doc); err != nil || doc["service"] != "api" {
			t.Errorf("EMF document %s: %v (service %v)", line, err, doc["service"])
		}
		emf++
	}
	if emf < 3 {
		t.Errorf("got %d EMF documents, want one per invocation (3)", emf)
	}
	if strings.Contains(fn.Logs(), req.Recipient.Phone) {
		t.Errorf("function logs hold a raw phone number")
	}
}
