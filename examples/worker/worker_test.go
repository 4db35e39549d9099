package main

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sendonce/sendonce"
	"github.com/sendonce/sendonce/notify"
	"github.com/sendonce/sendonce/provider/providertest"
)

func TestSettings(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	w, err := settings(env("SENDONCE_QUEUE_URL", "https://q", "WORKER_POLLERS", "4", "WORKER_SEND_TIMEOUT", "30s", "WORKER_VISIBILITY", "2m"))
	if err != nil {
		t.Fatal(err)
	}
	if w.Pollers != 4 || w.SendTimeout != 30*time.Second || w.Visibility != 2*time.Minute || w.Wait != 20*time.Second {
		t.Errorf("settings = %+v", w)
	}
	for _, tc := range []struct {
		name string
		env  []string
		want string
	}{
		{"NoQueue", nil, "SENDONCE_QUEUE_URL is required"},
		{"BadDuration", []string{"SENDONCE_QUEUE_URL", "q", "WORKER_WAIT", "soon"}, `WORKER_WAIT="soon"`},
		{"LongWait", []string{"SENDONCE_QUEUE_URL", "q", "WORKER_WAIT", "30s"}, "want 0 to 20s"},
		{"NoPollers", []string{"SENDONCE_QUEUE_URL", "q", "WORKER_POLLERS", "0"}, "want at least 1"},
		{"VisibilityTooShort", []string{"SENDONCE_QUEUE_URL", "q", "WORKER_SEND_TIMEOUT", "20s", "WORKER_VISIBILITY", "21s"}, "must exceed WORKER_SEND_TIMEOUT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := settings(env(tc.env...)); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("settings: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// queue is an SQS stand-in for one message: it answers as SQS does,
// with the system attributes the receive asks for and no others, and
// records deletes. After its message it cancels the worker (stop).
type queue struct {
	msg     types.Message
	sentAt  time.Time
	stop    context.CancelFunc
	mu      sync.Mutex
	handed  bool
	deleted []string
}

func (q *queue) ReceiveMessage(_ context.Context, in *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.handed {
		q.stop()
		return &sqs.ReceiveMessageOutput{}, nil
	}
	q.handed = true
	m := q.msg
	m.Attributes = map[string]string{}
	for _, a := range in.MessageSystemAttributeNames {
		if a == types.MessageSystemAttributeNameSentTimestamp || a == types.MessageSystemAttributeNameAll {
			m.Attributes[string(types.MessageSystemAttributeNameSentTimestamp)] = strconv.FormatInt(q.sentAt.UnixMilli(), 10)
		}
	}
	return &sqs.ReceiveMessageOutput{Messages: []types.Message{m}}, nil
}

func (q *queue) DeleteMessage(_ context.Context, in *sqs.DeleteMessageInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.deleted = append(q.deleted, aws.ToString(in.ReceiptHandle))
	return &sqs.DeleteMessageOutput{}, nil
}

// TestOTPEnqueuedAnHourAgo: an OTP (valid 10 minutes) that waited an
// hour in the queue is never sent: its row ends FAILED (expired) and the
// message is deleted.
func TestOTPEnqueuedAnHourAgo(t *testing.T) {
	req := notify.Request{TenantID: "acme", EventID: "login-7", Channel: notify.ChannelSMS, Template: "login_code", Class: notify.ClassOTP,
		Recipient: notify.Recipient{ID: "user-42", Phone: "+15551234567"}, Content: &notify.Content{Text: "Your code is 123456"}}
	body, err := req.Body()
	if err != nil {
		t.Fatal(err)
	}
	gw := &providertest.Fake{ProviderName: "gw"}
	l := sendonce.NewMemoryLedger()
	s, err := sendonce.NewSender(sendonce.SenderConfig{Ledger: l, Routes: sendonce.Routes{notify.ChannelSMS: {gw}},
		Validity: map[notify.Class]time.Duration{notify.ClassOTP: 10 * time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithTimeout(context.Background(), 30*time.Second)
	defer stop()
	q := &queue{msg: types.Message{MessageId: aws.String("m1"), ReceiptHandle: aws.String("r1"), Body: aws.String(string(body))},
		sentAt: time.Now().Add(-time.Hour), stop: stop}
	w := &Worker{SQS: q, QueueURL: "https://sqs.local/q", Sender: s, Pollers: 1, Visibility: 60 * time.Second, SendTimeout: 20 * time.Second}
	if err := w.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if gw.Calls() != 0 {
		t.Errorf("the provider was called %d times for an OTP an hour old", gw.Calls())
	}
	row, err := l.Get(context.Background(), req.Key())
	if err != nil {
		t.Fatal(err)
	}
	if row.State != sendonce.StateFailed || !strings.HasPrefix(row.Reason, "expired") {
		t.Errorf("row %s (%s), want FAILED, expired", row.State, row.Reason)
	}
	if len(q.deleted) != 1 {
		t.Errorf("deleted %v, want the message deleted once", q.deleted)
	}
}
