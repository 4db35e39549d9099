package chaos

import (
	"cmp"
	"context"
	"crypto/hmac"
	crand "crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sendonce/sendonce/internal/localpipeline"
	"github.com/sendonce/sendonce/internal/provider/registry"
	"github.com/sendonce/sendonce/internal/provider/twilio/twiliotest"
	"github.com/sendonce/sendonce/notify"
)

// twilioLane is the Twilio adapter against twiliotest: Twilio's Messages
// API as documented, with its lookup semantics (a list by recipient
// filtered by send date, matched by body). Like Twilio, the lane posts
// each accepted message's status callbacks to the message's
// StatusCallback URL (the webhook; the URL carries the message's key):
// "sent" shortly after the message was accepted, then "delivered", or
// "undelivered" (error 30007) for a message planned undeliverable. Those
// callbacks are the evidence that lets a content lookup prove a message
// (provider.Attribute).
type twilioLane struct {
	*drawer
	fake    *twiliotest.Server
	timeout time.Duration
	// undeliverable is the fraction of messages whose first accepted
	// send ends undelivered.
	undeliverable float64

	mu     sync.Mutex
	rng    *rand.Rand
	undel  map[string]bool // keys planned undeliverable
	client *http.Client
	stop   context.CancelFunc
	done   chan struct{}

	// pending counts callbacks scheduled and not yet handed to the
	// webhook for good (posted, or given up).
	pending                   atomic.Int64
	posted, retried, gaveUp   atomic.Int64
	accepted, withoutCallback atomic.Int64
}

// twilioFrom is the lane's sender number (Twilio's magic test number).
const twilioFrom = "+15005550006"

// Twilio's status callbacks, as the lane posts them.
const (
	// callbackTries bounds the posts of one callback: a 5xx, a 429 or no
	// connection is retried, with a doubling pause from a second, as
	// Twilio's connection overrides (#rc, #rp) let a deployment ask.
	callbackTries = 6
	// callbackWorkers bounds the callbacks posted at once (the webhook
	// serves one invocation at a time).
	callbackWorkers = 4
)

func newTwilioLane(_ context.Context, o Options, seed uint64) (Counterpart, error) {
	l := &twilioLane{
		fake: twiliotest.NewServer(), drawer: newDrawer(o.SendFaults, seed), timeout: o.ProviderTimeout,
		undeliverable: o.Undeliverable, rng: rand.New(rand.NewPCG(seed, seed^0x3d1)), undel: map[string]bool{},
		client: &http.Client{Timeout: 30 * time.Second},
	}
	l.fake.SetDecide(l.decide)
	return l, nil
}

// decide maps a drawn fault onto Twilio's wire.
func (l *twilioLane) decide(to string) twiliotest.Fault {
	l.inFlight.Add(1)
	defer l.inFlight.Add(-1)
	k, delay := l.draw(to)
	switch k {
	case fkTransient, fkOutage:
		if l.Intn(2) == 0 {
			return twiliotest.Fault{Status: 429, Code: 20429, Message: "Too Many Requests"}
		}
		return twiliotest.Fault{Status: 503, Code: 20503, Message: "Service unavailable"}
	case fkBefore:
		return twiliotest.Fault{HangBeforeAccept: true}
	case fkAfter:
		return twiliotest.Fault{AcceptThenHang: true}
	case fkAfterError:
		return twiliotest.Fault{AcceptThenStatus: 500, Code: 20500, Message: "Internal Server Error"}
	case fkSlow:
		return twiliotest.Fault{Delay: delay}
	case fkReject:
		return twiliotest.Fault{Status: 400, Code: 21610, Message: "Attempt to send to unsubscribed recipient"}
	case fkThrottle:
		return twiliotest.Fault{Status: 429, Code: 20429, Message: "Too Many Requests"}
	}
	return twiliotest.Fault{}
}

func (l *twilioLane) Env() map[string]string {
	return map[string]string{
		registry.EnvSMSProvider: "twilio", registry.EnvEmailProvider: "",
		registry.EnvTwilioAccountSID: l.fake.AccountSID, registry.EnvTwilioAuthToken: l.fake.AuthToken,
		registry.EnvTwilioFrom: twilioFrom, registry.EnvTwilioBaseURL: l.fake.URL,
	}
}

// Plan plans a message's fault (the drawer's: a permanent rejection of
// its recipient, a slow first answer) and, at the rate of undeliverable
// messages, its delivery failing at the carrier.
func (l *twilioLane) Plan(m localpipeline.Message, slow time.Duration) error {
	l.mu.Lock()
	if m.Valid && !m.WantFailed && l.rng.Float64() < l.undeliverable {
		l.undel[m.Key] = true
	}
	l.mu.Unlock()
	return l.drawer.Plan(m, slow)
}

// Attach starts posting status callbacks.
func (l *twilioLane) Attach(*localpipeline.Pipeline) error {
	ctx, cancel := context.WithCancel(context.Background())
	l.stop, l.done = cancel, make(chan struct{})
	go l.callbacks(ctx)
	return nil
}

