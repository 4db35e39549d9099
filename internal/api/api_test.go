package api_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sendonce/sendonce/internal/api"
	"github.com/sendonce/sendonce/internal/api/idempotency/idempotencytest"
	"github.com/sendonce/sendonce/internal/api/idempotency/memidempotency"
	"github.com/sendonce/sendonce/internal/api/ratelimit"
	"github.com/sendonce/sendonce/internal/api/ratelimit/memratelimit"
	"github.com/sendonce/sendonce/internal/apikey"
	"github.com/sendonce/sendonce/internal/apikey/memapikey"
	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/ledger/memledger"
	"github.com/sendonce/sendonce/internal/metrics"
	"github.com/sendonce/sendonce/internal/sendkey"
	"github.com/sendonce/sendonce/internal/testenv"
	"github.com/sendonce/sendonce/internal/testsupport"
	"github.com/sendonce/sendonce/notify"
)

const phone = "+15551234567"

var body1 = `{"channel":"sms","template":"order_shipped","recipient":{"id":"user-42","phone":"` + phone + `"},"data":{"order_id":"A-1001"}}`

// queue records the messages the API enqueues and lets a test hold or
// fail SendMessage.
type queue struct {
	mu   sync.Mutex
	sent []*sqs.SendMessageInput
	hook func(ctx context.Context) error
}

func (q *queue) SendMessage(ctx context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	q.mu.Lock()
	hook := q.hook
	q.mu.Unlock()
	if hook != nil {
		if err := hook(ctx); err != nil {
			return nil, err
		}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.sent = append(q.sent, in)
	return &sqs.SendMessageOutput{MessageId: aws.String(fmt.Sprintf("m%d", len(q.sent)))}, nil
}

func (q *queue) setHook(h func(ctx context.Context) error) {
	q.mu.Lock()
	q.hook = h
	q.mu.Unlock()
}

type bundle struct {
	h     *api.Handler
	led   *memledger.Ledger
	queue *queue
	idem  *idempotencytest.Lossy
	keys  *apikey.Store
	clock *testsupport.Clock
	tally *metrics.Tally
	logs  *testsupport.Buffer
	keyA  string // API key of tenant "acme"
	keyB  string // API key of tenant "globex"
}

type setupOpts struct {
	cfg func(*api.Config)
}

// setup builds a handler on the in-memory stores, each held to its
// DynamoDB implementation by a conformance suite (functions/api's
// TestBootstrapUnderRIE runs the real function on DynamoDB Local and SQS).
func setup(t *testing.T, o setupOpts) *bundle {
	t.Helper()
	ctx := context.Background()
	clock := testsupport.NewClock(testsupport.Start.Add(10 * time.Second))
	b := &bundle{
		led:   memledger.New(memledger.Config{Now: clock.Now}),
		queue: &queue{},
		idem:  idempotencytest.NewLossy(memidempotency.New()),
		keys:  apikey.New(memapikey.New(), apikey.Config{Now: clock.Now}),
		clock: clock,
		tally: metrics.NewTally(),
		logs:  &testsupport.Buffer{},
	}
	var err error
	if _, b.keyA, err = b.keys.Create(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	if _, b.keyB, err = b.keys.Create(ctx, "globex"); err != nil {
		t.Fatal(err)
	}
	cfg := api.Config{
		Keys: b.keys, Ledger: b.led, Queue: b.queue, QueueURL: "https://sqs.us-east-1.amazonaws.com/123456789012/notifications",
		Idempotency: b.idem, RateWindows: memratelimit.New(),
		Metrics: b.tally, Now: clock.Now,
		Logger: b.logs.Logger(slog.LevelInfo),
	}
	if o.cfg != nil {
		o.cfg(&cfg)
	}
	if b.h, err = api.New(cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if strings.Contains(b.logs.String(), phone) {
			t.Errorf("logs hold a raw phone number")
		}
	})
	return b
}

func request(method, path, apiKey string, headers map[string]string, body string) events.APIGatewayV2HTTPRequest {
	h := map[string]string{"content-type": "application/json"}
	if apiKey != "" {
		h["authorization"] = "Bearer " + apiKey
	}
	for k, v := range headers {
		h[k] = v
	}
	return events.APIGatewayV2HTTPRequest{
		Version: "2.0", RouteKey: "$default", RawPath: path, Headers: h, Body: body,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			Stage: "$default", RequestID: "req-" + testenv.RandomID(),
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: method, Path: path},
		},
	}
}

