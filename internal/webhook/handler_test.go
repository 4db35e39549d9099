package webhook_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/ledger/memledger"
	"github.com/sendonce/sendonce/internal/metrics"
	"github.com/sendonce/sendonce/internal/provider/httpprovider"
	"github.com/sendonce/sendonce/internal/sendkey"
	"github.com/sendonce/sendonce/internal/testenv"
	"github.com/sendonce/sendonce/internal/testsupport"
	"github.com/sendonce/sendonce/internal/webhook"
	"github.com/sendonce/sendonce/internal/webhook/memdedup"
)

const (
	testSecret  = "whsec_test"
	testToken   = "twilio-test-auth-token"
	testBaseURL = "https://hooks.example.com"
	testPhone   = "+15551234567"
	testSender  = "+15557654321"
)

// countingLedger wraps a ledger to count successful ApplyDelivery calls and
// to inject failures.
type countingLedger struct {
	ledger.Ledger
	applied   atomic.Int32
	failApply atomic.Int32 // fail this many ApplyDelivery calls
	failGet   atomic.Int32 // fail this many Get calls
}

func (l *countingLedger) ApplyDelivery(ctx context.Context, key string, d ledger.Delivery) (bool, error) {
	if l.failApply.Add(-1) >= 0 {
		return false, errors.New("injected: ApplyDelivery failed (dynamodb: throttled)")
	}
	ok, err := l.Ledger.ApplyDelivery(ctx, key, d)
	if ok {
		l.applied.Add(1)
	}
	return ok, err
}

func (l *countingLedger) Get(ctx context.Context, key string) (ledger.Record, error) {
	if l.failGet.Add(-1) >= 0 {
		return ledger.Record{}, errors.New("injected: Get failed (dynamodb: connection reset)")
	}
	return l.Ledger.Get(ctx, key)
}

// faultyDedup fails Record a given number of times: the crash window
// between applying a status and recording the callback.
type faultyDedup struct {
	webhook.Dedup
	failRecord atomic.Int32
}

func (d *faultyDedup) Record(ctx context.Context, cb webhook.Callback) (bool, error) {
	if d.failRecord.Add(-1) >= 0 {
		return false, errors.New("injected: crash between apply and record")
	}
	return d.Dedup.Record(ctx, cb)
}

type bundle struct {
	h     *webhook.Handler
	led   *countingLedger
	dedup *faultyDedup
	clock *testsupport.Clock
	tally *metrics.Tally
	logs  *testsupport.Buffer
	log   *slog.Logger
}

type setupOpts struct {
	baseURL string // Config.PublicBaseURL; "-" for none
	noHTTP  bool
}

// setup builds a handler over the in-memory ledger and dedup store, both
// held to the DynamoDB implementations by their conformance suites
// (TestBootstrapUnderRIE runs the function on DynamoDB Local).
func setup(t *testing.T, opts ...setupOpts) *bundle {
	t.Helper()
	var o setupOpts
	if len(opts) > 0 {
		o = opts[0]
	}
	clock := testsupport.NewClock(testsupport.Start)
	b := &bundle{
		led:   &countingLedger{Ledger: memledger.New(memledger.Config{Now: clock.Now})},
		dedup: &faultyDedup{Dedup: memdedup.New(memdedup.Config{Now: clock.Now})},
		clock: clock,
		tally: metrics.NewTally(),
		logs:  &testsupport.Buffer{},
	}
	b.log = b.logs.Logger(slog.LevelInfo)
	cfg := webhook.Config{
		Ledger:          b.led,
		Dedup:           b.dedup,
		HTTPSecret:      []byte(testSecret),
		TwilioAuthToken: testToken,
		PublicBaseURL:   testBaseURL,
		Metrics:         b.tally,
		Logger:          b.log,
		Now:             clock.Now,
	}
	switch o.baseURL {
	case "":
	case "-":
		cfg.PublicBaseURL = ""
	default:
		cfg.PublicBaseURL = o.baseURL
	}
	if o.noHTTP {
		cfg.HTTPSecret = nil
	}
	var err error
	if b.h, err = webhook.New(cfg); err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("handler logs:\n%s", b.logs.String())
		}
	})
	return b
}

