// Package examples_test runs every producer example against the local
// stack: the example enqueues a request (or submits it to the API bootstrap
// under the Lambda RIE), the message is handed to the real sender bootstrap
// under the RIE as the event source mapping would, and the HTTP provider
// simulator must receive the rendered text of the tenant's stored template.
package examples_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sendonce/sendonce/internal/apikey"
	"github.com/sendonce/sendonce/internal/apikey/dynamoapikey"
	"github.com/sendonce/sendonce/internal/localpipeline"
	"github.com/sendonce/sendonce/internal/provider/simulator"
	"github.com/sendonce/sendonce/internal/rie"
	"github.com/sendonce/sendonce/internal/templates"
	"github.com/sendonce/sendonce/internal/templates/dynamotemplates"
	"github.com/sendonce/sendonce/internal/testenv"
	"github.com/sendonce/sendonce/internal/testsupport"
	"github.com/sendonce/sendonce/notify"
)

const simToken = "examples-token"

// stack is the local stack one example runs against.
type stack struct {
	table  string
	moto   string
	sqs    *sqs.Client
	sim    *simulator.Simulator
	sender *rie.Instance
}

func setup(t *testing.T) *stack {
	t.Helper()
	db := testenv.DynamoDB(t)
	s := &stack{table: testenv.NewTable(t, db), moto: testenv.MotoEndpoint(t)}
	s.sqs = testenv.SQSAt(s.moto)
	if _, err := templates.ImportExamples(t.Context(), dynamotemplates.New(db, s.table, dynamotemplates.Config{}), "acme"); err != nil {
		t.Fatal(err)
	}
	var simURL string
	s.sim, simURL = testsupport.Simulator(t, simulator.Options{Token: simToken})
	s.sender = rie.Start(t, rie.Build(t, "sender"), map[string]string{
		"AWS_LAMBDA_FUNCTION_TIMEOUT":  "30",
		"SENDONCE_TABLE":               s.table,
		"SENDONCE_DLQ_URL":             s.queue(t, "examples-dlq-"+testenv.RandomID()),
		"SENDONCE_SMS_PROVIDER":        "http",
		"SENDONCE_HTTP_PROVIDER_URL":   simURL,
		"SENDONCE_HTTP_PROVIDER_TOKEN": simToken,
		"AWS_ENDPOINT_URL_DYNAMODB":    testenv.DynamoDBEndpoint(t),
		"AWS_ENDPOINT_URL_SQS":         s.moto,
	})
	return s
}

// queue creates a queue (FIFO when name ends in .fifo) and returns its URL.
func (s *stack) queue(t *testing.T, name string) string {
	t.Helper()
	in := &sqs.CreateQueueInput{QueueName: aws.String(name)}
	if strings.HasSuffix(name, ".fifo") {
		in.Attributes = map[string]string{"FifoQueue": "true"}
	}
	out, err := s.sqs.CreateQueue(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = s.sqs.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: out.QueueUrl}) })
	return aws.ToString(out.QueueUrl)
}

// env is the environment of an example process: the SDKs' standard
// variables pointing at moto, plus extra.
func (s *stack) env(extra ...string) []string {
	return append(os.Environ(), append([]string{
		"AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_REGION=" + testenv.Region,
		"AWS_DEFAULT_REGION=" + testenv.Region, "AWS_ENDPOINT_URL_SQS=" + s.moto,
		"AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null",
	}, extra...)...)
}

// deliverFIFO delivers the one message on the FIFO queue q (see deliver)
// and checks it is the one whose id the example printed (printed), in
// the message group group, or the group sendonce.Enqueue gives the
// request (notify.Request.MessageGroup) when group is empty.
func (s *stack) deliverFIFO(t *testing.T, q, printed, group string) {
	t.Helper()
	m, _ := s.deliver(t, q)
	if strings.TrimSpace(printed) != aws.ToString(m.MessageId) {
		t.Errorf("printed id %q, queue holds %q", printed, aws.ToString(m.MessageId))
	}
	req, err := notify.Parse([]byte(aws.ToString(m.Body)))
	if err != nil {
		t.Fatal(err)
	}
	if group == "" {
		group = req.MessageGroup()
	}
	if g := m.Attributes["MessageGroupId"]; g != group {
		t.Errorf("MessageGroupId = %q, want the recipient's group %q", g, group)
	}
}

