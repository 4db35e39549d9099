package ddbfront

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sendonce/sendonce/internal/benchreport/ddbcost"
	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/ledger/dynamoledger"
	"github.com/sendonce/sendonce/internal/tableschema"
	"github.com/sendonce/sendonce/internal/testenv"
)

// newFront starts a Front to target, closed when the test ends.
func newFront(t *testing.T, target string, o Options) *Front {
	t.Helper()
	f, err := New(target, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f
}

// countingBackend starts a server that answers every request with {} and
// returns its URL and how many requests it has answered.
func countingBackend(t *testing.T) (string, *atomic.Int64) {
	t.Helper()
	forwarded := new(atomic.Int64)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		forwarded.Add(1)
		_, _ = io.WriteString(w, `{}`)
	}))
	t.Cleanup(backend.Close)
	return backend.URL, forwarded
}

// TestStorm: throttling, drops and a calm front, each off until Enable.
func TestStorm(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		opts          Storm
		enable        bool
		wantThrottled bool
		wantDropped   bool
		wantForwarded bool
	}{
		{name: "Disabled", opts: Storm{BurstRate: 1, BurstFailure: 1, DropRate: 1}, wantForwarded: true},
		{name: "Throttle", opts: Storm{BurstRate: 1, BurstFailure: 1}, enable: true, wantThrottled: true},
		{name: "Drop", opts: Storm{DropRate: 1}, enable: true, wantDropped: true, wantForwarded: true},
		{name: "Calm", opts: Storm{}, enable: true, wantForwarded: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			backend, forwarded := countingBackend(t)
			px := newFront(t, backend, Options{Storm: tt.opts, Seed: 1})
			px.Enable(tt.enable)
			resp, err := http.Post(px.URL, "application/x-amz-json-1.0", strings.NewReader(`{"TableName":"t"}`))
			if tt.wantDropped {
				if err == nil {
					resp.Body.Close()
					t.Fatalf("got an answer %d, want a dropped connection", resp.StatusCode)
				}
			} else {
				if err != nil {
					t.Fatalf("post: %v", err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				var doc map[string]string
				_ = json.Unmarshal(body, &doc)
				gotThrottled := resp.StatusCode == http.StatusBadRequest && strings.Contains(doc["__type"], "Exception")
				if gotThrottled != tt.wantThrottled {
					t.Errorf("status %d body %s: throttled %v, want %v", resp.StatusCode, body, gotThrottled, tt.wantThrottled)
				}
			}
			if got := forwarded.Load() > 0; got != tt.wantForwarded {
				t.Errorf("forwarded %v, want %v", got, tt.wantForwarded)
			}
			st := px.Stats()
			if (st.Throttled > 0) != tt.wantThrottled || (st.Dropped > 0) != tt.wantDropped || st.Requests != 1 {
				t.Errorf("stats %+v", st)
			}
		})
	}
}

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

