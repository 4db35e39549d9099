package httpprovider_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/provider/httpprovider"
	"github.com/sendonce/sendonce/internal/testsupport"
	"github.com/sendonce/sendonce/provider"
)

const (
	testToken = "tok-s3cr3t-0123456789"
	testPhone = "+15551234567"
	testKey   = "v1_a5ce46682abd7dc1fbbc58b114c4d26e0c9886586f14d590ea4ef4f1f6ee0b71"
)

type bundle struct {
	p   *httpprovider.Provider
	log *testsupport.Buffer
}

// setup returns a provider for baseURL that logs at Debug into a buffer.
func setup(t *testing.T, baseURL string, timeout time.Duration) bundle {
	t.Helper()
	buf := &testsupport.Buffer{}
	p, err := httpprovider.New(httpprovider.Config{
		BaseURL:     baseURL,
		Token:       testToken,
		Timeout:     timeout,
		CallbackURL: "http://127.0.0.1:1/callbacks/http",
		Logger:      buf.Logger(slog.LevelDebug),
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return bundle{p: p, log: buf}
}

func message() provider.Message {
	return provider.Message{Key: testKey, Tenant: "acme", Channel: "sms", To: testPhone, Body: "Your order shipped"}
}

// reply answers every request with status and body.
func reply(status int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

// hijackClose reads the request, then drops the connection with a reset.
func hijackClose(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(err)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	conn.Close()
}

// sleepy reads the request, then waits past the client's timeout.
func sleepy(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	select {
	case <-r.Context().Done():
	case <-time.After(5 * time.Second):
	}
}

func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

func TestSendClassification(t *testing.T) {
	t.Parallel()
	const leaky = `{"error":"invalid number +15551234567 for token tok-s3cr3t-0123456789"}`
	tests := []struct {
		name       string
		handler    http.HandlerFunc
		tls        bool
		closedPort bool
		timeout    time.Duration
		wantID     string
		wantKind   provider.Kind
		wantCode   string
		wantReason string
	}{
		{name: "200", handler: reply(200, `{"id":"msg_1","status":"accepted"}`), wantID: "msg_1"},
		{name: "201", handler: reply(201, `{"id":"msg_2","status":"accepted"}`), wantID: "msg_2"},
		{name: "202", handler: reply(202, `{"id":"msg_3"}`), wantID: "msg_3"},
		{name: "200NoID", handler: reply(200, `{"status":"accepted"}`), wantKind: provider.Ambiguous, wantCode: "200"},
		{name: "202Unparseable", handler: reply(202, `<html>ok</html>`), wantKind: provider.Ambiguous, wantCode: "202"},
		{name: "204", handler: reply(204, ``), wantKind: provider.Ambiguous, wantCode: "204"},
		{name: "301", handler: func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "/elsewhere", http.StatusMovedPermanently)
		}, wantKind: provider.Config, wantCode: "301"},
		{name: "400", handler: reply(400, `{"error":"to is not E.164"}`), wantKind: provider.Permanent, wantCode: "400", wantReason: "to is not E.164"},
		{name: "404", handler: reply(404, `not json`), wantKind: provider.Permanent, wantCode: "404", wantReason: "Not Found"},
		{name: "413", handler: reply(413, `{"message":"body too long"}`), wantKind: provider.Permanent, wantCode: "413", wantReason: "body too long"},
		{name: "422", handler: reply(422, `{"error":{"message":"opted out"}}`), wantKind: provider.Permanent, wantCode: "422", wantReason: "opted out"},
		{name: "422Leaky", handler: reply(422, leaky), wantKind: provider.Permanent, wantCode: "422", wantReason: "invalid number phone:"},
		{name: "405", handler: reply(405, ``), wantKind: provider.Permanent, wantCode: "405"},
		{name: "410", handler: reply(410, ``), wantKind: provider.Permanent, wantCode: "410"},
		{name: "401", handler: reply(401, `{"error":"bad token"}`), wantKind: provider.Config, wantCode: "401", wantReason: "bad token"},
		{name: "403", handler: reply(403, ``), wantKind: provider.Config, wantCode: "403"},
		{name: "407", handler: reply(407, ``), wantKind: provider.Config, wantCode: "407"},
		{name: "408", handler: reply(408, ``), wantKind: provider.Transient, wantCode: "408"},
		{name: "409", handler: reply(409, ``), wantKind: provider.Transient, wantCode: "409"},
		{name: "425", handler: reply(425, ``), wantKind: provider.Transient, wantCode: "425"},
		{name: "429", handler: reply(429, `{"error":"slow down"}`), wantKind: provider.Transient, wantCode: "429", wantReason: "slow down"},
		{name: "500", handler: reply(500, ``), wantKind: provider.Ambiguous, wantCode: "500"},
		{name: "502", handler: reply(502, ``), wantKind: provider.Ambiguous, wantCode: "502"},
		{name: "503", handler: reply(503, ``), wantKind: provider.Transient, wantCode: "503"},
		{name: "504", handler: reply(504, ``), wantKind: provider.Ambiguous, wantCode: "504"},
		{name: "599", handler: reply(599, ``), wantKind: provider.Ambiguous, wantCode: "599"},
		{name: "600", handler: reply(600, ``), wantKind: provider.Ambiguous, wantCode: "600"},
		{name: "ResetAfterWrite", handler: hijackClose, wantKind: provider.Ambiguous, wantReason: "written"},
		{name: "TimeoutAfterWrite", handler: sleepy, timeout: 200 * time.Millisecond, wantKind: provider.Ambiguous, wantReason: "timeout"},
		{name: "ClosedPort", closedPort: true, wantKind: provider.Transient, wantReason: "connection refused"},
		{name: "TLSUntrusted", tls: true, handler: reply(200, `{"id":"msg_x"}`), wantKind: provider.Transient, wantReason: "not delivered"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var base string
			switch {
			case tt.closedPort:
				base = closedPort(t)
			case tt.tls:
				srv := httptest.NewUnstartedServer(tt.handler)
				srv.Config.ErrorLog = log.New(io.Discard, "", 0)
				srv.StartTLS()
				t.Cleanup(srv.Close)
				base = srv.URL
			default:
				srv := httptest.NewServer(tt.handler)
				t.Cleanup(srv.Close)
				base = srv.URL
			}
			b := setup(t, base, tt.timeout)
			rc, err := b.p.Send(context.Background(), message())
			if tt.wantID != "" {
				if err != nil {
					t.Fatalf("Send: %v", err)
				}
				if got, want := rc.MessageID, tt.wantID; got != want {
					t.Errorf("MessageID = %q, want %q", got, want)
				}
			} else {
				checkErr(t, err, "send", tt.wantKind, tt.wantCode, tt.wantReason)
			}
			checkNoSecrets(t, b.log.String(), err)
		})
	}
}