// row claims a fresh ledger row on channel and returns its key and claim.
func (b *bundle) row(t *testing.T, channel string) (string, ledger.Claim) {
	t.Helper()
	key := sendkey.Derive(sendkey.Parts{Tenant: "acme", EventID: "evt_" + testenv.RandomID(), RecipientID: "user-42", Channel: channel, Template: "order_shipped"})
	addr := testPhone
	if channel == "email" {
		addr = "ana@example.com"
	}
	c, err := b.led.Claim(context.Background(), ledger.Entry{
		Key: key, Tenant: "acme", Channel: channel, Class: "transactional", Provider: "http",
		Template: "order_shipped", RecipientID: "user-42", Address: addr, Body: "Your order shipped",
	}, time.Minute)
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	return key, c
}

func (b *bundle) get(t *testing.T, key string) ledger.Record {
	t.Helper()
	r, err := b.led.Ledger.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("Get %s: %v", key, err)
	}
	return r
}

// httpEvent returns a signed generic-provider callback request.
func (b *bundle) httpEvent(key, eventID string, status webhook.Status) events.LambdaFunctionURLRequest {
	body, _ := json.Marshal(httpprovider.Callback{
		EventID: eventID, MessageID: "msg_1", Reference: key,
		Status: httpprovider.MessageStatus(status), Timestamp: b.clock.Now().Format(time.RFC3339),
	})
	return b.signedHTTP(body, b.clock.Now())
}

func (b *bundle) signedHTTP(body []byte, signedAt time.Time) events.LambdaFunctionURLRequest {
	req := baseEvent("/callbacks/http", "", string(body))
	req.Headers["content-type"] = "application/json"
	req.Headers["x-provider-signature"] = httpprovider.Sign([]byte(testSecret), signedAt, body)
	return req
}

// twilioEvent returns a signed Twilio status callback request.
func (b *bundle) twilioEvent(key, sid string, status string, idemToken string) events.LambdaFunctionURLRequest {
	form := url.Values{
		"AccountSid": {"AC0123456789abcdef0123456789abcdef"}, "ApiVersion": {"2010-04-01"},
		"MessageSid": {sid}, "SmsSid": {sid}, "MessageStatus": {status}, "SmsStatus": {status},
		"To": {testPhone}, "From": {testSender},
	}
	if status == "undelivered" || status == "failed" {
		form.Set("ErrorCode", "30003")
	}
	query := url.Values{webhook.KeyParam: {key}}.Encode()
	req := baseEvent("/callbacks/twilio", query, form.Encode())
	req.Headers["content-type"] = "application/x-www-form-urlencoded"
	req.Headers["x-twilio-signature"] = webhook.TwilioSignature(testToken, testBaseURL+"/callbacks/twilio?"+query, form)
	if idemToken != "" {
		req.Headers["i-twilio-idempotency-token"] = idemToken
	}
	return req
}

// baseEvent is a Function URL request as Lambda delivers it.
func baseEvent(path, rawQuery, body string) events.LambdaFunctionURLRequest {
	host := "abcdefghij.lambda-url.us-east-1.on.aws"
	return events.LambdaFunctionURLRequest{
		Version:        "2.0",
		RawPath:        path,
		RawQueryString: rawQuery,
		Headers:        map[string]string{"host": host, "user-agent": "test"},
		RequestContext: events.LambdaFunctionURLRequestContext{
			AccountID: "anonymous", RequestID: "req-" + testenv.RandomID(), APIID: "abcdefghij",
			DomainName: host, DomainPrefix: "abcdefghij",
			HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{Method: "POST", Path: path, Protocol: "HTTP/1.1", SourceIP: "198.51.100.7"},
		},
		Body: body,
	}
}

type answer struct {
	code int
	body map[string]string
	raw  string
}

func (b *bundle) do(t *testing.T, req events.LambdaFunctionURLRequest) answer {
	t.Helper()
	resp, err := b.h.Handle(context.Background(), req)
	if err != nil {
		t.Fatalf("Handle returned error %v; it must answer every request", err)
	}
	var m map[string]string
	if err := json.Unmarshal([]byte(resp.Body), &m); err != nil {
		t.Fatalf("answer body %q is not a JSON object of strings: %v", resp.Body, err)
	}
	if ct := resp.Headers["Content-Type"]; ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	return answer{resp.StatusCode, m, resp.Body}
}