// TestLostForGood: a lost Claim answer is forwarded once and its
// SDK retries dropped; a lost Release never reaches DynamoDB; the worker
// is killed when drawn so.
func TestLostForGood(t *testing.T) {
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
			px := newFront(t, backend, Options{Storm: Storm{Lost: map[string]float64{op: 1}, LostKill: 1}, Seed: 1})
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

// TestDeathAfterLoss: a lost Claim answer counts as lost right
// before its worker's death when the worker dies before it acts on the
// key again, however long after the loss within one invocation (it may
// retry until its deadline); not when a release of that key reached the
// proxy first, nor when it died before the loss or after the invocation
// of the loss must have ended (maxInvocation).
func TestDeathAfterLoss(t *testing.T) {
	t.Parallel()
	key := "v1_" + strings.Repeat("e", 64)
	claim := `{"Item":{"pk":{"S":"` + key + `"}}}`
	release := `{"UpdateExpression":"SET #released = :true, #lease_until = :now_ms","Key":{"pk":{"S":"` + key + `"}}}`
	tests := []struct {
		name string
		// after runs once the claim's answer is lost.
		after func(px *Front, u string, lostAt time.Time)
		want  string
	}{
		{"KilledLongAfter", func(px *Front, _ string, lostAt time.Time) { px.Died("w", lostAt.Add(25*time.Second)) }, "claim+kill"},
		{"DiedInALaterInvocation", func(px *Front, _ string, lostAt time.Time) { px.Died("w", lostAt.Add(time.Minute)) }, "claim"},
		{"KilledNow", func(px *Front, _ string, _ time.Time) { px.Killed("w") }, "claim+kill"},
		{"ReleasedThenKilled", func(px *Front, u string, _ time.Time) {
			post(t, u, "DynamoDB_20120810.UpdateItem", release)
			px.Killed("w")
		}, "claim"},
		{"DiedBeforeTheLoss", func(px *Front, _ string, lostAt time.Time) { px.Died("w", lostAt.Add(-time.Second)) }, "claim"},
		{"OtherWorkerKilled", func(px *Front, _ string, _ time.Time) { px.Killed("other") }, "claim"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			backend, _ := countingBackend(t)
			px := newFront(t, backend, Options{Storm: Storm{Lost: map[string]float64{"claim": 1}}, Seed: 1})
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

// TestKillAfterLossMarksTheBatch: when the proxy kills a worker right
// after a lost answer, an earlier answer the same worker lost for another
// record of its batch, and had not acted on, was lost right before its
// death too; one it had released was not.
func TestKillAfterLossMarksTheBatch(t *testing.T) {
	t.Parallel()
	backend, _ := countingBackend(t)
	px := newFront(t, backend, Options{Storm: Storm{Lost: map[string]float64{"claim": 1}}, Seed: 1})
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
	px.opts.Storm.LostKill = 1
	px.Enable(true)
	post(t, u, "DynamoDB_20120810.PutItem", `{"Item":{"pk":{"S":"`+c+`"}}}`)
	got := px.LostKeys()
	for key, want := range map[string]string{a: "claim+kill", b: "claim", c: "claim+kill"} {
		if ops := got[key]; len(ops) != 1 || ops[0] != want {
			t.Errorf("lost ops of %s…: %v, want [%s]", key[:5], ops, want)
		}
	}
}

// TestCost drives writes through the front to DynamoDB Local and
// checks its accounting against the rules applied by hand to the items
// written.
func TestCost(t *testing.T) {
	t.Parallel()
	ep := testenv.DynamoDBEndpoint(t)
	direct := testenv.DynamoDB(t)
	table := testenv.NewTable(t, direct)
	px := newFront(t, ep, Options{Cost: true})
	db := testenv.DynamoDBAt(px.URL)
	ctx := context.Background()
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	key := map[string]types.AttributeValue{tableschema.PartitionKey: s("v1_costproxy")}
	// 1500 bytes, in the attention index (ALL projection): 2 units on the
	// table, 2 on the index.
	item := map[string]types.AttributeValue{
		tableschema.PartitionKey: s("v1_costproxy"),
		tableschema.AttentionPK:  s("attn#01"),
		tableschema.AttentionSK:  s("2026-12-01T00:00:00Z"),
	}
	item["pad"] = s(strings.Repeat("x", 1500-ddbcost.ItemSize(item)-3))
	if got := ddbcost.ItemSize(item); got != 1500 {
		t.Fatalf("item size %d, want 1500", got)
	}
	cond := &dynamodb.PutItemInput{
		TableName: aws.String(table), Item: item,
		ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
		ExpressionAttributeNames: map[string]string{"#pk": tableschema.PartitionKey},
	}
	if _, err := db.PutItem(ctx, cond); err != nil {
		t.Fatalf("put: %v", err)
	}
	a := px.Take(table)
	if a.Calls["PutItem"] != 1 || a.TableWCU != 2 || a.IndexWCU != 2 || a.IndexWrites != 1 || a.MaxItem != 1500 {
		t.Errorf("put: %+v; want 1 PutItem, table 2, index 2 (1 entry), item 1500 bytes", a)
	}
	if a.ReportedWCU == 0 {
		t.Errorf("put: DynamoDB Local reported no capacity; the proxy must ask for it")
	}

	// The same conditional put fails: charged by the larger item (1500 B).
	var ccf *types.ConditionalCheckFailedException
	if _, err := db.PutItem(ctx, cond); !errors.As(err, &ccf) {
		t.Fatalf("second put: %v, want a conditional check failure", err)
	}
	if a := px.Take(table); a.ConditionFailed != 1 || a.TableWCU != 2 || a.IndexWCU != 0 || a.Errors != 0 {
		t.Errorf("failed put: %+v; want 1 conditional failure, table 2, no index", a)
	}

	// Leaving the index and shrinking: the larger image (1500 B) on the
	// table, the removed entry (1500 B) on the index.
	if _, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(table), Key: key,
		UpdateExpression:         aws.String("REMOVE #a, #b, #p"),
		ExpressionAttributeNames: map[string]string{"#a": tableschema.AttentionPK, "#b": tableschema.AttentionSK, "#p": "pad"},
	}); err != nil {
		t.Fatalf("update: %v", err)
	}
	if a := px.Take(table); a.Calls["UpdateItem"] != 1 || a.TableWCU != 2 || a.IndexWCU != 2 || a.IndexWrites != 1 {
		t.Errorf("update: %+v; want table 2, index 2 (1 entry removed)", a)
	}

	// Deleting the 14-byte remainder: 1 unit, nothing in the index.
	if _, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: key}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if a := px.Take(table); a.Calls["DeleteItem"] != 1 || a.TableWCU != 1 || a.IndexWCU != 0 {
		t.Errorf("delete: %+v; want table 1, no index", a)
	}
	// A read through the proxy is counted, its images are not.
	if _, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key}); err != nil {
		t.Fatalf("get: %v", err)
	}
	if a := px.Take(table); a.Total() != 1 || a.Calls["GetItem"] != 1 {
		t.Errorf("get: calls %v, want GetItem 1 only", a.Calls)
	}
}