func (b *bundle) do(t *testing.T, req events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
	t.Helper()
	resp, err := b.h.Handle(context.Background(), req)
	if err != nil {
		t.Fatalf("Handle returned error %v; it must answer every request", err)
	}
	return resp
}

func (b *bundle) post(t *testing.T, apiKey, idemKey, body string) events.APIGatewayV2HTTPResponse {
	t.Helper()
	return b.do(t, request(http.MethodPost, "/v1/notifications", apiKey, map[string]string{"idempotency-key": idemKey}, body))
}

func (b *bundle) get(t *testing.T, apiKey, id string) events.APIGatewayV2HTTPResponse {
	t.Helper()
	return b.do(t, request(http.MethodGet, "/v1/notifications/"+id, apiKey, nil, ""))
}

// messages returns what was enqueued.
func (b *bundle) messages(t *testing.T) []*sqs.SendMessageInput {
	t.Helper()
	b.queue.mu.Lock()
	defer b.queue.mu.Unlock()
	return slices.Clone(b.queue.sent)
}

func wantKey(tenant, idemKey string) string {
	return sendkey.Derive(sendkey.Parts{Tenant: tenant, EventID: api.EventID(idemKey), RecipientID: "user-42", Channel: "sms", Template: "order_shipped"})
}

type acceptedBody struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

func decodeAccepted(t *testing.T, resp events.APIGatewayV2HTTPResponse) acceptedBody {
	t.Helper()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("status = %d, want 202; body %s", resp.StatusCode, resp.Body)
	}
	var a acceptedBody
	if err := json.Unmarshal([]byte(resp.Body), &a); err != nil {
		t.Fatalf("202 body %q: %v", resp.Body, err)
	}
	return a
}

type problemBody struct {
	Type   string   `json:"type"`
	Title  string   `json:"title"`
	Status int      `json:"status"`
	Detail string   `json:"detail"`
	Field  string   `json:"field"`
	Fields []string `json:"fields"`
}

func decodeProblem(t *testing.T, resp events.APIGatewayV2HTTPResponse, status int) problemBody {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("status = %d, want %d; body %s", resp.StatusCode, status, resp.Body)
	}
	if got := resp.Headers["Content-Type"]; got != "application/problem+json" {
		t.Errorf("Content-Type = %q, want application/problem+json", got)
	}
	var p problemBody
	if err := json.Unmarshal([]byte(resp.Body), &p); err != nil {
		t.Fatalf("problem body %q: %v", resp.Body, err)
	}
	if p.Type == "" || p.Title == "" || p.Detail == "" || p.Status != status {
		t.Errorf("problem %+v: want type, title, detail and status %d", p, status)
	}
	return p
}

func TestSubmitAccepted(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	resp := b.post(t, b.keyA, "order-A-1001", body1)
	a := decodeAccepted(t, resp)
	if want := wantKey("acme", "order-A-1001"); a.ID != want || a.Status != "accepted" {
		t.Errorf("got %+v, want id %s, status accepted", a, want)
	}
	if got, want := resp.Headers["Location"], "/v1/notifications/"+a.ID; got != want {
		t.Errorf("Location = %q, want %q", got, want)
	}
	if _, ok := resp.Headers["Idempotent-Replayed"]; ok {
		t.Errorf("first response carries Idempotent-Replayed")
	}
	msgs := b.messages(t)
	if len(msgs) != 1 {
		t.Fatalf("got %d messages, want 1", len(msgs))
	}
	req, err := notify.Parse([]byte(*msgs[0].MessageBody))
	if err != nil {
		t.Fatalf("enqueued body is not a valid request: %v", err)
	}
	if req.TenantID != "acme" || req.EventID != api.EventID("order-A-1001") || req.Key() != a.ID || req.Recipient.Phone != phone || req.Data["order_id"] != "A-1001" {
		t.Errorf("enqueued %+v: want tenant acme, the API event id, key %s and the body's fields", req, a.ID)
	}
	if got := b.tally.Get(metrics.APIRequests); got != 1 {
		t.Errorf("APIRequests = %d, want 1", got)
	}
}