// genericErrors are the only texts an error answer may carry.
var genericErrors = map[string]bool{
	"not found": true, "method not allowed": true, "Request Entity Too Large": true,
	"Bad Request": true, "invalid signature": true, "malformed callback": true, "internal error": true,
}

func wantError(t *testing.T, a answer, code int) {
	t.Helper()
	if a.code != code {
		t.Errorf("status = %d, want %d (body %s)", a.code, code, a.raw)
	}
	if len(a.body) != 1 || !genericErrors[a.body["error"]] {
		t.Errorf("error body = %s, want {\"error\": <generic text>}", a.raw)
	}
}

func wantOutcome(t *testing.T, a answer, o webhook.Effect) {
	t.Helper()
	if a.code != 200 || a.body["status"] != string(o) {
		t.Errorf("answer = %d %s, want 200 {\"status\":%q}", a.code, a.raw, o)
	}
}

func TestHTTPCallbackSignature(t *testing.T) {
	t.Parallel()
	b := setup(t)
	now := b.clock.Now()
	body := func(key string) []byte {
		j, _ := json.Marshal(httpprovider.Callback{EventID: "evt_" + testenv.RandomID(), Reference: key, Status: "delivered"})
		return j
	}
	tests := []struct {
		name    string
		req     func(key string) events.LambdaFunctionURLRequest
		wantOK  bool
		invalid int
	}{
		{"Valid", func(k string) events.LambdaFunctionURLRequest { return b.signedHTTP(body(k), now) }, true, 0},
		{"ClockSkewAllowed", func(k string) events.LambdaFunctionURLRequest { return b.signedHTTP(body(k), now.Add(4*time.Minute)) }, true, 0},
		{"FourMinutesOld", func(k string) events.LambdaFunctionURLRequest { return b.signedHTTP(body(k), now.Add(-4*time.Minute)) }, true, 0},
		{"Missing", func(k string) events.LambdaFunctionURLRequest {
			r := b.signedHTTP(body(k), now)
			delete(r.Headers, "x-provider-signature")
			return r
		}, false, 1},
		{"WrongSecret", func(k string) events.LambdaFunctionURLRequest {
			r := b.signedHTTP(body(k), now)
			r.Headers["x-provider-signature"] = httpprovider.Sign([]byte("other"), now, []byte(r.Body))
			return r
		}, false, 1},
		{"TamperedBody", func(k string) events.LambdaFunctionURLRequest {
			r := b.signedHTTP(body(k), now)
			r.Body = strings.Replace(r.Body, "delivered", "failed", 1)
			return r
		}, false, 1},
		{"Stale", func(k string) events.LambdaFunctionURLRequest { return b.signedHTTP(body(k), now.Add(-6*time.Minute)) }, false, 1},
		{"FromTheFuture", func(k string) events.LambdaFunctionURLRequest { return b.signedHTTP(body(k), now.Add(6*time.Minute)) }, false, 1},
		{"Garbage", func(k string) events.LambdaFunctionURLRequest {
			r := b.signedHTTP(body(k), now)
			r.Headers["x-provider-signature"] = "t=abc,v1=zz"
			return r
		}, false, 1},
		{"MixedCaseHeader", func(k string) events.LambdaFunctionURLRequest {
			r := b.signedHTTP(body(k), now)
			r.Headers["X-Provider-Signature"] = r.Headers["x-provider-signature"]
			delete(r.Headers, "x-provider-signature")
			return r
		}, true, 0},
		{"Base64Body", func(k string) events.LambdaFunctionURLRequest {
			r := b.signedHTTP(body(k), now)
			r.Body, r.IsBase64Encoded = base64.StdEncoding.EncodeToString([]byte(r.Body)), true
			return r
		}, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key, _ := b.row(t, "sms")
			before := b.tally.Get(metrics.InvalidCallbacks)
			req := tt.req(key)
			a := b.do(t, req)
			r := b.get(t, key)
			if tt.wantOK {
				wantOutcome(t, a, webhook.Applied)
				if r.DeliveryStatus != "delivered" {
					t.Errorf("delivery status = %q, want delivered", r.DeliveryStatus)
				}
				return
			}
			wantError(t, a, 401)
			if r.DeliveryStatus != "" || r.DeliveryRank != 0 {
				t.Errorf("row changed by a rejected callback: %q rank %d", r.DeliveryStatus, r.DeliveryRank)
			}
			if got := b.tally.Get(metrics.InvalidCallbacks) - before; got != tt.invalid {
				t.Errorf("InvalidCallbacks += %d, want %d", got, tt.invalid)
			}
		})
	}
}