func TestWithCapacity(t *testing.T) {
	t.Parallel()
	got := withCapacity([]byte(`{"TableName":"t","ReturnConsumedCapacity":"NONE"}`))
	var m map[string]string
	if err := json.Unmarshal(got, &m); err != nil || m["ReturnConsumedCapacity"] != "INDEXES" || m["TableName"] != "t" {
		t.Errorf("withCapacity = %s, want INDEXES and the rest kept", got)
	}
	if got := withCapacity([]byte("not json")); string(got) != "not json" {
		t.Errorf("withCapacity(not json) = %q, want it unchanged", got)
	}
}

func TestKeyLocks(t *testing.T) {
	t.Parallel()
	var l keyLocks
	unlock := l.lock("a")
	done := make(chan struct{})
	go func() {
		u := l.lock("a")
		u()
		close(done)
	}()
	select {
	case <-done:
		t.Fatal("a second lock of the same name did not wait")
	case <-time.After(20 * time.Millisecond):
	}
	l.lock("b")() // another name does not wait
	unlock()
	<-done
	l.lock("a")() // a released name can be taken again
}

// TestUnapplied: a lost Claim or TakeOver that DynamoDB refused (its
// condition failed, the row another claim's or gone) is "(unapplied)" in
// LostKeys: it changed nothing. One that applied, one refused because
// its own earlier try had applied (the row holds its claim id, or that
// try was seen applying), and one whose outcome the front cannot read
// keep their name.
func TestUnapplied(t *testing.T) {
	t.Parallel()
	key := "v1_" + strings.Repeat("f", 64)
	claim := func(id string) string {
		return `{"Item":{"pk":{"S":"` + key + `"},"claim_id":{"S":"` + id + `"}}}`
	}
	takeover := func(id string) string {
		return `{"UpdateExpression":"SET #state = :pending, #claim_id = :new, #attempts = #attempts + :one REMOVE #released",` +
			`"ExpressionAttributeValues":{":new":{"S":"` + id + `"}},"Key":{"pk":{"S":"` + key + `"}}}`
	}
	refused := func(holder string) answer {
		item := ""
		if holder != "" {
			item = `,"Item":{"pk":{"S":"` + key + `"},"claim_id":{"S":"` + holder + `"}}`
		}
		return answer{http.StatusBadRequest, `{"__type":"com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException","message":"The conditional request failed"` + item + `}`}
	}
	ok := answer{http.StatusOK, `{}`}
	const putItem, updateItem = "DynamoDB_20120810.PutItem", "DynamoDB_20120810.UpdateItem"
	tests := []struct {
		name   string
		target string
		// before is a request answered (not lost) ahead of the lost one.
		before       string
		lost         string
		answers      []answer
		killed, want string
	}{
		{name: "ClaimOfAHeldRow", target: putItem, lost: claim("b"), answers: []answer{refused("a")}, want: "claim(unapplied)"},
		{name: "ClaimApplied", target: putItem, lost: claim("b"), answers: []answer{ok}, want: "claim"},
		{name: "RetryFoundItsOwnRow", target: putItem, lost: claim("b"), answers: []answer{refused("b")}, want: "claim"},
		{name: "EarlierTryApplied", target: putItem, before: claim("b"), lost: claim("b"), answers: []answer{ok, refused("a")}, want: "claim"},
		{name: "ServerError", target: putItem, lost: claim("b"), answers: []answer{{http.StatusInternalServerError, `{}`}}, want: "claim"},
		{name: "ClaimOfAHeldRowThenKilled", target: putItem, lost: claim("b"), answers: []answer{refused("a")}, killed: "w", want: "claim(unapplied)+kill"},
		{name: "TakeOverLostToAnother", target: updateItem, lost: takeover("b"), answers: []answer{refused("c")}, want: "takeover(unapplied)"},
		{name: "TakeOverOfAGoneRow", target: updateItem, lost: takeover("b"), answers: []answer{refused("")}, want: "takeover(unapplied)"},
		{name: "TakeOverApplied", target: updateItem, lost: takeover("b"), answers: []answer{ok}, want: "takeover"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			px := newFront(t, scriptedBackend(t, tt.answers), Options{Storm: Storm{Lost: map[string]float64{"claim": 1, "takeover": 1}}, Seed: 1})
			u, err := px.Listen("w")
			if err != nil {
				t.Fatal(err)
			}
			if tt.before != "" {
				post(t, u, tt.target, tt.before) // answered: faults are off
			}
			px.Enable(true)
			post(t, u, tt.target, tt.lost)
			if tt.killed != "" {
				px.Killed(tt.killed)
			}
			if got := px.LostKeys()[key]; len(got) != 1 || got[0] != tt.want {
				t.Errorf("lost ops %v, want [%s]\njournal:\n%s", got, tt.want, strings.Join(px.Journal(), "\n"))
			}
		})
	}
}