func TestReplay(t *testing.T) {
	t.Parallel()
	// A tenant limit of 1 shows that a replay consumes no rate limit.
	b := setup(t, setupOpts{cfg: func(c *api.Config) { c.TenantRate = ratelimit.Rate{Limit: 1, Window: time.Minute} }})
	first := b.post(t, b.keyA, "k1", body1)
	decodeAccepted(t, first)
	for i := range 3 {
		again := b.post(t, b.keyA, "k1", body1)
		if again.StatusCode != first.StatusCode || again.Body != first.Body {
			t.Errorf("replay %d = %d %s, want %d %s", i, again.StatusCode, again.Body, first.StatusCode, first.Body)
		}
		if got := again.Headers["Idempotent-Replayed"]; got != "true" {
			t.Errorf("replay %d: Idempotent-Replayed = %q, want true", i, got)
		}
		if got, want := again.Headers["Location"], first.Headers["Location"]; got != want {
			t.Errorf("replay %d: Location = %q, want %q", i, got, want)
		}
	}
	if got := len(b.messages(t)); got != 1 {
		t.Errorf("got %d messages, want 1", got)
	}
	if got := b.tally.Get(metrics.APIReplays); got != 3 {
		t.Errorf("APIReplays = %d, want 3", got)
	}
	// The limit is still there for new requests.
	decodeProblem(t, b.post(t, b.keyA, "k2", body1), http.StatusTooManyRequests)
}

func TestMismatch(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	decodeAccepted(t, b.post(t, b.keyA, "k1", body1))
	other := strings.Replace(body1, "order_shipped", "order_delivered", 1)
	other = strings.Replace(other, "A-1001", "A-1002", 1)
	p := decodeProblem(t, b.post(t, b.keyA, "k1", other), http.StatusUnprocessableEntity)
	if got, want := strings.Join(p.Fields, ","), "data,template"; got != want {
		t.Errorf("fields = %q, want %q", got, want)
	}
	if !strings.Contains(p.Detail, "template") {
		t.Errorf("detail %q does not name the mismatch", p.Detail)
	}
	if got := len(b.messages(t)); got != 1 {
		t.Errorf("got %d messages, want 1 (nothing enqueued for the mismatch)", got)
	}
}

func TestValidationStoresNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	bad := `{"channel":"sms","recipient":{"id":"user-42","phone":"` + phone + `"}}`
	p := decodeProblem(t, b.post(t, b.keyA, "k1", bad), http.StatusBadRequest)
	if p.Field != "template" {
		t.Errorf("field = %q, want template", p.Field)
	}
	decodeAccepted(t, b.post(t, b.keyA, "k1", body1))
	if got := b.tally.Get(metrics.InvalidRequests); got != 1 {
		t.Errorf("InvalidRequests = %d, want 1", got)
	}
}

