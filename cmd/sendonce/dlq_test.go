package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sendonce/sendonce/internal/sender"
	"github.com/sendonce/sendonce/internal/testenv"
	"github.com/sendonce/sendonce/notify"
)

// queues is a notification queue and its dead-letter queue in moto_server.
type queues struct {
	sqs         *sqs.Client
	queue, dlq  string
	vars        map[string]string
	motoAddress string
}

func newQueues(t *testing.T) queues {
	t.Helper()
	ep := testenv.MotoEndpoint(t)
	c := testenv.SQSAt(ep)
	ctx := t.Context()
	id := testenv.RandomID()
	dlq, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("dlq-" + id)})
	if err != nil {
		t.Fatal(err)
	}
	arn, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: dlq.QueueUrl, AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatal(err)
	}
	policy, _ := json.Marshal(map[string]any{"deadLetterTargetArn": arn.Attributes["QueueArn"], "maxReceiveCount": 5})
	q, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("q-" + id), Attributes: map[string]string{"RedrivePolicy": string(policy)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_, _ = c.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: q.QueueUrl})
		_, _ = c.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: dlq.QueueUrl})
	})
	return queues{sqs: c, queue: *q.QueueUrl, dlq: *dlq.QueueUrl, motoAddress: ep, vars: map[string]string{
		"AWS_ENDPOINT_URL_SQS": ep, "AWS_REGION": testenv.Region, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
		"SENDONCE_DLQ_URL": *dlq.QueueUrl,
	}}
}

// deadLetter puts body on the DLQ with the reason attributes the sender
// sets (none when reason is empty, as after maxReceiveCount receives).
func (q queues) deadLetter(t *testing.T, body, reason string) {
	t.Helper()
	in := &sqs.SendMessageInput{QueueUrl: aws.String(q.dlq), MessageBody: aws.String(body)}
	if reason != "" {
		in.MessageAttributes = map[string]types.MessageAttributeValue{
			sender.AttrErrorReason: {DataType: aws.String("String"), StringValue: aws.String(reason)},
			sender.AttrSourceID:    {DataType: aws.String("String"), StringValue: aws.String("src-1")},
		}
	}
	if _, err := q.sqs.SendMessage(t.Context(), in); err != nil {
		t.Fatal(err)
	}
}

// drain receives every message of url (visible now or within wait) and
// deletes it, returning the bodies.
func (q queues) drain(t *testing.T, url string, wait time.Duration) []string {
	t.Helper()
	var bodies []string
	deadline := time.Now().Add(wait)
	for {
		out, err := q.sqs.ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10, VisibilityTimeout: 30})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range out.Messages {
			bodies = append(bodies, aws.ToString(m.Body))
			_, _ = q.sqs.DeleteMessage(t.Context(), &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle})
		}
		if len(out.Messages) == 0 {
			if time.Now().After(deadline) {
				return bodies
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

func (q queues) visible(t *testing.T, url string) int {
	t.Helper()
	out, err := q.sqs.GetQueueAttributes(t.Context(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages}})
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessages)])
	return n
}

func request(event string) string {
	return `{"tenant_id":"acme","event_id":"` + event + `","channel":"sms","template":"order_shipped","recipient":{"id":"user-42","phone":"+15551234567"}}`
}