func checkErr(t *testing.T, err error, op string, kind provider.Kind, code, reason string) {
	t.Helper()
	var pe *provider.Error
	if !errors.As(err, &pe) {
		t.Fatalf("err = %v (%T), want *provider.Error", err, err)
	}
	if got, want := pe.Kind, kind; got != want {
		t.Errorf("Kind = %s, want %s (err %v)", got, want, err)
	}
	if got, want := pe.Code, code; got != want {
		t.Errorf("Code = %q, want %q", got, want)
	}
	if got, want := pe.Op, op; got != want {
		t.Errorf("Op = %q, want %q", got, want)
	}
	if got, want := pe.Provider, "http"; got != want {
		t.Errorf("Provider = %q, want %q", got, want)
	}
	if pe.Reason == "" {
		t.Errorf("Reason is empty")
	}
	if !strings.Contains(pe.Reason, reason) {
		t.Errorf("Reason = %q, want it to contain %q", pe.Reason, reason)
	}
}

func checkNoSecrets(t *testing.T, logs string, err error) {
	t.Helper()
	texts := map[string]string{"log": logs}
	if err != nil {
		texts["err.Error()"] = err.Error()
		texts["ReasonOf"] = provider.ReasonOf(err)
	}
	for where, s := range texts {
		if strings.Contains(s, testToken) {
			t.Errorf("%s holds the token: %s", where, s)
		}
		if strings.Contains(s, testPhone) {
			t.Errorf("%s holds the raw phone number: %s", where, s)
		}
	}
}