func TestInFlightAndTakeover(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	entered := make(chan struct{})
	b.queue.setHook(func(ctx context.Context) error {
		close(entered)
		<-ctx.Done() // the first request hangs in its enqueue, then dies
		return ctx.Err()
	})
	ctx, cancel := context.WithCancel(context.Background())
	firstDone := make(chan events.APIGatewayV2HTTPResponse)
	go func() {
		resp, _ := b.h.Handle(ctx, request(http.MethodPost, "/v1/notifications", b.keyA, map[string]string{"idempotency-key": "k1"}, body1))
		firstDone <- resp
	}()
	<-entered
	b.queue.setHook(nil)

	// While the first holds its lease: 409 with Retry-After.
	resp := b.post(t, b.keyA, "k1", body1)
	decodeProblem(t, resp, http.StatusConflict)
	if got, want := resp.Headers["Retry-After"], "30"; got != want {
		t.Errorf("Retry-After = %q, want %q", got, want)
	}
	// Past the lease the next retry takes over and enqueues.
	b.clock.Advance(api.DefaultLease + time.Second)
	decodeAccepted(t, b.post(t, b.keyA, "k1", body1))

	// The first request dies now; its clean-up must not delete the record
	// the retry completed.
	cancel()
	if got := (<-firstDone).StatusCode; got != http.StatusServiceUnavailable {
		t.Errorf("dead first request answered %d, want 503", got)
	}
	again := b.post(t, b.keyA, "k1", body1)
	if again.StatusCode != http.StatusAccepted || again.Headers["Idempotent-Replayed"] != "true" {
		t.Errorf("after takeover: %d replayed=%q, want a 202 replay", again.StatusCode, again.Headers["Idempotent-Replayed"])
	}
	if got := len(b.messages(t)); got != 1 {
		t.Errorf("got %d messages, want 1", got)
	}
}

func TestQueueFailureLetsRetry(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.queue.setHook(func(context.Context) error { return errors.New("sqs: connection reset: secret internal detail") })
	resp := b.post(t, b.keyA, "k1", body1)
	decodeProblem(t, resp, http.StatusServiceUnavailable)
	if strings.Contains(resp.Body, "internal detail") {
		t.Errorf("response leaks the internal error: %s", resp.Body)
	}
	b.queue.setHook(nil)
	decodeAccepted(t, b.post(t, b.keyA, "k1", body1))
	if got := len(b.messages(t)); got != 1 {
		t.Errorf("got %d messages, want 1", got)
	}
}

func TestExpiredRecordIsAbsent(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{cfg: func(c *api.Config) { c.Retention = time.Hour }})
	decodeAccepted(t, b.post(t, b.keyA, "k1", body1))
	b.clock.Advance(time.Hour)
	// Past the retention the key is free: a different request is new, not
	// a mismatch, and no replay.
	other := strings.Replace(body1, "A-1001", "A-1002", 1)
	resp := b.post(t, b.keyA, "k1", other)
	decodeAccepted(t, resp)
	if _, ok := resp.Headers["Idempotent-Replayed"]; ok {
		t.Errorf("expired record was replayed")
	}
	if got := len(b.messages(t)); got != 2 {
		t.Errorf("got %d messages, want 2", got)
	}
}

func TestTenantsAreIndependent(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	a := decodeAccepted(t, b.post(t, b.keyA, "same-key", body1))
	g := decodeAccepted(t, b.post(t, b.keyB, "same-key", body1))
	if a.ID == g.ID {
		t.Errorf("two tenants got the same ledger key %s", a.ID)
	}
	if a.ID != wantKey("acme", "same-key") || g.ID != wantKey("globex", "same-key") {
		t.Errorf("ids %s, %s: want each tenant's own key", a.ID, g.ID)
	}
	tenants := map[string]bool{}
	for _, m := range b.messages(t) {
		r, err := notify.Parse([]byte(*m.MessageBody))
		if err != nil {
			t.Fatal(err)
		}
		tenants[r.TenantID] = true
	}
	if len(tenants) != 2 || !tenants["acme"] || !tenants["globex"] {
		t.Errorf("enqueued tenants %v, want acme and globex", tenants)
	}
}

func TestConcurrentIdenticalPosts(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	const n = 50
	resps := make([]events.APIGatewayV2HTTPResponse, n)
	testsupport.AtOnce(n, func(i int) {
		resps[i], _ = b.h.Handle(context.Background(), request(http.MethodPost, "/v1/notifications", b.keyA, map[string]string{"idempotency-key": "burst"}, body1))
	})
	var fresh, replays, conflicts int
	for _, r := range resps {
		switch {
		case r.StatusCode == http.StatusAccepted && r.Headers["Idempotent-Replayed"] == "":
			fresh++
		case r.StatusCode == http.StatusAccepted:
			replays++
		case r.StatusCode == http.StatusConflict:
			conflicts++
		default:
			t.Errorf("unexpected response %d %s", r.StatusCode, r.Body)
		}
	}
	t.Logf("50 concurrent POSTs: %d accepted, %d replays, %d conflicts", fresh, replays, conflicts)
	if fresh != 1 {
		t.Errorf("got %d fresh 202s, want 1", fresh)
	}
	if got := len(b.messages(t)); got != 1 {
		t.Errorf("got %d messages, want 1", got)
	}
}