func TestTwilioCallbackSignature(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		opts   setupOpts
		mutate func(r *events.LambdaFunctionURLRequest)
		wantOK bool
	}{
		{"Valid", setupOpts{}, nil, true},
		{"BaseURLWithDefaultPort", setupOpts{baseURL: testBaseURL + ":443/"}, nil, true},
		{"NoBaseURLUsesHost", setupOpts{baseURL: "-"}, func(r *events.LambdaFunctionURLRequest) {
			r.Headers["host"] = "hooks.example.com"
		}, true},
		{"Base64Body", setupOpts{}, func(r *events.LambdaFunctionURLRequest) {
			r.Body, r.IsBase64Encoded = base64.StdEncoding.EncodeToString([]byte(r.Body)), true
		}, true},
		{"Missing", setupOpts{}, func(r *events.LambdaFunctionURLRequest) { delete(r.Headers, "x-twilio-signature") }, false},
		{"WrongToken", setupOpts{}, func(r *events.LambdaFunctionURLRequest) {
			form, _ := url.ParseQuery(r.Body)
			r.Headers["x-twilio-signature"] = webhook.TwilioSignature("other-token", testBaseURL+"/callbacks/twilio?"+r.RawQueryString, form)
		}, false},
		{"KeySwapped", setupOpts{}, func(r *events.LambdaFunctionURLRequest) {
			r.RawQueryString = url.Values{webhook.KeyParam: {sendkey.Derive(sendkey.Parts{Tenant: "acme", EventID: "evt_1", RecipientID: "user-42", Channel: "sms", Template: "order_shipped"})}}.Encode()
		}, false},
		{"StatusChanged", setupOpts{}, func(r *events.LambdaFunctionURLRequest) {
			r.Body = strings.ReplaceAll(r.Body, "delivered", "failed")
		}, false},
		{"WrongHost", setupOpts{baseURL: "-"}, nil, false}, // the Function URL host is not what Twilio signed
		{"NotForm", setupOpts{}, func(r *events.LambdaFunctionURLRequest) { r.Body = "%zz" }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, tt.opts)
			key, _ := b.row(t, "sms")
			req := b.twilioEvent(key, "SM"+testenv.RandomID(), "delivered", "")
			if tt.mutate != nil {
				tt.mutate(&req)
			}
			a := b.do(t, req)
			r := b.get(t, key)
			if tt.wantOK {
				wantOutcome(t, a, webhook.Applied)
				if r.DeliveryStatus != "delivered" || !strings.HasPrefix(r.ProviderMessageID, "SM") {
					t.Errorf("row = %q / %q, want delivered / SM...", r.DeliveryStatus, r.ProviderMessageID)
				}
				return
			}
			wantError(t, a, 401)
			if r.DeliveryRank != 0 {
				t.Errorf("row changed by a rejected callback: %q", r.DeliveryStatus)
			}
			if got := b.tally.Get(metrics.InvalidCallbacks); got != 1 {
				t.Errorf("InvalidCallbacks = %d, want 1", got)
			}
		})
	}
}