// callbacks watches the fake for messages it accepted and posts each
// one's callbacks until ctx ends.
func (l *twilioLane) callbacks(ctx context.Context) {
	defer close(l.done)
	sem := make(chan struct{}, callbackWorkers)
	seen := 0
	var wg sync.WaitGroup
	defer wg.Wait()
	for ctx.Err() == nil {
		msgs := l.fake.Messages()
		for _, m := range msgs[seen:] {
			l.accepted.Add(1)
			if m.StatusCallback == "" {
				l.withoutCallback.Add(1)
				continue
			}
			l.pending.Add(2)
			wg.Add(1)
			go func() {
				defer wg.Done()
				l.lifecycle(ctx, m, sem)
			}()
		}
		seen = len(msgs)
		localpipeline.Sleep(ctx, 100*time.Millisecond)
	}
}

// lifecycle moves message m on as a carrier would and posts a callback
// for each status: "sent" 0.2-1 s after it was accepted, then, 0.5-3 s
// later, "delivered" or (planned) "undelivered".
func (l *twilioLane) lifecycle(ctx context.Context, m twiliotest.Message, sem chan struct{}) {
	l.mu.Lock()
	d1 := 200*time.Millisecond + time.Duration(l.rng.Int64N(int64(800*time.Millisecond)))
	d2 := 500*time.Millisecond + time.Duration(l.rng.Int64N(int64(2500*time.Millisecond)))
	undelivered := l.undel[callbackKey(m.StatusCallback)]
	l.mu.Unlock()
	localpipeline.Sleep(ctx, d1)
	l.post(ctx, m, "sent", "", sem)
	localpipeline.Sleep(ctx, d2)
	status, code := "delivered", ""
	if undelivered {
		status, code = "undelivered", "30007"
		l.fake.SetStatus(m.SID, status, 30007)
	} else {
		l.fake.SetStatus(m.SID, status, 0)
	}
	l.post(ctx, m, status, code, sem)
}

// post posts one status callback of m as Twilio does: form-encoded, with
// X-Twilio-Signature over the URL and the parameters and an
// I-Twilio-Idempotency-Token that every retry of it repeats.
func (l *twilioLane) post(ctx context.Context, m twiliotest.Message, status, errorCode string, sem chan struct{}) {
	defer l.pending.Add(-1)
	form := url.Values{
		"AccountSid": {l.fake.AccountSID}, "ApiVersion": {"2010-04-01"},
		"MessageSid": {m.SID}, "SmsSid": {m.SID}, "MessageStatus": {status}, "SmsStatus": {status},
		"From": {m.From}, "To": {m.To},
	}
	if errorCode != "" {
		form.Set("ErrorCode", errorCode)
	}
	token := randomToken()
	sig := twilioSignature(l.fake.AuthToken, m.StatusCallback, form)
	pause := time.Second
	for try := range callbackTries {
		if ctx.Err() != nil {
			return
		}
		if try > 0 {
			l.retried.Add(1)
			localpipeline.Sleep(ctx, pause)
			pause *= 2
		}
		sem <- struct{}{}
		ok := l.postOnce(ctx, m.StatusCallback, form, sig, token)
		<-sem
		if ok {
			l.posted.Add(1)
			return
		}
	}
	l.gaveUp.Add(1)
}

// postOnce reports whether the webhook took the callback (any answer
// Twilio does not retry: 2xx, or a 4xx other than 408 and 429).
func (l *twilioLane) postOnce(ctx context.Context, u string, form url.Values, sig, token string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(form.Encode()))
	if err != nil {
		return true // cannot be posted at all: nothing to retry
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Twilio-Signature", sig)
	req.Header.Set("I-Twilio-Idempotency-Token", token)
	resp, err := l.client.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode < 500 && resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusRequestTimeout
}