func TestRateLimits(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		cfg   func(*api.Config)
		bodyN func(i int) string // the i-th request's body
		scope string
	}{
		{
			name:  "Tenant",
			cfg:   func(c *api.Config) { c.TenantRate = ratelimit.Rate{Limit: 2, Window: time.Minute} },
			bodyN: func(i int) string { return strings.Replace(body1, "user-42", fmt.Sprintf("user-%d", i), 1) },
			scope: "tenant",
		},
		{
			name:  "Recipient",
			cfg:   func(c *api.Config) { c.RecipientRate = ratelimit.Rate{Limit: 2, Window: time.Minute} },
			bodyN: func(i int) string { return strings.Replace(body1, "A-1001", fmt.Sprintf("A-%d", i), 1) },
			scope: "recipient",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, setupOpts{cfg: tt.cfg})
			decodeAccepted(t, b.post(t, b.keyA, "k0", tt.bodyN(0)))
			decodeAccepted(t, b.post(t, b.keyA, "k1", tt.bodyN(1)))
			resp := b.post(t, b.keyA, "k2", tt.bodyN(2))
			p := decodeProblem(t, resp, http.StatusTooManyRequests)
			// The clock is 10s into a one-minute window.
			if got, want := resp.Headers["Retry-After"], "50"; got != want {
				t.Errorf("Retry-After = %q, want %q", got, want)
			}
			if !strings.Contains(p.Detail, tt.scope) {
				t.Errorf("detail %q does not name the %s limit", p.Detail, tt.scope)
			}
			// Another tenant has its own windows.
			decodeAccepted(t, b.post(t, b.keyB, "k2", tt.bodyN(2)))
			// The refused request stored nothing: it goes through in the
			// next window with the same key.
			b.clock.Advance(50 * time.Second)
			decodeAccepted(t, b.post(t, b.keyA, "k2", tt.bodyN(2)))
			if got := b.tally.Get(metrics.RateLimited); got != 1 {
				t.Errorf("RateLimited = %d, want 1", got)
			}
			if got := len(b.messages(t)); got != 4 {
				t.Errorf("got %d messages, want 4", got)
			}
		})
	}
}