func TestSendRequest(t *testing.T) {
	t.Parallel()
	var (
		mu  sync.Mutex
		got *http.Request
		req httpprovider.SendRequest
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		got = r.Clone(context.Background())
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			t.Errorf("decode body: %v", err)
		}
		reply(202, `{"id":"msg_9","status":"accepted"}`)(w, r)
	}))
	t.Cleanup(srv.Close)
	b := setup(t, srv.URL+"/", 0)
	m := message()
	m.Channel, m.To, m.Subject, m.HTML = "email", "ana@example.com", "Shipped", "<p>Your order <b>shipped</b></p>"
	if _, err := b.p.Send(context.Background(), m); err != nil {
		t.Fatalf("Send: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	checks := []struct{ name, got, want string }{
		{"method", got.Method, http.MethodPost},
		{"path", got.URL.Path, "/messages"},
		{"Authorization", got.Header.Get("Authorization"), "Bearer " + testToken},
		{"Idempotency-Key", got.Header.Get("Idempotency-Key"), testKey},
		{"Content-Type", got.Header.Get("Content-Type"), "application/json"},
		{"channel", req.Channel, "email"},
		{"to", req.To, "ana@example.com"},
		{"subject", req.Subject, "Shipped"},
		{"body", req.Body, "Your order shipped"},
		{"html", req.HTML, "<p>Your order <b>shipped</b></p>"},
		{"reference", req.Reference, testKey},
		{"callback_url", req.CallbackURL, "http://127.0.0.1:1/callbacks/http"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.name, c.got, c.want)
		}
	}
}

// TestSendRequestWithoutHTML: a message without an HTML part is sent with
// no "html" member at all, as before the field existed, so a gateway that
// refuses unknown fields keeps working.
func TestSendRequestWithoutHTML(t *testing.T) {
	t.Parallel()
	bodies := make(chan map[string]json.RawMessage, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var v map[string]json.RawMessage
		if err := json.NewDecoder(r.Body).Decode(&v); err != nil {
			t.Errorf("decode body: %v", err)
		}
		bodies <- v
		reply(202, `{"id":"msg_9","status":"accepted"}`)(w, r)
	}))
	t.Cleanup(srv.Close)
	b := setup(t, srv.URL, 0)
	if _, err := b.p.Send(context.Background(), message()); err != nil {
		t.Fatalf("Send: %v", err)
	}
	got := <-bodies
	if _, ok := got["html"]; ok {
		t.Errorf("body has an html member %s for a message without an HTML part", got["html"])
	}
	for _, k := range []string{"channel", "to", "subject", "body", "reference", "callback_url"} {
		if _, ok := got[k]; !ok {
			t.Errorf("body lacks %q", k)
		}
	}
	if len(got) != 6 {
		t.Errorf("body has %d members, want the 6 of the protocol before html: %v", len(got), got)
	}
}

func TestSendHonoursContext(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(sleepy))
	t.Cleanup(srv.Close)
	b := setup(t, srv.URL, time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := b.p.Send(ctx, message())
	if elapsed := time.Since(start); elapsed > 2*time.Second {
		t.Errorf("Send took %s, want it bounded by ctx's 150ms deadline", elapsed)
	}
	checkErr(t, err, "send", provider.Ambiguous, "", "timeout")
}

func TestSendWithoutKey(t *testing.T) {
	t.Parallel()
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { calls++ }))
	t.Cleanup(srv.Close)
	b := setup(t, srv.URL, 0)
	m := message()
	m.Key = ""
	_, err := b.p.Send(context.Background(), m)
	checkErr(t, err, "send", provider.Config, "", "no idempotency key")
	if calls != 0 {
		t.Errorf("provider called %d times, want 0", calls)
	}
}