func TestSameCallbackFiveTimes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		req  func(b *bundle, key string) events.LambdaFunctionURLRequest
	}{
		{"HTTP", func(b *bundle, key string) events.LambdaFunctionURLRequest {
			return b.httpEvent(key, "evt_1", webhook.StatusDelivered)
		}},
		{"TwilioToken", func(b *bundle, key string) events.LambdaFunctionURLRequest {
			return b.twilioEvent(key, "SM1", "delivered", "idem-1")
		}},
		{"TwilioSidStatus", func(b *bundle, key string) events.LambdaFunctionURLRequest {
			return b.twilioEvent(key, "SM1", "delivered", "")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			key, _ := b.row(t, "sms")
			for i := range 5 {
				a := b.do(t, tt.req(b, key))
				want := webhook.Duplicate
				if i == 0 {
					want = webhook.Applied
				}
				wantOutcome(t, a, want)
				b.clock.Advance(time.Second)
			}
			if got := b.led.applied.Load(); got != 1 {
				t.Errorf("ledger writes = %d, want 1", got)
			}
			for name, want := range map[string]int{metrics.CallbacksApplied: 1, metrics.DuplicateCallbacks: 4, metrics.OutOfOrderCallbacks: 0} {
				if got := b.tally.Get(name); got != want {
					t.Errorf("%s = %d, want %d", name, got, want)
				}
			}
		})
	}
}

func TestConcurrentDuplicates(t *testing.T) {
	t.Parallel()
	b := setup(t)
	key, _ := b.row(t, "sms")
	req := b.httpEvent(key, "evt_c", webhook.StatusDelivered)
	testsupport.AtOnce(8, func(int) {
		resp, err := b.h.Handle(context.Background(), req)
		if err != nil || resp.StatusCode != 200 {
			t.Errorf("Handle = %d, %v; want 200", resp.StatusCode, err)
		}
	})
	if got := b.led.applied.Load(); got != 1 {
		t.Errorf("ledger writes = %d, want 1", got)
	}
	if a, d, o := b.tally.Get(metrics.CallbacksApplied), b.tally.Get(metrics.DuplicateCallbacks), b.tally.Get(metrics.OutOfOrderCallbacks); a != 1 || d != 7 || o != 0 {
		t.Errorf("applied/duplicate/out-of-order = %d/%d/%d, want 1/7/0", a, d, o)
	}
}

func permutations(s []webhook.Status) [][]webhook.Status {
	if len(s) <= 1 {
		return [][]webhook.Status{append([]webhook.Status(nil), s...)}
	}
	var out [][]webhook.Status
	for i := range s {
		rest := append(append([]webhook.Status(nil), s[:i]...), s[i+1:]...)
		for _, p := range permutations(rest) {
			out = append(out, append([]webhook.Status{s[i]}, p...))
		}
	}
	return out
}

func TestOutOfOrder(t *testing.T) {
	t.Parallel()
	tests := []struct {
		channel   string
		statuses  []webhook.Status
		wantFinal webhook.Status
	}{
		{"sms", []webhook.Status{webhook.StatusSent, webhook.StatusDelivered, webhook.StatusFailed}, webhook.StatusDelivered},
		{"sms", []webhook.Status{webhook.StatusSent, webhook.StatusUndelivered, webhook.StatusQueued}, webhook.StatusUndelivered},
		{"email", []webhook.Status{webhook.StatusSent, webhook.StatusDelivered, webhook.StatusBounced}, webhook.StatusBounced},
		{"email", []webhook.Status{webhook.StatusSent, webhook.StatusDelivered, webhook.StatusFailed}, webhook.StatusFailed},
	}
	for _, tt := range tests {
		for _, perm := range permutations(tt.statuses) {
			name := tt.channel
			for _, s := range perm {
				name += "_" + string(s)
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				b := setup(t)
				key, _ := b.row(t, tt.channel)
				maxRank, wantOOO, wantApplied := 0, 0, 0
				for i, s := range perm {
					a := b.do(t, b.httpEvent(key, fmt.Sprintf("evt_%d", i), s))
					r, _ := webhook.Rank(tt.channel, s)
					if r > maxRank {
						maxRank, wantApplied = r, wantApplied+1
						wantOutcome(t, a, webhook.Applied)
					} else {
						wantOOO++
						wantOutcome(t, a, webhook.OutOfOrder)
					}
					b.clock.Advance(time.Second)
				}
				if got := b.get(t, key).DeliveryStatus; got != string(tt.wantFinal) {
					t.Errorf("final status = %q, want %q", got, tt.wantFinal)
				}
				if got := b.tally.Get(metrics.OutOfOrderCallbacks); got != wantOOO {
					t.Errorf("OutOfOrderCallbacks = %d, want %d", got, wantOOO)
				}
				if got := b.tally.Get(metrics.CallbacksApplied); got != wantApplied {
					t.Errorf("CallbacksApplied = %d, want %d", got, wantApplied)
				}
			})
		}
	}
}