// TestFIFOQueue enqueues to a real FIFO queue (moto_server): SQS accepts
// the group and deduplication ids the API sets.
func TestFIFOQueue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sq := testenv.SQSAt(testenv.MotoEndpoint(t))
	out, err := sq.CreateQueue(ctx, &sqs.CreateQueueInput{
		QueueName: aws.String("api-test-" + testenv.RandomID() + ".fifo"), Attributes: map[string]string{"FifoQueue": "true"},
	})
	if err != nil {
		t.Fatalf("create queue: %v", err)
	}
	t.Cleanup(func() { _, _ = sq.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: out.QueueUrl}) })
	b := setup(t, setupOpts{cfg: func(c *api.Config) { c.Queue, c.QueueURL = sq, *out.QueueUrl }})
	a := decodeAccepted(t, b.post(t, b.keyA, "k1", body1))
	got, err := sq.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl: out.QueueUrl, MaxNumberOfMessages: 10,
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
	})
	if err != nil || len(got.Messages) != 1 {
		t.Fatalf("receive = %v, %v; want 1 message", got, err)
	}
	attrs := got.Messages[0].Attributes
	if got := attrs[string(sqstypes.MessageSystemAttributeNameMessageDeduplicationId)]; got != a.ID {
		t.Errorf("MessageDeduplicationId = %q, want the ledger key %s", got, a.ID)
	}
	if got := attrs[string(sqstypes.MessageSystemAttributeNameMessageGroupId)]; !strings.HasPrefix(got, "acme.") || len(got) > 128 {
		t.Errorf("MessageGroupId = %q, want acme.<hash>, at most 128 characters", got)
	}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	revokedID, revoked, err := b.keys.Create(context.Background(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.keys.Revoke(context.Background(), revokedID); err != nil {
		t.Fatal(err)
	}
	idem := map[string]string{"idempotency-key": "k1"}
	big := `{"channel":"sms","template":"t","recipient":{"id":"u","phone":"` + phone + `"},"data":{"x":"` + strings.Repeat("a", notify.MaxBodySize) + `"}}`
	b64 := request(http.MethodPost, "/v1/notifications", b.keyA, idem, base64.StdEncoding.EncodeToString([]byte(body1)))
	b64.IsBase64Encoded = true
	staged := request(http.MethodPost, "/prod/v1/notifications", b.keyA, map[string]string{"idempotency-key": "k-staged"}, body1)
	staged.RequestContext.Stage = "prod"
	tests := []struct {
		name   string
		req    events.APIGatewayV2HTTPRequest
		status int
		header map[string]string
		field  string
	}{
		{"UnknownRoute", request(http.MethodGet, "/v2/things", b.keyA, nil, ""), 404, nil, ""},
		{"NestedPath", request(http.MethodGet, "/v1/notifications/a/b", b.keyA, nil, ""), 404, nil, ""},
		{"WrongMethodCollection", request(http.MethodGet, "/v1/notifications", b.keyA, nil, ""), 405, map[string]string{"Allow": "POST"}, ""},
		{"WrongMethodItem", request(http.MethodDelete, "/v1/notifications/x", b.keyA, nil, ""), 405, map[string]string{"Allow": "GET"}, ""},
		{"NoAuth", request(http.MethodPost, "/v1/notifications", "", idem, body1), 401, map[string]string{"WWW-Authenticate": `Bearer realm="sendonce"`}, ""},
		{"BadKey", request(http.MethodPost, "/v1/notifications", "so_nope", idem, body1), 401, map[string]string{"WWW-Authenticate": `Bearer realm="sendonce", error="invalid_token"`}, ""},
		{"RevokedKey", request(http.MethodPost, "/v1/notifications", revoked, idem, body1), 401, nil, ""},
		{"BasicAuth", request(http.MethodPost, "/v1/notifications", "", map[string]string{"authorization": "Basic " + b.keyA, "idempotency-key": "k"}, body1), 401, nil, ""},
		{"GetNoAuth", request(http.MethodGet, "/v1/notifications/"+wantKey("acme", "k"), "", nil, ""), 401, nil, ""},
		{"MissingIdempotencyKey", request(http.MethodPost, "/v1/notifications", b.keyA, nil, body1), 400, nil, ""},
		{"BadIdempotencyKey", request(http.MethodPost, "/v1/notifications", b.keyA, map[string]string{"idempotency-key": "caf\u00e9"}, body1), 400, nil, ""},
		{"LongIdempotencyKey", request(http.MethodPost, "/v1/notifications", b.keyA, map[string]string{"idempotency-key": strings.Repeat("k", 256)}, body1), 400, nil, ""},
		{"BadJSON", request(http.MethodPost, "/v1/notifications", b.keyA, idem, `{"channel":`), 400, nil, ""},
		{"NotObject", request(http.MethodPost, "/v1/notifications", b.keyA, idem, `[1,2]`), 400, nil, ""},
		{"EmptyBody", request(http.MethodPost, "/v1/notifications", b.keyA, idem, ``), 400, nil, ""},
		{"TenantInBody", request(http.MethodPost, "/v1/notifications", b.keyA, idem, `{"tenant_id":"globex",`+body1[1:]), 400, nil, "tenant_id"},
		{"EmptyEventID", request(http.MethodPost, "/v1/notifications", b.keyA, idem, `{"event_id":"",`+body1[1:]), 400, nil, "event_id"},
		{"BadPhone", request(http.MethodPost, "/v1/notifications", b.keyA, idem, strings.Replace(body1, phone, "555", 1)), 400, nil, "recipient.phone"},
		{"TooLarge", request(http.MethodPost, "/v1/notifications", b.keyA, idem, big), 413, nil, ""},
		{"Base64Body", b64, 202, nil, ""},
		{"NamedStage", staged, 202, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			resp := b.do(t, tt.req)
			if tt.status == http.StatusAccepted {
				decodeAccepted(t, resp)
				return
			}
			p := decodeProblem(t, resp, tt.status)
			for k, want := range tt.header {
				if got := resp.Headers[k]; got != want {
					t.Errorf("header %s = %q, want %q", k, got, want)
				}
			}
			if p.Field != tt.field {
				t.Errorf("field = %q, want %q", p.Field, tt.field)
			}
		})
	}
}