func TestLookup(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		handler    http.HandlerFunc
		closedPort bool
		timeout    time.Duration
		want       provider.LookupResult
		wantErr    bool
		wantKind   provider.Kind
		wantCode   string
	}{
		{name: "NotFound", handler: reply(200, `{"messages":[]}`), want: provider.LookupResult{Status: provider.LookupNotFound}},
		{name: "Accepted", handler: reply(200, `{"messages":[{"id":"msg_1","status":"accepted"}]}`), want: provider.LookupResult{Status: provider.LookupAccepted, MessageID: "msg_1"}},
		{name: "Queued", handler: reply(200, `{"messages":[{"id":"msg_1","status":"queued"}]}`), want: provider.LookupResult{Status: provider.LookupAccepted, MessageID: "msg_1"}},
		{name: "Sent", handler: reply(200, `{"messages":[{"id":"msg_1","status":"sent"}]}`), want: provider.LookupResult{Status: provider.LookupAccepted, MessageID: "msg_1"}},
		{name: "Delivered", handler: reply(200, `{"messages":[{"id":"msg_1","status":"delivered"}]}`), want: provider.LookupResult{Status: provider.LookupAccepted, MessageID: "msg_1"}},
		{name: "AcceptedWinsOverFailed", handler: reply(200, `{"messages":[{"id":"msg_1","status":"failed"},{"id":"msg_2","status":"delivered"}]}`), want: provider.LookupResult{Status: provider.LookupAccepted, MessageID: "msg_2"}},
		{name: "Failed", handler: reply(200, `{"messages":[{"id":"msg_1","status":"failed","reason":"carrier rejected +15551234567"}]}`), want: provider.LookupResult{Status: provider.LookupRejected, MessageID: "msg_1", Reason: "carrier rejected phone:"}},
		{name: "Undelivered", handler: reply(200, `{"messages":[{"id":"msg_1","status":"undelivered"}]}`), want: provider.LookupResult{Status: provider.LookupRejected, MessageID: "msg_1", Reason: "undelivered"}},
		{name: "Rejected", handler: reply(200, `{"messages":[{"id":"msg_1","status":"rejected"}]}`), want: provider.LookupResult{Status: provider.LookupRejected, MessageID: "msg_1", Reason: "rejected"}},
		{name: "UnknownStatus", handler: reply(200, `{"messages":[{"id":"msg_1","status":"weird"}]}`), wantErr: true, wantKind: provider.Transient, wantCode: "200"},
		{name: "Unparseable", handler: reply(200, `nope`), wantErr: true, wantKind: provider.Transient, wantCode: "200"},
		{name: "401", handler: reply(401, ``), wantErr: true, wantKind: provider.Config, wantCode: "401"},
		{name: "403", handler: reply(403, ``), wantErr: true, wantKind: provider.Config, wantCode: "403"},
		{name: "400", handler: reply(400, ``), wantErr: true, wantKind: provider.Permanent, wantCode: "400"},
		{name: "404", handler: reply(404, ``), wantErr: true, wantKind: provider.Permanent, wantCode: "404"},
		{name: "429", handler: reply(429, ``), wantErr: true, wantKind: provider.Transient, wantCode: "429"},
		{name: "503", handler: reply(503, ``), wantErr: true, wantKind: provider.Transient, wantCode: "503"},
		{name: "204", handler: reply(204, ``), wantErr: true, wantKind: provider.Transient, wantCode: "204"},
		{name: "Reset", handler: hijackClose, wantErr: true, wantKind: provider.Transient},
		{name: "Timeout", handler: sleepy, timeout: 200 * time.Millisecond, wantErr: true, wantKind: provider.Transient},
		{name: "ClosedPort", closedPort: true, wantErr: true, wantKind: provider.Transient},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var base string
			if tt.closedPort {
				base = closedPort(t)
			} else {
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.Method != http.MethodGet || r.URL.Path != "/messages" || r.URL.Query().Get("reference") != testKey ||
						r.Header.Get("Authorization") != "Bearer "+testToken {
						t.Errorf("request = %s %s, want GET /messages?reference=%s with the bearer token", r.Method, r.URL, testKey)
					}
					tt.handler(w, r)
				}))
				t.Cleanup(srv.Close)
				base = srv.URL
			}
			b := setup(t, base, tt.timeout)
			got, err := b.p.Lookup(context.Background(), message())
			if tt.wantErr {
				checkErr(t, err, "lookup", tt.wantKind, tt.wantCode, "")
			} else {
				if err != nil {
					t.Fatalf("Lookup: %v", err)
				}
				if got.Status != tt.want.Status || got.MessageID != tt.want.MessageID || !strings.HasPrefix(got.Reason, tt.want.Reason) ||
					(tt.want.Reason == "") != (got.Reason == "") {
					t.Errorf("Lookup = %+v, want %+v", got, tt.want)
				}
			}
			checkNoSecrets(t, b.log.String()+got.Reason, err)
		})
	}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  httpprovider.Config
	}{
		{"NoBaseURL", httpprovider.Config{Token: "tok-XYZZY"}},
		{"BadScheme", httpprovider.Config{BaseURL: "ftp://x", Token: "tok-XYZZY"}},
		{"NoHost", httpprovider.Config{BaseURL: "http://", Token: "tok-XYZZY"}},
		{"Query", httpprovider.Config{BaseURL: "http://x/?a=b", Token: "tok-XYZZY"}},
		{"UserInfo", httpprovider.Config{BaseURL: "http://u:p@x/", Token: "tok-XYZZY"}},
		{"NoToken", httpprovider.Config{BaseURL: "http://x"}},
		{"TokenWithNewline", httpprovider.Config{BaseURL: "http://x", Token: "abc\r\nX-Evil: 1"}},
		{"NegativeTimeout", httpprovider.Config{BaseURL: "http://x", Token: "tok-XYZZY", Timeout: -time.Second}},
		{"BadCallbackURL", httpprovider.Config{BaseURL: "http://x", Token: "tok-XYZZY", CallbackURL: "/relative"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := httpprovider.New(tt.cfg)
			if !errors.Is(err, httpprovider.ErrInvalidConfig) {
				t.Fatalf("New err = %v, want ErrInvalidConfig", err)
			}
			if tt.cfg.Token != "" && strings.Contains(err.Error(), tt.cfg.Token) {
				t.Errorf("error holds the token: %v", err)
			}
		})
	}
	p, err := httpprovider.New(httpprovider.Config{BaseURL: "https://sms.example.com/v1", Token: "tok-XYZZY"})
	if err != nil {
		t.Fatalf("New valid: %v", err)
	}
	if got, want := p.Name(), "http"; got != want {
		t.Errorf("Name = %q, want %q", got, want)
	}
	if got, want := p.Capabilities(), (provider.Capabilities{IdempotentSends: true, LookupByReference: true}); got != want {
		t.Errorf("Capabilities = %+v, want %+v", got, want)
	}
	lookupOnly, err := httpprovider.New(httpprovider.Config{BaseURL: "https://sms.example.com/v1", Token: "tok-XYZZY", DisableIdempotency: true})
	if err != nil {
		t.Fatalf("New with DisableIdempotency: %v", err)
	}
	if got, want := lookupOnly.Capabilities(), (provider.Capabilities{IdempotentSends: false, LookupByReference: true}); got != want {
		t.Errorf("Capabilities with DisableIdempotency = %+v, want %+v", got, want)
	}
}