// deliver receives the one message on queueURL, checks it, hands it to the
// sender as Lambda's event source mapping would, and returns what the
// provider received for it.
func (s *stack) deliver(t *testing.T, queueURL string) (types.Message, simulator.Message) {
	t.Helper()
	out, err := s.sqs.ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{
		QueueUrl: aws.String(queueURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 2,
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Messages) != 1 {
		t.Fatalf("queue holds %d messages, want 1", len(out.Messages))
	}
	m := out.Messages[0]
	req, err := notify.Parse([]byte(aws.ToString(m.Body)))
	if err != nil {
		t.Fatalf("the example enqueued an invalid request: %v\n%s", err, aws.ToString(m.Body))
	}
	payload, _ := json.Marshal(localpipeline.SQSEvent("arn:aws:sqs:"+testenv.Region+":123456789012:examples", out.Messages))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	resp, err := s.sender.Invoke(ctx, payload)
	if err != nil || strings.Contains(string(resp), "itemIdentifier") {
		t.Fatalf("sender: %s, %v", resp, err)
	}
	var got simulator.Message
	for _, sm := range s.sim.Messages() {
		if sm.Reference == req.Key() {
			got = sm
		}
	}
	if got.Body != "Your order A-1001 has shipped." || got.To != "+15551234567" {
		t.Errorf("provider received %+v, want the rendered order_shipped SMS", got)
	}
	return m, got
}

func runExample(t *testing.T, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), name, args...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\nstderr: %s", name, err, stderr.String())
	}
	return stdout.String()
}

// TestProducerGo runs producer-go as built in the outside module
// (library_test.go): it enqueues with sendonce.Enqueue in the recipient's
// message group, and the sender sends the stored template's text.
func TestProducerGo(t *testing.T) {
	t.Parallel()
	m := outsideModule(t)
	s := setup(t)
	q := s.queue(t, "examples-go-"+testenv.RandomID()+".fifo")
	id := runExample(t, s.env(), m.bins["producer-go"], "-queue-url", q, "-tenant", "acme", "-event", "evt_go_1", "-recipient", "user-42",
		"-phone", "+15551234567", "-template", "order_shipped", "-data", `{"order_id":"A-1001"}`)
	s.deliverFIFO(t, q, id, "")
	// A request the sender would refuse is refused before anything is
	// enqueued, with the field at fault.
	cmd := exec.CommandContext(t.Context(), m.bins["producer-go"], "-queue-url", q, "-tenant", "acme", "-event", "evt_go_2", "-recipient", "user-42",
		"-phone", "555", "-template", "order_shipped")
	cmd.Env = s.env()
	out, err := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); err == nil || code != 2 || !strings.Contains(string(out), "recipient.phone") {
		t.Errorf("producer-go with a bad phone: exit %d, %q; want exit 2 naming recipient.phone", code, out)
	}
}

func TestAWSCLI(t *testing.T) {
	t.Parallel()
	s := setup(t)
	q := s.queue(t, "examples-cli-"+testenv.RandomID()+".fifo")
	id := runExample(t, s.env("SENDONCE_QUEUE_URL="+q, "EVENT_ID=evt_cli_1"), "sh", "aws-cli.sh")
	s.deliverFIFO(t, q, id, "acme:user-42") // the script's own group
}

// TestCurl runs curl.sh against the API bootstrap under the RIE behind a
// small HTTP front (what API Gateway does: HTTP request in, payload 2.0
// event to the function, its response back).
func TestCurl(t *testing.T) {
	t.Parallel()
	s := setup(t)
	q := s.queue(t, "examples-api-"+testenv.RandomID())
	_, key, err := apikey.New(dynamoapikey.New(testenv.DynamoDB(t), s.table), apikey.Config{}).Create(t.Context(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	fn := rie.Start(t, rie.Build(t, "api"), map[string]string{
		"SENDONCE_TABLE":            s.table,
		"SENDONCE_QUEUE_URL":        q,
		"AWS_ENDPOINT_URL_DYNAMODB": testenv.DynamoDBEndpoint(t),
		"AWS_ENDPOINT_URL_SQS":      s.moto,
	})
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		payload, _ := json.Marshal(localpipeline.FunctionURLRequest(r, body, time.Now()))
		out, err := fn.Invoke(r.Context(), payload)
		var resp events.APIGatewayV2HTTPResponse
		if err == nil {
			err = json.Unmarshal(out, &resp)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		for k, v := range resp.Headers {
			w.Header().Set(k, v)
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = io.WriteString(w, resp.Body)
	}))
	t.Cleanup(front.Close)
	env := s.env("SENDONCE_API_URL="+front.URL, "SENDONCE_API_KEY="+key, "EVENT_ID=evt_curl_1")
	out := runExample(t, env, "sh", "curl.sh")
	var acc struct{ ID, Status string }
	if err := json.Unmarshal([]byte(out), &acc); err != nil || acc.Status != "accepted" {
		t.Fatalf("curl.sh printed %q (%v), want an accepted answer", out, err)
	}
	m, got := s.deliver(t, q)
	if got.Reference != acc.ID {
		t.Errorf("provider reference %q, want the API's id %q", got.Reference, acc.ID)
	}
	// The event_id the script sent is the one the message carries.
	if req, _ := notify.Parse([]byte(aws.ToString(m.Body))); req.EventID != "evt_curl_1" {
		t.Errorf("enqueued event_id = %q, want evt_curl_1", req.EventID)
	}
	// A retry with the same Idempotency-Key replays the first answer.
	if again := runExample(t, env, "sh", "curl.sh"); again != out {
		t.Errorf("retry printed %q, want the replayed %q", again, out)
	}
}
