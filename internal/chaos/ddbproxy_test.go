package chaos

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/ledger/dynamoledger"
	"github.com/sendonce/sendonce/internal/testenv"
)

// TestOperation classifies the requests the real DynamoDB ledger sends:
// a capture server records each request (and fails it), the ledger runs
// every operation against it.
func TestOperation(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []string
	capture := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, Operation(r.Header.Get("X-Amz-Target"), body))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"__type":"com.amazon.coral.validate#ValidationException","message":"captured"}`)
	}))
	t.Cleanup(capture.Close)
	db := dynamodb.NewFromConfig(testenv.Config(), func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(capture.URL)
		o.Retryer = retry.AddWithMaxAttempts(retry.NewStandard(), 1)
	})
	l, err := dynamoledger.New(db, "t", dynamoledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	key := strings.Repeat("a", 64)
	e := ledger.Entry{Key: "v1_" + key, Tenant: "t", Channel: "sms", Class: "otp", Address: "+15550000000", Body: "b"}
	c := ledger.Claim{Key: e.Key, ClaimID: "c1", Attempt: 1}
	cur := ledger.Record{Entry: e, State: ledger.StatePending, ClaimID: "c0", Attempts: 1}
	tests := []struct {
		want string
		call func() error
	}{
		{"claim", func() error { _, err := l.Claim(ctx, e, time.Minute); return err }},
		{"takeover", func() error { _, err := l.TakeOver(ctx, cur, "", time.Minute); return err }},
		{"release", func() error { return l.Release(ctx, c, "transient", time.Time{}) }},
		{"release", func() error { return l.Release(ctx, c, "", time.Time{}) }},
		{"mark", func() error { return l.Mark(ctx, c, ledger.Outcome{State: ledger.StateSent}) }},
		{"getitem", func() error { _, err := l.Get(ctx, e.Key); return err }},
	}
	for _, tt := range tests {
		mu.Lock()
		got = nil
		mu.Unlock()
		if err := tt.call(); err == nil {
			t.Fatalf("%s: the capture server's error did not come back", tt.want)
		}
		mu.Lock()
		if len(got) != 1 || got[0] != tt.want {
			t.Errorf("Operation = %v, want [%s]", got, tt.want)
		}
		mu.Unlock()
	}
}

// TestProxyLostForGood: a lost Claim answer is forwarded once and its
// SDK retries dropped; a lost Release never reaches DynamoDB; the worker
// is killed when drawn so.
func TestProxyLostForGood(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, target, body string
		wantForwarded      int64
	}{
		{"Claim", "DynamoDB_20120810.PutItem", `{"Item":{"pk":{"S":"v1_` + strings.Repeat("b", 64) + `"}}}`, 1},
		{"TakeOver", "DynamoDB_20120810.UpdateItem", `{"UpdateExpression":"SET #state = :pending, #attempts = #attempts + :one REMOVE #released","Key":{"pk":{"S":"v1_` + strings.Repeat("c", 64) + `"}}}`, 1},
		{"Release", "DynamoDB_20120810.UpdateItem", `{"UpdateExpression":"SET #released = :true, #lease_until = :now_ms","Key":{"pk":{"S":"v1_` + strings.Repeat("d", 64) + `"}}}`, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			backend, forwarded := countingBackend(t)
			op := strings.ToLower(tt.name)
			px := NewProxy(backend, StormOptions{Lost: map[string]float64{op: 1}, LostKill: 1}, 1)
			t.Cleanup(px.Close)
			var killed []string
			px.Kill = func(tag string) bool { killed = append(killed, tag); return true }
			px.Enable(true)
			u, err := px.Listen("lane/sender-1")
			if err != nil {
				t.Fatal(err)
			}
			for i := range 3 { // the first try and two SDK retries of the same request
				req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader(tt.body))
				req.Header.Set("X-Amz-Target", tt.target)
				resp, err := http.DefaultClient.Do(req)
				if err == nil {
					resp.Body.Close()
					t.Fatalf("try %d: got an answer %d, want none", i, resp.StatusCode)
				}
			}
			if got := forwarded.Load(); got != tt.wantForwarded {
				t.Errorf("forwarded %d, want %d", got, tt.wantForwarded)
			}
			st := px.Stats()
			if st.Lost[op] != 1 || st.Retried != 2 || st.Killed != 1 || len(killed) != 1 || killed[0] != "lane/sender-1" {
				t.Errorf("stats %+v, killed %v", st, killed)
			}
			keys := px.LostKeys()
			if len(keys) != 1 {
				t.Fatalf("lost keys %v", keys)
			}
			for _, ops := range keys {
				if len(ops) != 1 || ops[0] != op+"+kill" {
					t.Errorf("lost ops %v, want [%s+kill]", ops, op)
				}
			}
		})
	}
}

// TestProxyDeathAfterLoss: a lost Claim answer counts as lost right
// before its worker's death when the worker dies before it acts on the
// key again, however long after the loss within one invocation (it may
// retry until its deadline); not when a release of that key reached the
// proxy first, nor when it died before the loss or after the invocation
// of the loss must have ended (maxInvocation).
func TestProxyDeathAfterLoss(t *testing.T) {
	t.Parallel()
	key := "v1_" + strings.Repeat("e", 64)
	claim := `{"Item":{"pk":{"S":"` + key + `"}}}`
	release := `{"UpdateExpression":"SET #released = :true, #lease_until = :now_ms","Key":{"pk":{"S":"` + key + `"}}}`
	tests := []struct {
		name string
		// after runs once the claim's answer is lost.
		after func(px *Proxy, u string, lostAt time.Time)
		want  string
	}{
		{"KilledLongAfter", func(px *Proxy, _ string, lostAt time.Time) { px.Died("w", lostAt.Add(25*time.Second)) }, "claim+kill"},
		{"DiedInALaterInvocation", func(px *Proxy, _ string, lostAt time.Time) { px.Died("w", lostAt.Add(time.Minute)) }, "claim"},
		{"KilledNow", func(px *Proxy, _ string, _ time.Time) { px.Killed("w") }, "claim+kill"},
		{"ReleasedThenKilled", func(px *Proxy, u string, _ time.Time) {
			post(t, u, "DynamoDB_20120810.UpdateItem", release)
			px.Killed("w")
		}, "claim"},
		{"DiedBeforeTheLoss", func(px *Proxy, _ string, lostAt time.Time) { px.Died("w", lostAt.Add(-time.Second)) }, "claim"},
		{"OtherWorkerKilled", func(px *Proxy, _ string, _ time.Time) { px.Killed("other") }, "claim"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			backend, _ := countingBackend(t)
			px := NewProxy(backend, StormOptions{Lost: map[string]float64{"claim": 1}}, 1)
			t.Cleanup(px.Close)
			px.Enable(true)
			u, err := px.Listen("w")
			if err != nil {
				t.Fatal(err)
			}
			post(t, u, "DynamoDB_20120810.PutItem", claim)
			lostAt := time.Now()
			px.Enable(false) // the release is not lost
			tt.after(px, u, lostAt)
			if got := px.LostKeys()[key]; len(got) != 1 || got[0] != tt.want {
				t.Errorf("lost ops %v, want [%s]", got, tt.want)
			}
		})
	}
}

// post sends one DynamoDB request through the proxy at u, whatever
// becomes of its answer.
func post(t *testing.T, u, target, body string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader(body))
	req.Header.Set("X-Amz-Target", target)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
}

// TestProxyKillAfterLossMarksTheBatch: when the proxy kills a worker right
// after a lost answer, an earlier answer the same worker lost for another
// record of its batch, and had not acted on, was lost right before its
// death too; one it had released was not.
func TestProxyKillAfterLossMarksTheBatch(t *testing.T) {
	t.Parallel()
	backend, _ := countingBackend(t)
	px := NewProxy(backend, StormOptions{Lost: map[string]float64{"claim": 1}}, 1)
	t.Cleanup(px.Close)
	px.Kill = func(string) bool { return true }
	px.Enable(true)
	u, err := px.Listen("w")
	if err != nil {
		t.Fatal(err)
	}
	a, b, c := "v1_"+strings.Repeat("a", 64), "v1_"+strings.Repeat("b", 64), "v1_"+strings.Repeat("c", 64)
	post(t, u, "DynamoDB_20120810.PutItem", `{"Item":{"pk":{"S":"`+a+`"}}}`)
	post(t, u, "DynamoDB_20120810.PutItem", `{"Item":{"pk":{"S":"`+b+`"}}}`)
	px.Enable(false)
	post(t, u, "DynamoDB_20120810.UpdateItem", `{"UpdateExpression":"SET #released = :true","Key":{"pk":{"S":"`+b+`"}}}`)
	px.opts.LostKill = 1
	px.Enable(true)
	post(t, u, "DynamoDB_20120810.PutItem", `{"Item":{"pk":{"S":"`+c+`"}}}`)
	got := px.LostKeys()
	for key, want := range map[string]string{a: "claim+kill", b: "claim", c: "claim+kill"} {
		if ops := got[key]; len(ops) != 1 || ops[0] != want {
			t.Errorf("lost ops of %s…: %v, want [%s]", key[:5], ops, want)
		}
	}
}
