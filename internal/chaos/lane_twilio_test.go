package chaos

import (
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/localpipeline"
	"github.com/sendonce/sendonce/internal/webhook"
	"github.com/sendonce/sendonce/notify"
)

// TestShareTexts: the reshaped workload has groups of consecutive
// messages with one recipient and one rendered text but keys of their
// own, in feed order, and a planned rejection of a recipient holds for
// every message to it.
func TestShareTexts(t *testing.T) {
	t.Parallel()
	w := localpipeline.NewWorkload(localpipeline.WorkloadOptions{N: 400, Seed: 3, Tenant: "chaos-twilio", Permanent: 0.03,
		Channels: []notify.Channel{notify.ChannelSMS}})
	got := shareTexts(w, rand.New(rand.NewPCG(3, 4)))
	if len(got.Messages) != len(w.Messages) || len(got.First) != len(w.First) {
		t.Fatalf("%d messages, %d first bodies; want %d, %d", len(got.Messages), len(got.First), len(w.Messages), len(w.First))
	}
	keys := map[string]bool{}
	byAddr := map[string][]int{}
	for i, m := range got.Messages {
		if keys[m.Key] {
			t.Fatalf("key %s twice: every message keeps a key of its own", m.Key)
		}
		keys[m.Key] = true
		byAddr[m.Address] = append(byAddr[m.Address], i)
		if got.First[i] != m.Body {
			t.Fatalf("first[%d] is not message %d's body: the feed order changed", i, i)
		}
	}
	var tr *templateRun
	shared, wantFailed := 0, 0
	for addr, idx := range byAddr {
		if len(idx) == 1 {
			continue
		}
		shared += len(idx)
		if idx[len(idx)-1]-idx[0] != len(idx)-1 {
			t.Errorf("%s: messages %v are not consecutive", addr, idx)
		}
		first := request(got.Messages[idx[0]])
		text := tr.texts(first)[1]
		if text == "" {
			t.Fatalf("message %d renders no text", idx[0])
		}
		failed := got.Messages[idx[0]].WantFailed
		for _, i := range idx[1:] {
			m := got.Messages[i]
			r := request(m)
			if r.EventID == first.EventID || r.Recipient != first.Recipient || m.Class != got.Messages[idx[0]].Class {
				t.Errorf("message %d: event %s, recipient %+v, class %s; want its own event, %s's recipient and class", i, r.EventID, r.Recipient, m.Class, first.EventID)
			}
			if tr.texts(r)[1] != text {
				t.Errorf("message %d renders %q, want the group's %q", i, tr.texts(r)[1], text)
			}
			if m.WantFailed != failed {
				t.Errorf("message %d: WantFailed %v, the group's first %v: a rejected recipient rejects every message", i, m.WantFailed, failed)
			}
		}
		if failed {
			wantFailed++
		}
	}
	// About a quarter of the messages start a group of 2 to 4.
	if shared < len(w.Messages)/3 || shared > 3*len(w.Messages)/4 {
		t.Errorf("%d of %d messages share a recipient and a text, want about half", shared, len(w.Messages))
	}
	if wantFailed == 0 {
		t.Error("no group has a planned rejection: the workload no longer covers a rejected shared recipient")
	}
}

// TestTwilioSignature: the lane's signer, written from Twilio's
// description, and the webhook's verifier agree, and a changed parameter
// breaks the signature.
func TestTwilioSignature(t *testing.T) {
	t.Parallel()
	u := "http://127.0.0.1:8080/callbacks/twilio?key=v1_abc"
	form := url.Values{"MessageSid": {"SM1"}, "MessageStatus": {"sent"}, "To": {"+15550001111"}, "AccountSid": {"AC1"}}
	sig := twilioSignature("token", u, form)
	if err := webhook.VerifyTwilio("token", u, form, sig); err != nil {
		t.Fatalf("the webhook refuses the lane's signature: %v", err)
	}
	form.Set("MessageStatus", "delivered")
	if err := webhook.VerifyTwilio("token", u, form, sig); err == nil {
		t.Error("a changed status verifies under the old signature")
	}
}