func TestCallbackBeforeSent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	key, claim := b.row(t, "sms") // PENDING: the sender has not recorded SENT yet
	wantOutcome(t, b.do(t, b.twilioEvent(key, "SM9", "delivered", "")), webhook.Applied)
	if err := b.led.Mark(ctx, claim, ledger.Outcome{State: ledger.StateSent, ProviderMessageID: "SM9"}); err != nil {
		t.Fatalf("Mark SENT: %v", err)
	}
	wantOutcome(t, b.do(t, b.twilioEvent(key, "SM9", "sent", "")), webhook.OutOfOrder)
	r := b.get(t, key)
	if r.State != ledger.StateSent || r.DeliveryStatus != "delivered" {
		t.Errorf("row = %s / %q, want SENT / delivered", r.State, r.DeliveryStatus)
	}
}

func TestCrashWindow(t *testing.T) {
	t.Parallel()
	t.Run("BetweenApplyAndRecord", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		key, _ := b.row(t, "email")
		b.dedup.failRecord.Store(1)
		req := b.httpEvent(key, "evt_crash", webhook.StatusBounced)
		wantError(t, b.do(t, req), 500)
		if got := b.get(t, key).DeliveryStatus; got != "bounced" {
			t.Fatalf("after the crash: status = %q, want bounced (applied before recording)", got)
		}
		// The provider retries: the status is not applied again, and the
		// retry is recorded so that later ones stop at the dedup record.
		wantOutcome(t, b.do(t, req), webhook.Duplicate)
		wantOutcome(t, b.do(t, req), webhook.Duplicate)
		if got := b.led.applied.Load(); got != 1 {
			t.Errorf("ledger writes = %d, want 1", got)
		}
		if got := b.tally.Get(metrics.CallbacksApplied); got != 1 {
			t.Errorf("CallbacksApplied = %d, want 1", got)
		}
		if got := b.tally.Get(metrics.OutOfOrderCallbacks); got != 0 {
			t.Errorf("OutOfOrderCallbacks = %d, want 0", got)
		}
		if seen, err := b.dedup.Seen(context.Background(), "cb#http#evt_crash"); err != nil || !seen {
			t.Errorf("dedup record after retry: %v, %v; want present", seen, err)
		}
	})
	t.Run("ApplyFails", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		key, _ := b.row(t, "sms")
		b.led.failApply.Store(1)
		req := b.twilioEvent(key, "SM5", "delivered", "idem-5")
		wantError(t, b.do(t, req), 500)
		if got := b.get(t, key).DeliveryRank; got != 0 {
			t.Fatalf("rank after failed apply = %d, want 0", got)
		}
		if seen, _ := b.dedup.Seen(context.Background(), "cb#twilio#idem-5"); seen {
			t.Fatal("dedup record written although the apply failed")
		}
		wantOutcome(t, b.do(t, req), webhook.Applied)
		if got := b.get(t, key).DeliveryStatus; got != "delivered" {
			t.Errorf("status after retry = %q, want delivered", got)
		}
	})
}

