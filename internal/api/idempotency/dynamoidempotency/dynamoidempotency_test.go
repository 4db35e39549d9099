package dynamoidempotency_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sendonce/sendonce/internal/api/idempotency"
	"github.com/sendonce/sendonce/internal/api/idempotency/dynamoidempotency"
	"github.com/sendonce/sendonce/internal/api/idempotency/idempotencytest"
	"github.com/sendonce/sendonce/internal/testenv"
	"github.com/sendonce/sendonce/internal/testsupport"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	db := testenv.DynamoDB(t)
	idempotencytest.Run(t, func(t *testing.T) idempotency.Records {
		return dynamoidempotency.New(db, testenv.NewTable(t, db))
	})
}

// answerDropper is an HTTP transport in front of DynamoDB Local that, while
// armed, forwards a write of op (the write happens) and then loses its
// success answer as a reset connection would. The SDK retries the same
// write, which then fails its own condition: the real path Lossy models.
type answerDropper struct {
	op      string
	armed   atomic.Int32 // answers still to drop
	dropped atomic.Int32
}

func (d *answerDropper) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Header.Get("X-Amz-Target") != "DynamoDB_20120810."+d.op || d.armed.Load() <= 0 || req.Body == nil {
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

// dropping returns a Store whose DynamoDB client drops answers of op, the
// dropper, and a plain Store on the same table and clock.
func dropping(t *testing.T, op string) (*idempotency.Store, *answerDropper, *idempotency.Store, *testsupport.Clock) {
	d := &answerDropper{op: op}
	ddb := testenv.DynamoDB(t, func(o *dynamodb.Options) { o.HTTPClient = &http.Client{Transport: d} })
	table := testenv.NewTable(t, ddb)
	c := testsupport.NewClock(testsupport.Start)
	cfg := idempotency.Config{Lease: 30 * time.Second, Retention: time.Hour, Now: c.Now}
	plain := idempotency.New(dynamoidempotency.New(testenv.DynamoDB(t), table), cfg)
	return idempotency.New(dynamoidempotency.New(ddb, table), cfg), d, plain, c
}

var fp = idempotency.Fingerprint{Sum: "fp1", Fields: map[string]string{"channel": "a"}}

// TestSDKRetryOfLostBeginAnswer: the create is applied, its answer lost;
// the SDK's own retry fails the condition on the record it created.
func TestSDKRetryOfLostBeginAnswer(t *testing.T) {
	t.Parallel()
	s, d, _, _ := dropping(t, "PutItem")
	d.armed.Store(1)
	got, err := s.Begin(t.Context(), "acme", "k1", fp, "v1_x")
	if d.dropped.Load() != 1 {
		t.Fatalf("dropped %d answers, want 1: the test did not exercise the lost answer", d.dropped.Load())
	}
	if err != nil || got.Verdict != idempotency.Started {
		t.Fatalf("Begin after a lost answer = %+v, %v; want Started", got, err)
	}
}

// TestSDKRetryOfLostTakeoverAnswer: the takeover of a dead in-flight record
// is applied but its answer is lost; the retried takeover fails its fence
// on the dead holder's token, finding its own.
func TestSDKRetryOfLostTakeoverAnswer(t *testing.T) {
	t.Parallel()
	s, d, dead, c := dropping(t, "PutItem")
	first, err := dead.Begin(t.Context(), "acme", "k1", fp, "v1_x")
	if err != nil || first.Verdict != idempotency.Started {
		t.Fatalf("first Begin = %+v, %v; want Started", first, err)
	}
	c.Advance(31 * time.Second) // the first holder died: its lease is over
	d.armed.Store(1)            // the create fails its condition; the takeover's answer is lost
	got, err := s.Begin(t.Context(), "acme", "k1", fp, "v1_x")
	if d.dropped.Load() != 1 {
		t.Fatalf("dropped %d answers, want 1", d.dropped.Load())
	}
	if err != nil || got.Verdict != idempotency.Started || !got.TookOver || got.Token == first.Token {
		t.Fatalf("Begin after a lost takeover answer = %+v, %v; want Started, TookOver with a new token", got, err)
	}
	if err := dead.Complete(t.Context(), "acme", "k1", first.Token, 202, "{}"); !errors.Is(err, idempotency.ErrFencingLost) {
		t.Errorf("Complete with the dead holder's token = %v, want ErrFencingLost", err)
	}
}

// TestSDKRetryOfLostCompleteAnswer: Complete's write is applied but its
// answer is lost; the retried UpdateItem fails its condition on the record
// it completed. Complete must succeed, not report the request fenced out.
func TestSDKRetryOfLostCompleteAnswer(t *testing.T) {
	t.Parallel()
	s, d, _, _ := dropping(t, "UpdateItem")
	b, err := s.Begin(t.Context(), "acme", "k1", fp, "v1_x")
	if err != nil || b.Verdict != idempotency.Started {
		t.Fatalf("Begin = %+v, %v", b, err)
	}
	d.armed.Store(1)
	if err := s.Complete(t.Context(), "acme", "k1", b.Token, 202, `{"id":"x"}`); err != nil {
		t.Errorf("Complete after a lost answer = %v, want nil", err)
	}
	if d.dropped.Load() != 1 {
		t.Fatalf("dropped %d answers, want 1", d.dropped.Load())
	}
	if got, err := s.Begin(t.Context(), "acme", "k1", fp, "v1_x"); err != nil || got.Verdict != idempotency.Replay || got.Body != `{"id":"x"}` {
		t.Errorf("Begin after Complete = %+v, %v; want the stored Replay", got, err)
	}
}