// callback is one status callback a test webhook took.
type callback struct {
	key, sid, status, code, token string
}

// TestTwilioCallbacks: the lane posts every message's status callbacks,
// signed, to the URL the message was created with: "sent" then
// "delivered", or "undelivered" (30007) for a message planned
// undeliverable, which the fake then lists as undelivered. A callback the
// webhook fails is posted again with the same idempotency token.
// Delivered counts per key, though two messages share recipient and text.
func TestTwilioCallbacks(t *testing.T) {
	t.Parallel()
	cp, err := newTwilioLane(context.Background(), Options{Undeliverable: 0}, 1)
	if err != nil {
		t.Fatal(err)
	}
	l := cp.(*twilioLane)
	defer l.Close()
	var mu sync.Mutex
	var got []callback
	failFirst := map[string]bool{} // per sid+status: answered 500 once
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		form, _ := url.ParseQuery(string(body))
		full := "http://" + r.Host + r.URL.RequestURI()
		if err := webhook.VerifyTwilio(l.fake.AuthToken, full, form, r.Header.Get("X-Twilio-Signature")); err != nil {
			t.Errorf("callback %s: %v", full, err)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		id := form.Get("MessageSid") + form.Get("MessageStatus")
		got = append(got, callback{r.URL.Query().Get("key"), form.Get("MessageSid"), form.Get("MessageStatus"), form.Get("ErrorCode"), r.Header.Get("I-Twilio-Idempotency-Token")})
		if !failFirst[id] && form.Get("MessageStatus") == "sent" {
			failFirst[id] = true
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer hook.Close()

	a := localpipeline.Message{Valid: true, Key: "v1_a", Address: "+15550001111"}
	b := localpipeline.Message{Valid: true, Key: "v1_b", Address: "+15550001111"}
	l.mu.Lock()
	l.undel[b.Key] = true
	l.mu.Unlock()
	if err := l.Attach(nil); err != nil {
		t.Fatal(err)
	}
	for _, m := range []localpipeline.Message{a, b} {
		form := url.Values{"To": {m.Address}, "From": {twilioFrom}, "Body": {"Your code is 123456."},
			"StatusCallback": {hook.URL + "/callbacks/twilio?key=" + m.Key}}
		req, _ := http.NewRequest(http.MethodPost, l.fake.URL+"/2010-04-01/Accounts/"+l.fake.AccountSID+"/Messages.json", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.SetBasicAuth(l.fake.AccountSID, l.fake.AuthToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("create: %d", resp.StatusCode)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for ctx.Err() == nil && l.Callbacks().Posted < 4 {
		localpipeline.Sleep(ctx, 100*time.Millisecond)
	}
	l.Quiesce(ctx)
	st := l.Callbacks()
	if st.Accepted != 2 || st.Posted != 4 || st.Retried != 2 || st.GaveUp != 0 {
		t.Errorf("callbacks %+v, want 2 accepted, 4 posted, 2 retried", st)
	}
	mu.Lock()
	defer mu.Unlock()
	final := map[string]callback{}
	tokens := map[string]string{}
	for _, c := range got {
		if c.status == "sent" {
			if tok, ok := tokens[c.sid]; ok && tok != c.token {
				t.Errorf("a retried callback of %s came with another idempotency token", c.sid)
			}
			tokens[c.sid] = c.token
			continue
		}
		final[c.key] = c
	}
	if c := final[a.Key]; c.status != "delivered" || c.code != "" {
		t.Errorf("a's final callback %+v, want delivered", c)
	}
	if c := final[b.Key]; c.status != "undelivered" || c.code != "30007" {
		t.Errorf("b's final callback %+v, want undelivered 30007", c)
	}
	count, status, err := l.Delivered(ctx, localpipeline.Workload{})
	if err != nil {
		t.Fatal(err)
	}
	if count[a.Key] != 1 || count[b.Key] != 1 || status[b.Key] != "failed" || status[a.Key] != "" {
		t.Errorf("Delivered = %v, %v; want one each by key, b failed", count, status)
	}
}