// twilioSignature is X-Twilio-Signature as Twilio documents it, written
// here from that description rather than taken from the webhook it
// checks: base64 of HMAC-SHA1 under the auth token of the URL followed by
// each POST parameter's name and value, sorted by name.
func twilioSignature(authToken, rawURL string, form url.Values) string {
	mac := hmac.New(sha1.New, []byte(authToken))
	mac.Write([]byte(rawURL))
	names := make([]string, 0, len(form))
	for k := range form {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		for _, v := range form[k] {
			mac.Write([]byte(k + v))
		}
	}
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

func randomToken() string {
	b := make([]byte, 16)
	_, _ = crand.Read(b)
	return hex.EncodeToString(b)
}

// callbackKey is the key a StatusCallback URL carries ("" when none).
func callbackKey(statusCallback string) string {
	u, err := url.Parse(statusCallback)
	if err != nil {
		return ""
	}
	return u.Query().Get("key")
}

// Quiesce waits (bounded by ctx) until every callback scheduled was
// handed to the webhook or given up.
func (l *twilioLane) Quiesce(ctx context.Context) {
	for ctx.Err() == nil && l.pending.Load() > 0 {
		localpipeline.Sleep(ctx, 200*time.Millisecond)
	}
}

// noKey counts the messages whose create carried no StatusCallback key.
const noKey = "(messages without a status callback key)"

// Delivered counts the messages Twilio accepted per key: the key is the
// one the StatusCallback URL of the create request carried (the adapter
// puts it there), so messages with one text to one recipient are told
// apart as the fake alone could not. A key's status is "failed" when a
// message of its own ended undelivered.
func (l *twilioLane) Delivered(_ context.Context, _ localpipeline.Workload) (map[string]int, map[string]string, error) {
	count, status := map[string]int{}, map[string]string{}
	for _, m := range l.Accepted() {
		count[m.Key]++
		if m.Status == "undelivered" || m.Status == "failed" {
			status[m.Key] = "failed"
		}
	}
	return count, status, nil
}

// Accepted lists every message the fake accepted, with its key.
func (l *twilioLane) Accepted() []acceptedMessage {
	var out []acceptedMessage
	for _, m := range l.fake.Messages() {
		key := cmp.Or(callbackKey(m.StatusCallback), noKey)
		out = append(out, acceptedMessage{Key: key, ID: m.SID, To: m.To, Body: m.Body, Status: m.Status, At: m.DateCreated})
	}
	return out
}

// Callbacks returns the lane's callback figures.
func (l *twilioLane) Callbacks() CallbackStats {
	return CallbackStats{Accepted: int(l.accepted.Load()), WithoutURL: int(l.withoutCallback.Load()),
		Posted: int(l.posted.Load()), Retried: int(l.retried.Load()), GaveUp: int(l.gaveUp.Load())}
}

// byAddress turns counts per recipient into counts per workload key (a
// lane's workload gives every message its own recipient). With strays,
// recipients outside the workload are counted under one pseudo-key (a
// counterpart only this run uses must have none); without, they are
// ignored (a counterpart shared with other tests, as moto_server is in
// `make test`).
func byAddress(w localpipeline.Workload, perAddr map[string]int, strays bool) map[string]int {
	out := map[string]int{}
	known := map[string]bool{}
	for _, m := range w.Messages {
		if m.Valid && m.Address != "" {
			known[m.Address] = true
			if n := perAddr[m.Address]; n > 0 {
				out[m.Key] = n
			}
		}
	}
	for a, n := range perAddr {
		if strays && !known[a] {
			out["(recipients outside the workload)"] += n
		}
	}
	return out
}

// Sent counts the keys with an accepted message.
func (l *twilioLane) Sent() int {
	keys := map[string]bool{}
	for _, m := range l.fake.Messages() {
		keys[m.StatusCallback] = true
	}
	return len(keys)
}

func (l *twilioLane) Capability(string) Capability { return ByContent }

func (l *twilioLane) Close() {
	if l.stop != nil {
		l.stop()
		<-l.done
	}
	l.fake.Close()
}

// shareRate is the fraction of the twilio lane's messages that start a
// group sharing one recipient and one text.
const shareRate = 0.25

// shareTexts reshapes a workload so that content lookups meet real
// ambiguity: groups of 2 to 4 consecutive messages (in feed order, so
// they are in flight together) go to one recipient with one text. The
// members of a group are its first message's request under their own
// event ids, so their own keys: the same recipient, template, class and
// data (an OTP sent again with the same code, an order event emitted
// twice, a campaign's text repeated). A permanent rejection planned for a
// member (its recipient unsubscribed) holds for every member.
func shareTexts(w localpipeline.Workload, rng *rand.Rand) localpipeline.Workload {
	leader := make([]int, len(w.Messages))
	for i := 0; i < len(w.Messages); {
		k := 1
		if rng.Float64() < shareRate {
			k = 2 + rng.IntN(3)
		}
		for j := i; j < min(i+k, len(w.Messages)); j++ {
			leader[j] = i
		}
		i += k
	}
	reqs := map[int]notify.Request{}
	for i, m := range w.Messages {
		var r notify.Request
		if m.Valid && leader[i] == i && json.Unmarshal([]byte(m.Body), &r) == nil {
			reqs[i] = r
		}
	}
	out := rewrite(w, func(i int, r *notify.Request) bool {
		lead, ok := reqs[leader[i]]
		if leader[i] == i || !ok {
			return false
		}
		r.Recipient, r.Template, r.Class, r.Data, r.Content, r.Locale = lead.Recipient, lead.Template, lead.Class, lead.Data, lead.Content, lead.Locale
		return true
	})
	rejected := map[int]bool{}
	for i, m := range out.Messages {
		if m.WantFailed {
			rejected[leader[i]] = true
		}
	}
	for i := range out.Messages {
		if rejected[leader[i]] {
			out.Messages[i].WantFailed = true
		}
	}
	return out
}