func TestGet(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ctx := context.Background()
	id := decodeAccepted(t, b.post(t, b.keyA, "k1", body1)).ID

	// Until the sender claims it the row does not exist.
	missing := b.get(t, b.keyA, id)
	decodeProblem(t, missing, http.StatusNotFound)

	// The sender's part, through the ledger.
	led := b.led
	c, err := led.Claim(ctx, ledger.Entry{Key: id, Tenant: "acme", Channel: "sms", Class: "transactional", Provider: "http",
		Template: "order_shipped", RecipientID: "user-42", Address: phone, Body: "Your order shipped"}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(time.Second)
	if err := led.Mark(ctx, c, ledger.Outcome{State: ledger.StateSent, ProviderMessageID: "msg_1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := led.ApplyDelivery(ctx, id, ledger.Delivery{Status: "delivered", Rank: 3, At: b.clock.Now()}); err != nil {
		t.Fatal(err)
	}

	resp := b.get(t, b.keyA, id)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET = %d %s, want 200", resp.StatusCode, resp.Body)
	}
	var st api.Notification
	if err := json.Unmarshal([]byte(resp.Body), &st); err != nil {
		t.Fatal(err)
	}
	if st.ID != id || st.State != "SENT" || st.Attempts != 1 || st.ProviderMessageID != "msg_1" || st.Delivery == nil || st.Delivery.Status != "delivered" || st.RecipientID != "user-42" {
		t.Errorf("GET = %+v, want SENT, 1 attempt, msg_1, delivered", st)
	}
	if st.CreatedAt.IsZero() || st.UpdatedAt.IsZero() {
		t.Errorf("GET timestamps missing: %+v", st)
	}
	if strings.Contains(resp.Body, phone) || strings.Contains(resp.Body, "shipped\"") && strings.Contains(resp.Body, "Your order") {
		t.Errorf("GET exposes the address or message: %s", resp.Body)
	}

	// Another tenant, a missing id and a malformed id: the same 404.
	otherTenant := b.get(t, b.keyB, id)
	nobody := b.get(t, b.keyA, wantKey("acme", "never-used"))
	malformed := b.get(t, b.keyA, "not-a-key")
	for name, r := range map[string]events.APIGatewayV2HTTPResponse{"OtherTenant": otherTenant, "Missing": nobody, "Malformed": malformed} {
		if r.StatusCode != missing.StatusCode || r.Body != missing.Body || r.Headers["Content-Type"] != missing.Headers["Content-Type"] {
			t.Errorf("%s: got %d %s, want the missing-id answer %d %s", name, r.StatusCode, r.Body, missing.StatusCode, missing.Body)
		}
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	t.Parallel()
	q := &queue{}
	full := func() api.Config {
		return api.Config{Keys: apikey.New(memapikey.New(), apikey.Config{}), Ledger: memledger.New(memledger.Config{}), Queue: q, QueueURL: "u",
			Idempotency: memidempotency.New(), RateWindows: memratelimit.New()}
	}
	tests := []struct {
		name string
		mod  func(*api.Config)
	}{
		{"NoKeys", func(c *api.Config) { c.Keys = nil }},
		{"NoLedger", func(c *api.Config) { c.Ledger = nil }},
		{"NoQueueURL", func(c *api.Config) { c.QueueURL = "" }},
		{"NoIdempotency", func(c *api.Config) { c.Idempotency = nil }},
		{"NoRateWindows", func(c *api.Config) { c.RateWindows = nil }},
		{"RetentionBelowLease", func(c *api.Config) { c.Retention = 10 * time.Second }},
		{"ZeroLimit", func(c *api.Config) { c.TenantRate = ratelimit.Rate{Limit: 0, Window: time.Minute} }},
		{"SubSecondWindow", func(c *api.Config) { c.RecipientRate = ratelimit.Rate{Limit: 1, Window: time.Millisecond} }},
	}
	if _, err := api.New(full()); err != nil {
		t.Fatalf("New(valid) = %v", err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := full()
			tt.mod(&c)
			if _, err := api.New(c); !errors.Is(err, api.ErrConfig) {
				t.Errorf("New = %v, want ErrConfig", err)
			}
		})
	}
}

// TestLostBeginAnswer: the first request's idempotency write is applied but
// its answer is lost; the SDK's retry fails the write's condition on the
// record it created itself. The request must go on (202, one message), not
// answer 409 to itself.
func TestLostBeginAnswer(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.idem.LoseNext(1)
	decodeAccepted(t, b.post(t, b.keyA, "k1", body1))
	if b.idem.Lost() != 1 {
		t.Fatalf("lost %d answers, want 1: the test did not exercise the lost answer", b.idem.Lost())
	}
	if got := len(b.messages(t)); got != 1 {
		t.Errorf("got %d messages, want 1", got)
	}
	again := b.post(t, b.keyA, "k1", body1)
	if again.StatusCode != http.StatusAccepted || again.Headers["Idempotent-Replayed"] != "true" {
		t.Errorf("retry: %d replayed=%q, want a 202 replay", again.StatusCode, again.Headers["Idempotent-Replayed"])
	}
}

// TestExpiresAt: the API accepts a request's expires_at, enqueues it as
// given (the sender never sends the message after it), rejects one that
// is not an RFC 3339 time with a 400 naming the field, and an
// Idempotency-Key reused with another expires_at is a mismatch naming it.
func TestExpiresAt(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	withExpiry := func(v string) string {
		return strings.Replace(body1, `"data":`, `"class":"otp","expires_at":`+v+`,"data":`, 1)
	}
	a := decodeAccepted(t, b.post(t, b.keyA, "otp-1", withExpiry(`"2026-12-01T12:05:00Z"`)))
	msgs := b.messages(t)
	if len(msgs) != 1 {
		t.Fatalf("got %d messages, want 1", len(msgs))
	}
	req, err := notify.Parse([]byte(*msgs[0].MessageBody))
	if err != nil || req.ExpiresAt != "2026-12-01T12:05:00Z" || req.Key() != a.ID {
		t.Fatalf("enqueued %+v (%v): want expires_at kept and the same key", req, err)
	}
	// The same message without a validity has the same key.
	if plain := decodeAccepted(t, b.post(t, b.keyA, "otp-plain", strings.Replace(body1, `"data":`, `"class":"otp","data":`, 1))); plain.ID == "" {
		t.Fatal("no id")
	}
	p := decodeProblem(t, b.post(t, b.keyA, "otp-1", withExpiry(`"2026-12-01T12:10:00Z"`)), http.StatusUnprocessableEntity)
	if !slices.Contains(p.Fields, "expires_at") {
		t.Errorf("mismatch fields = %v, want expires_at among them", p.Fields)
	}
	for _, bad := range []string{`"2026-12-01T12:05:00"`, `"in ten minutes"`, `1764590700`} {
		p := decodeProblem(t, b.post(t, b.keyA, "otp-bad", withExpiry(bad)), http.StatusBadRequest)
		if p.Field != "expires_at" {
			t.Errorf("expires_at %s: problem field %q, want expires_at", bad, p.Field)
		}
	}
	if got := len(b.messages(t)); got != 2 {
		t.Errorf("got %d messages, want 2 (nothing enqueued for a mismatch or an invalid request)", got)
	}
}