// TestSendClassificationWithoutIdempotency (defect 10): a provider declared
// to ignore Idempotency-Key cannot drop a repeat, so a 5xx, after which it
// may have accepted, is ambiguous, not transient; the statuses that say it
// did not take the message stay transient.
func TestSendClassificationWithoutIdempotency(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		status int
		want   provider.Kind
	}{
		{500, provider.Ambiguous}, {502, provider.Ambiguous}, {503, provider.Ambiguous}, {504, provider.Ambiguous}, {599, provider.Ambiguous},
		{408, provider.Transient}, {409, provider.Transient}, {425, provider.Transient}, {429, provider.Transient},
		{400, provider.Permanent}, {422, provider.Permanent}, {401, provider.Config}, {403, provider.Config},
	} {
		t.Run(fmt.Sprint(tt.status), func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(reply(tt.status, ``))
			t.Cleanup(srv.Close)
			p, err := httpprovider.New(httpprovider.Config{BaseURL: srv.URL, Token: testToken, DisableIdempotency: true, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			_, err = p.Send(context.Background(), message())
			checkErr(t, err, "send", tt.want, fmt.Sprint(tt.status), "")
			// A lookup sends nothing: what is ambiguous for a send is
			// transient for it.
			if tt.status >= 500 {
				_, err = p.Lookup(context.Background(), message())
				checkErr(t, err, "lookup", provider.Transient, fmt.Sprint(tt.status), "")
			}
		})
	}
}
