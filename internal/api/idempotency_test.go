package api_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sendonce/sendonce/internal/api"
	"github.com/sendonce/sendonce/internal/testenv"
)

// answerDropper is an HTTP transport in front of DynamoDB Local that, while
// armed, forwards a write of an idempotency record (the write happens) and
// then loses its success answer as a reset connection would. The SDK
// retries the same write, which then fails its own condition.
type answerDropper struct {
	op      string       // the DynamoDB operation to drop answers of; "" means PutItem
	armed   atomic.Int32 // answers still to drop
	dropped atomic.Int32
}

func (d *answerDropper) RoundTrip(req *http.Request) (*http.Response, error) {
	op := d.op
	if op == "" {
		op = "PutItem"
	}
	if req.Header.Get("X-Amz-Target") != "DynamoDB_20120810."+op || d.armed.Load() <= 0 || req.Body == nil {
		return http.DefaultTransport.RoundTrip(req)
	}
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, err
	}
	_ = req.Body.Close()
	req.Body = io.NopCloser(bytes.NewReader(body))
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"idem#`) || d.armed.Add(-1) < 0 {
		return resp, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	d.dropped.Add(1)
	return nil, errors.New("read tcp 127.0.0.1: connection reset by peer (answer dropped by the test)")
}

func droppingDB(t *testing.T) (*dynamodb.Client, *answerDropper) {
	d := &answerDropper{}
	return testenv.DynamoDB(t, func(o *dynamodb.Options) { o.HTTPClient = &http.Client{Transport: d} }), d
}

// TestLostBeginAnswer: the first request's idempotency write is applied but
// its answer is lost; the SDK's retry fails the write's condition on the
// record it created itself. The request must go on (202, one message), not
// answer 409 to itself.
func TestLostBeginAnswer(t *testing.T) {
	t.Parallel()
	var d *answerDropper
	b := setup(t, setupOpts{cfg: func(c *api.Config) {
		var db *dynamodb.Client
		db, d = droppingDB(t)
		c.DB = db
	}})
	d.armed.Store(1)
	resp := b.post(t, b.keyA, "k1", body1)
	if d.dropped.Load() != 1 {
		t.Fatalf("dropped %d answers, want 1: the test did not exercise the lost answer", d.dropped.Load())
	}
	decodeAccepted(t, resp)
	if got := len(b.messages(t)); got != 1 {
		t.Errorf("got %d messages, want 1", got)
	}
	again := b.post(t, b.keyA, "k1", body1)
	if again.StatusCode != http.StatusAccepted || again.Headers["Idempotent-Replayed"] != "true" {
		t.Errorf("retry: %d replayed=%q, want a 202 replay", again.StatusCode, again.Headers["Idempotent-Replayed"])
	}
}

// TestLostTakeoverAnswer: the takeover of a dead in-flight record is
// applied but its answer is lost; the retried takeover fails its fence on
// the dead holder's token, finding its own. Begin must report Started.
func TestLostTakeoverAnswer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testenv.DynamoDB(t)
	table := testenv.NewTable(t, db)
	c := &clock{t: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}
	fp := api.Fingerprint{Sum: "fp1", Fields: map[string]string{"channel": "a"}}

	dead := api.NewIdemStore(db, table, 30*time.Second, time.Hour, c.Now)
	first, err := dead.Begin(ctx, "acme", "k1", fp, "v1_x")
	if err != nil || first.Outcome != api.Started {
		t.Fatalf("first Begin = %+v, %v; want Started", first, err)
	}
	c.Add(31 * time.Second) // the first holder died: its lease is over

	ddb, d := droppingDB(t)
	s := api.NewIdemStore(ddb, table, 30*time.Second, time.Hour, c.Now)
	d.armed.Store(1) // the create fails its condition; the takeover's answer is lost
	got, err := s.Begin(ctx, "acme", "k1", fp, "v1_x")
	if d.dropped.Load() != 1 {
		t.Fatalf("dropped %d answers, want 1", d.dropped.Load())
	}
	if err != nil || got.Outcome != api.Started || !got.TookOver || got.Token == first.Token {
		t.Fatalf("Begin after a lost takeover answer = %+v, %v; want Started, TookOver with a new token", got, err)
	}
	if err := s.Complete(ctx, "acme", "k1", got.Token, 202, "{}"); err != nil {
		t.Errorf("Complete with the takeover's token: %v", err)
	}
	if err := dead.Complete(ctx, "acme", "k1", first.Token, 202, "{}"); !errors.Is(err, api.ErrFencingLost) {
		t.Errorf("Complete with the dead holder's token = %v, want ErrFencingLost", err)
	}
}

// TestLostCompleteAnswer: Complete's write is applied but its answer is
// lost; the retried UpdateItem fails its condition on the record it
// completed. Complete must succeed, not report the request fenced out.
func TestLostCompleteAnswer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ddb, d := droppingDB(t)
	d.op = "UpdateItem"
	table := testenv.NewTable(t, ddb)
	c := &clock{t: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}
	s := api.NewIdemStore(ddb, table, 30*time.Second, time.Hour, c.Now)
	fp := api.Fingerprint{Sum: "fp1", Fields: map[string]string{"channel": "a"}}
	b, err := s.Begin(ctx, "acme", "k1", fp, "v1_x")
	if err != nil || b.Outcome != api.Started {
		t.Fatalf("Begin = %+v, %v", b, err)
	}
	d.armed.Store(1)
	if err := s.Complete(ctx, "acme", "k1", b.Token, 202, `{"id":"x"}`); err != nil {
		t.Errorf("Complete after a lost answer = %v, want nil", err)
	}
	if d.dropped.Load() != 1 {
		t.Fatalf("dropped %d answers, want 1", d.dropped.Load())
	}
	if got, err := s.Begin(ctx, "acme", "k1", fp, "v1_x"); err != nil || got.Outcome != api.Replay || got.Body != `{"id":"x"}` {
		t.Errorf("Begin after Complete = %+v, %v; want the stored Replay", got, err)
	}
	if err := s.Complete(ctx, "acme", "k1", "another-token", 202, "{}"); !errors.Is(err, api.ErrFencingLost) {
		t.Errorf("Complete with another token = %v, want ErrFencingLost", err)
	}
}