func keyOf(t *testing.T, body string) string {
	t.Helper()
	r, err := notify.Parse([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return r.Key()
}

func TestDLQ(t *testing.T) {
	t.Parallel()
	q := newQueues(t)
	cfg, unlimited := request("evt-401"), request("evt-crash")
	invalid := `{"tenant_id":"acme","event_id":"evt-bad","channel":"sms","template":"Order Shipped!","recipient":{"id":"user-42","phone":"+15551234567"}}`
	q.deadLetter(t, cfg, "configuration: provider answered 401 for +15551234567")
	q.deadLetter(t, unlimited, "")
	q.deadLetter(t, invalid, "invalid request: template: must match [a-z0-9_.-]{1,64}")
	run := func(args ...string) result { return runWith(t, q.vars, "", args...) }

	t.Run("List", func(t *testing.T) {
		r := run("dlq", "list")
		byKey := okRowsBy(t, r, "key", 3)
		for _, row := range byKey {
			if row["receive_count"].(float64) < 1 || row["message_id"] == "" {
				t.Errorf("row %v: want a message id and a receive count", row)
			}
		}
		if row := byKey[keyOf(t, cfg)]; row == nil || row["valid"] != true || !strings.Contains(row["reason"].(string), "401") || row["source_message_id"] != "src-1" {
			t.Errorf("the 401 message: %v", row)
		}
		if row := byKey[keyOf(t, unlimited)]; row == nil || row["valid"] != true {
			t.Errorf("the crash message: %v", row)
		}
		var bad map[string]any
		for _, row := range byKey {
			if row["valid"] == false {
				bad = row
			}
		}
		if bad == nil || bad["key"] == "" || !strings.Contains(bad["invalid"].(string), "template") {
			t.Errorf("the invalid message: %v; want its would-be key and why it is invalid", bad)
		}
		if strings.Contains(r.stdout, "+15551234567") {
			t.Errorf("dlq list shows a raw address: %s", r.stdout)
		}
		if n := q.visible(t, q.dlq); n != 3 {
			t.Errorf("%d messages visible after list, want all 3 back at once", n)
		}
		if tab := run("dlq", "list", "--output", "table", "--limit", "1"); tab.code != 0 || strings.Count(tab.stdout, "\n") != 2 {
			t.Errorf("table --limit 1 = %q", tab.stdout)
		}
	})
	t.Run("DryRun", func(t *testing.T) {
		r := run("dlq", "redrive", "--dry-run")
		if r.code != 0 || strings.Count(r.stdout, `"would-move"`) != 2 || strings.Count(r.stdout, `"invalid"`) != 1 {
			t.Fatalf("dry run: exit %d %q %q", r.code, r.stdout, r.stderr)
		}
		if n := q.visible(t, q.queue); n != 0 {
			t.Errorf("dry run moved %d messages", n)
		}
		if n := q.visible(t, q.dlq); n != 3 {
			t.Errorf("after a dry run %d messages are visible in the DLQ, want 3", n)
		}
	})
	t.Run("ReasonMatch", func(t *testing.T) {
		// The queue comes from ListDeadLetterSourceQueues: no --queue-url.
		r := run("dlq", "redrive", "--reason-match", "answered 40[13]", "--each")
		if r.code != 0 || strings.Count(r.stdout, `"moved"`) != 1 || strings.Count(r.stdout, `"no-match"`) != 1 {
			t.Fatalf("redrive --reason-match: exit %d %q %q", r.code, r.stdout, r.stderr)
		}
	})
	t.Run("All", func(t *testing.T) {
		r := run("dlq", "redrive", "--queue-url", q.queue, "--each")
		if r.code != 0 || strings.Count(r.stdout, `"moved"`) != 1 || strings.Count(r.stdout, `"invalid"`) != 1 {
			t.Fatalf("redrive: exit %d %q %q", r.code, r.stdout, r.stderr)
		}
		got := q.drain(t, q.queue, 0)
		if len(got) != 2 || !(contains(got, cfg) && contains(got, unlimited)) {
			t.Errorf("the queue holds %q, want the two valid bodies unchanged", got)
		}
		if left := q.drain(t, q.dlq, 0); len(left) != 1 || left[0] != invalid {
			t.Errorf("the DLQ holds %q, want the invalid message alone", left)
		}
	})
	t.Run("Usage", func(t *testing.T) {
		for _, args := range [][]string{{"dlq"}, {"dlq", "purge"}, {"dlq", "redrive", "--reason-match", "("}, {"dlq", "list", "--limit", "0"},
			{"dlq", "redrive", "--all", "--dry-run"}, {"dlq", "redrive", "--all", "--reason-match", "x"}, {"dlq", "redrive", "--rate", "10"},
			{"dlq", "redrive", "--all", "--rate", "501"}, {"dlq", "redrive", "--concurrency", "0"}, {"dlq", "redrive", "--no-wait"}} {
			if r := run(args...); r.code != exitUsage {
				t.Errorf("%v: exit %d, want 2 (%s)", args, r.code, r.stderr)
			}
		}
		noDLQ := map[string]string{"AWS_REGION": "us-east-1"}
		if r := runWith(t, noDLQ, "", "dlq", "list"); r.code != exitUsage || !strings.Contains(r.stderr, "SENDONCE_DLQ_URL") {
			t.Errorf("no DLQ: exit %d %q", r.code, r.stderr)
		}
	})
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// binary builds the CLI once per test run.
func binary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := filepathTemp()
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "sendonce")
		if out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput(); err != nil {
			binErr = errors.New(string(out))
		}
	})
	if binErr != nil {
		t.Fatalf("go build: %v", binErr)
	}
	return binPath
}

// TestDLQRedriveKilled kills the real CLI (SIGKILL) after it sent a
// message to the queue and before it deleted it from the DLQ: the message
// is then in both queues (a duplicate the ledger absorbs), never in none.
func TestDLQRedriveKilled(t *testing.T) {
	t.Parallel()
	q := newQueues(t)
	body := request("evt-killed")
	q.deadLetter(t, body, "configuration: 401")
	target, _ := url.Parse(q.motoAddress)
	proxy := httputil.NewSingleHostReverseProxy(target)
	deleting, stop := make(chan struct{}), make(chan struct{})
	var once sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Amz-Target") == "AmazonSQS.DeleteMessageBatch" {
			_, _ = io.Copy(io.Discard, r.Body)
			once.Do(func() { close(deleting) })
			select { // hold the delete until the client dies
			case <-r.Context().Done():
			case <-stop:
			}
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(stop) }) // runs first

	// The binary is built (once per test binary, on a cold cache for
	// minutes) before the deadline of the run starts.
	bin := binary(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "dlq", "redrive", "--endpoint-url", srv.URL, "--queue-url", q.queue, "--visibility", "2s")
	cmd.Env = []string{"HOME=" + t.TempDir(), "AWS_REGION=" + testenv.Region, "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test",
		"AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null", "AWS_EC2_METADATA_DISABLED=true", "SENDONCE_DLQ_URL=" + q.dlq}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-deleting:
	case <-ctx.Done():
		t.Fatalf("the CLI never reached DeleteMessageBatch: %s", stderr.String())
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	if got := q.drain(t, q.queue, 0); len(got) != 1 || got[0] != body {
		t.Fatalf("after the kill the queue holds %q, want the message (sent before the delete)", got)
	}
	// Still in the DLQ, visible again once its 2s visibility ends; a
	// second redrive moves it (a duplicate, which the ledger absorbs).
	time.Sleep(2500 * time.Millisecond)
	r := runWith(t, q.vars, "", "dlq", "redrive", "--queue-url", q.queue, "--each")
	if r.code != 0 || strings.Count(r.stdout, `"moved"`) != 1 {
		t.Fatalf("second redrive: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	if got := q.drain(t, q.queue, 0); len(got) != 1 || got[0] != body {
		t.Errorf("after the second redrive the queue holds %q, want the duplicate", got)
	}
	if left := q.drain(t, q.dlq, 3*time.Second); len(left) != 0 {
		t.Errorf("the DLQ still holds %q", left)
	}
}

func filepathTemp() (string, error) { return os.MkdirTemp("", "sendonce-cli-") }