func TestHTTPErrors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	key, _ := b.row(t, "sms")
	valid := b.httpEvent(key, "evt_e", webhook.StatusDelivered)
	big := strings.Repeat("x", webhook.DefaultMaxBody+1)
	tests := []struct {
		name   string
		req    events.LambdaFunctionURLRequest
		code   int
		header string
	}{
		{"UnknownProvider", baseEvent("/callbacks/sms", "", "{}"), 404, ""},
		{"UnknownPath", baseEvent("/", "", "{}"), 404, ""},
		{"NestedPath", baseEvent("/callbacks/http/x", "", "{}"), 404, ""},
		{"WrongMethod", func() events.LambdaFunctionURLRequest {
			r := valid
			r.RequestContext.HTTP.Method = "GET"
			return r
		}(), 405, "POST"},
		{"TooLarge", b.signedHTTP([]byte(big), b.clock.Now()), 413, ""},
		{"TooLargeBase64", func() events.LambdaFunctionURLRequest {
			r := baseEvent("/callbacks/twilio", "", base64.StdEncoding.EncodeToString([]byte(big)))
			r.IsBase64Encoded = true
			return r
		}(), 413, ""},
		{"BadBase64", func() events.LambdaFunctionURLRequest {
			r := valid
			r.Body, r.IsBase64Encoded = "not base64!", true
			return r
		}(), 400, ""},
		{"MalformedJSON", b.signedHTTP([]byte(`{"event_id":`), b.clock.Now()), 400, ""},
		{"BadKey", b.signedHTTP([]byte(`{"event_id":"e","reference":"v1_bad","status":"sent"}`), b.clock.Now()), 400, ""},
		{"UnknownStatus", b.signedHTTP([]byte(`{"event_id":"e","reference":"`+key+`","status":"exploded"}`), b.clock.Now()), 400, ""},
		{"TwilioNoKey", func() events.LambdaFunctionURLRequest {
			form := url.Values{"MessageSid": {"SM1"}, "MessageStatus": {"sent"}}
			r := baseEvent("/callbacks/twilio", "", form.Encode())
			r.Headers["x-twilio-signature"] = webhook.TwilioSignature(testToken, testBaseURL+"/callbacks/twilio", form)
			return r
		}(), 400, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := b.h.Handle(context.Background(), tt.req)
			if err != nil {
				t.Fatalf("Handle: %v", err)
			}
			var m map[string]string
			_ = json.Unmarshal([]byte(resp.Body), &m)
			wantError(t, answer{resp.StatusCode, m, resp.Body}, tt.code)
			if got := resp.Headers["Allow"]; got != tt.header {
				t.Errorf("Allow = %q, want %q", got, tt.header)
			}
		})
	}
	if got := b.get(t, key).DeliveryRank; got != 0 {
		t.Errorf("rank = %d after only rejected requests, want 0", got)
	}
	t.Run("InternalErrorHidden", func(t *testing.T) {
		b.led.failGet.Store(1)
		a := b.do(t, valid)
		wantError(t, a, 500)
		if strings.Contains(a.raw, "injected") || strings.Contains(a.raw, "dynamodb") {
			t.Errorf("answer %s leaks internal error text", a.raw)
		}
		if !strings.Contains(b.logs.String(), "injected: Get failed") {
			t.Error("internal error not logged")
		}
	})
	t.Run("NotConfiguredProvider", func(t *testing.T) {
		nb := setup(t, setupOpts{noHTTP: true})
		wantError(t, nb.do(t, nb.httpEvent(key, "evt_x", webhook.StatusSent)), 404)
	})
}

func TestUnknownKeyAndIgnoredStatus(t *testing.T) {
	t.Parallel()
	b := setup(t)
	unknown := sendkey.Derive(sendkey.Parts{Tenant: "acme", EventID: "never-sent", RecipientID: "u", Channel: "sms", Template: "t"})
	wantOutcome(t, b.do(t, b.httpEvent(unknown, "evt_u", webhook.StatusDelivered)), webhook.UnknownKey)
	if seen, _ := b.dedup.Seen(context.Background(), "cb#http#evt_u"); seen {
		t.Error("unknown-key callback recorded")
	}
	key, _ := b.row(t, "sms")
	wantOutcome(t, b.do(t, b.twilioEvent(key, "SM1", "receiving", "")), webhook.Ignored)
	if got := b.get(t, key).DeliveryRank; got != 0 {
		t.Errorf("rank = %d after an ignored status, want 0", got)
	}
	if got := b.tally.Get(metrics.InvalidCallbacks); got != 2 {
		t.Errorf("InvalidCallbacks = %d, want 2", got)
	}
}

func TestLogsHaveNoPhoneNumbers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	key, _ := b.row(t, "sms")
	for _, st := range []string{"queued", "sent", "undelivered", "delivered"} {
		b.do(t, b.twilioEvent(key, "SM7", st, ""))
	}
	bad := b.twilioEvent(key, "SM7", "failed", "")
	bad.Headers["x-twilio-signature"] = "AAAAAAAAAAAAAAAAAAAAAAAAAAA="
	b.do(t, bad)
	logs := b.logs.String()
	if !strings.Contains(logs, key) {
		t.Fatalf("logs do not mention the key; logs:\n%s", logs)
	}
	for _, raw := range []string{testPhone, testSender, url.QueryEscape(testPhone), "15551234567", "15557654321"} {
		if strings.Contains(logs, raw) {
			t.Errorf("logs contain raw phone number %q", raw)
		}
	}
}