// answer is one scripted answer of a backend.
type answer struct {
	status int
	body   string
}

// scriptedBackend starts a server that answers its requests with
// answers, in turn, and fails the test past the last.
func scriptedBackend(t *testing.T, answers []answer) string {
	t.Helper()
	var mu sync.Mutex
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if len(answers) == 0 {
			t.Errorf("unexpected request %s", r.Header.Get("X-Amz-Target"))
			http.Error(w, "no answer scripted", http.StatusInternalServerError)
			return
		}
		a := answers[0]
		answers = answers[1:]
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.WriteHeader(a.status)
		_, _ = io.WriteString(w, a.body)
	}))
	t.Cleanup(backend.Close)
	return backend.URL
}

// TestUnappliedLedger: through the ledger on DynamoDB Local, a Claim of a
// key another worker holds whose answer is lost for good is unapplied,
// and its worker's release of the claim it may have taken is fenced out;
// a lost Claim of a new key applied.
func TestUnappliedLedger(t *testing.T) {
	t.Parallel()
	ep := testenv.DynamoDBEndpoint(t)
	table := testenv.NewTable(t, testenv.DynamoDB(t))
	px := newFront(t, ep, Options{Storm: Storm{Lost: map[string]float64{"claim": 1}}, Seed: 1})
	ledgerAt := func(tag string) *dynamoledger.Ledger {
		u, err := px.Listen(tag)
		if err != nil {
			t.Fatal(err)
		}
		l, err := dynamoledger.New(testenv.DynamoDBAt(u), table, dynamoledger.Config{})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	ctx := context.Background()
	held, fresh := "v1_"+strings.Repeat("1", 64), "v1_"+strings.Repeat("2", 64)
	a, b := ledgerAt("a"), ledgerAt("b")
	if _, err := a.Claim(ctx, ledger.Entry{Key: held, Channel: "sms"}, time.Minute); err != nil {
		t.Fatalf("a's claim: %v", err)
	}
	px.Enable(true)
	for _, key := range []string{held, fresh} {
		c, err := b.Claim(ctx, ledger.Entry{Key: key, Channel: "sms"}, time.Minute)
		if _, conflict := ledger.AsConflict(err); err == nil || conflict || c.ClaimID == "" {
			t.Fatalf("b's claim of %s…: %v (claim %+v), want a lost answer", key[:5], err, c)
		}
		err = b.Release(ctx, c, "lost", time.Time{})
		if want := key == held; errors.Is(err, ledger.ErrFencingLost) != want {
			t.Errorf("release of %s…: %v, fenced out %v", key[:5], err, want)
		}
	}
	got := px.LostKeys()
	for key, want := range map[string]string{held: "claim(unapplied)", fresh: "claim"} {
		if ops := got[key]; len(ops) != 1 || ops[0] != want {
			t.Errorf("lost ops of %s…: %v, want [%s]", key[:5], ops, want)
		}
	}
}

// TestDiedHolding: a worker whose Claim or TakeOver DynamoDB applied and
// that died before a release or a mark of the key reached the front died
// holding the row; not one that acted on it first (or whose act, sent
// before it died, reached the front after its death), one whose write was
// refused, one that died in a later invocation, nor another worker.
func TestDiedHolding(t *testing.T) {
	t.Parallel()
	key := "v1_" + strings.Repeat("9", 64)
	claim := `{"Item":{"pk":{"S":"` + key + `"},"claim_id":{"S":"a"}}}`
	takeover := `{"UpdateExpression":"SET #state = :pending, #claim_id = :new, #attempts = #attempts + :one REMOVE #released",` +
		`"ExpressionAttributeValues":{":new":{"S":"b"}},"Key":{"pk":{"S":"` + key + `"}}}`
	mark := `{"UpdateExpression":"SET #state = :state, #updated_at = :now_ms",` +
		`"ExpressionAttributeValues":{":claim":{"S":"a"}},"Key":{"pk":{"S":"` + key + `"}}}`
	ok := answer{http.StatusOK, `{}`}
	refused := answer{http.StatusBadRequest, `{"__type":"com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException","Item":{"claim_id":{"S":"z"}}}`}
	const putItem, updateItem = "DynamoDB_20120810.PutItem", "DynamoDB_20120810.UpdateItem"
	tests := []struct {
		name    string
		target  string
		body    string
		answers []answer
		// after runs once the claim was answered.
		after func(px *Front, u string, at time.Time)
		want  bool
	}{
		{"ClaimThenKilled", putItem, claim, []answer{ok}, func(px *Front, _ string, _ time.Time) { px.Killed("w") }, true},
		{"TakeOverThenTimedOut", updateItem, takeover, []answer{ok}, func(px *Front, _ string, at time.Time) { px.Died("w", at.Add(time.Second)) }, true},
		{"MarkedThenKilled", updateItem, takeover, []answer{ok, ok}, func(px *Front, u string, _ time.Time) {
			post(t, u, updateItem, mark)
			px.Killed("w")
		}, false},
		// Its mark, sent before it died, reached the front after its
		// death was recorded.
		{"KilledThenItsMarkArrived", putItem, claim, []answer{ok, ok}, func(px *Front, u string, _ time.Time) {
			px.Killed("w")
			post(t, u, updateItem, mark)
		}, false},
		{"KilledThenAnotherClaimsMarkArrived", putItem, claim, []answer{ok, ok}, func(px *Front, u string, _ time.Time) {
			px.Killed("w")
			post(t, u, updateItem, strings.Replace(mark, `{"S":"a"}`, `{"S":"other"}`, 1))
		}, true},
		{"RefusedThenKilled", putItem, claim, []answer{refused}, func(px *Front, _ string, _ time.Time) { px.Killed("w") }, false},
		{"DiedInALaterInvocation", putItem, claim, []answer{ok}, func(px *Front, _ string, at time.Time) { px.Died("w", at.Add(time.Minute)) }, false},
		{"DiedBeforeIt", putItem, claim, []answer{ok}, func(px *Front, _ string, at time.Time) { px.Died("w", at.Add(-time.Second)) }, false},
		{"OtherWorkerKilled", putItem, claim, []answer{ok}, func(px *Front, _ string, _ time.Time) { px.Killed("other") }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			px := newFront(t, scriptedBackend(t, tt.answers), Options{Storm: Storm{Lost: map[string]float64{"claim": 0.01}}, Seed: 1})
			u, err := px.Listen("w")
			if err != nil {
				t.Fatal(err)
			}
			post(t, u, tt.target, tt.body) // answered: faults are off
			tt.after(px, u, time.Now())
			if got := px.DiedHolding()[key]; got != tt.want {
				t.Errorf("died holding %v, want %v\njournal:\n%s", got, tt.want, strings.Join(px.Journal(), "\n"))
			}
		})
	}
}