func TestNoProviderConfiguredServesNothing(t *testing.T) {
	t.Parallel()
	h, err := webhook.New(webhook.Config{Ledger: memledger.New(memledger.Config{}), Dedup: &faultyDedup{}})
	if err != nil {
		t.Fatalf("New without providers: %v", err)
	}
	for _, path := range []string{"/callbacks/http", "/callbacks/twilio"} {
		resp, _ := h.Handle(context.Background(), events.LambdaFunctionURLRequest{
			RawPath: path, Body: "{}",
			RequestContext: events.LambdaFunctionURLRequestContext{HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{Method: "POST", Path: path}},
		})
		if resp.StatusCode != 404 {
			t.Errorf("%s without its secret: status %d, want 404", path, resp.StatusCode)
		}
	}
}

func TestNewErrors(t *testing.T) {
	t.Parallel()
	led := memledger.New(memledger.Config{})
	dd := &faultyDedup{}
	tests := []struct {
		name string
		cfg  webhook.Config
	}{
		{"NoLedger", webhook.Config{Dedup: dd, HTTPSecret: []byte("s")}},
		{"NoDedup", webhook.Config{Ledger: led, HTTPSecret: []byte("s")}},
		{"BadBaseURL", webhook.Config{Ledger: led, Dedup: dd, TwilioAuthToken: "t", PublicBaseURL: "hooks.example.com"}},
		{"BaseURLWithQuery", webhook.Config{Ledger: led, Dedup: dd, TwilioAuthToken: "t", PublicBaseURL: "https://h/?a=1"}},
	}
	for _, tt := range tests {
		if _, err := webhook.New(tt.cfg); err == nil {
			t.Errorf("%s: New = nil error", tt.name)
		}
	}
}

// FuzzVerifySignature sends arbitrary signature headers and bodies to the
// generic route: the handler never panics, answers 401 unless the header
// is a valid signature of the body, and never answers 5xx.
func FuzzVerifySignature(f *testing.F) {
	f.Add("t=1796040000,v1=00", `{"event_id":"e"}`, false)
	f.Add("", "", true)
	f.Add("t=1796040000,v1="+strings.Repeat("ab", 32)+",v1=zz", "{}", false)
	led := memledger.New(memledger.Config{Now: func() time.Time { return testsupport.Start }})
	h, err := webhook.New(webhook.Config{Ledger: led, Dedup: memdedup.New(memdedup.Config{}), HTTPSecret: []byte(testSecret),
		Now: func() time.Time { return testsupport.Start }, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		f.Fatalf("New: %v", err)
	}
	f.Fuzz(func(t *testing.T, sig, body string, b64 bool) {
		req := baseEvent("/callbacks/http", "", body)
		req.Headers["x-provider-signature"] = sig
		req.IsBase64Encoded = b64
		resp, err := h.Handle(context.Background(), req)
		if err != nil {
			t.Fatalf("Handle: %v", err)
		}
		raw := []byte(body)
		if b64 {
			if raw, err = base64.StdEncoding.DecodeString(body); err != nil {
				if resp.StatusCode != 400 {
					t.Fatalf("bad base64 answered %d", resp.StatusCode)
				}
				return
			}
		}
		validSig := httpprovider.Verify([]byte(testSecret), sig, raw, testsupport.Start, 0) == nil
		if validSig && len(raw) > 0 {
			// A signature covers every byte: one changed byte breaks it.
			flipped := bytes.Clone(raw)
			flipped[len(flipped)/2] ^= 0x01
			if httpprovider.Verify([]byte(testSecret), sig, flipped, testsupport.Start, 0) == nil {
				t.Fatalf("signature %q still verifies after a byte of the body changed", sig)
			}
		}
		if !validSig && resp.StatusCode != 401 && resp.StatusCode != 413 {
			t.Fatalf("unsigned request answered %d %s", resp.StatusCode, resp.Body)
		}
	})
}
