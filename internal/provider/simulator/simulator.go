// Package simulator is an in-process simulator of the generic HTTP provider
// protocol (docs/http-provider.md). It is the ground truth of tests, chaos
// runs and the demo: it records every message it accepted, so a test can
// ask how many times a reference was really delivered.
//
// It checks the bearer token, honours Idempotency-Key (a repeat answers
// 200 with the original id and delivers nothing; a repeat with another body,
// its "html" part included, answers 422), records an email's HTML part,
// answers lookups by reference, assigns ids msg_1, msg_2, ..., and posts
// signed delivery callbacks (sent, then delivered or failed), for a
// bounded number of messages at a time.
//
// Faults are injected per request from a plan (AddFault) or at random
// from a seeded RNG (SetRandom).
package simulator

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/sendonce/sendonce/internal/provider/httpprovider"
)

// maxBody is the largest send body accepted; a larger one is answered 413.
const maxBody = 64 << 10

// Options configures a Simulator.
type Options struct {
	// Token is the bearer token every request must carry (401 otherwise).
	// Empty disables the check.
	Token string
	// CallbackSecret signs callbacks (httpprovider.Sign). Empty disables
	// callbacks.
	CallbackSecret []byte
	// IdempotencyDisabled models a provider without idempotent sends:
	// Idempotency-Key is ignored and every POST delivers a new message.
	IdempotencyDisabled bool
	// Latency and Jitter delay every /messages request by Latency plus a
	// uniform random part of up to Jitter.
	Latency, Jitter time.Duration
	// Seed seeds the RNG of jitter and random faults.
	Seed uint64
	// Callbacks tunes callback delivery.
	Callbacks CallbackOptions
}

// Message is a message the simulator accepted: the send's body, and what
// the simulator made of it.
type Message struct {
	httpprovider.SendRequest
	ID             string                     `json:"id"`
	IdempotencyKey string                     `json:"idempotency_key,omitempty"`
	Status         httpprovider.MessageStatus `json:"status"`
	Reason         string                     `json:"reason,omitempty"`
	AcceptedAt     time.Time                  `json:"accepted_at"`
}

// Stats are the simulator's totals since New.
type Stats struct {
	// Requests counts every request to /messages (sends and lookups).
	Requests int `json:"requests"`
	Sends    int `json:"sends"`
	// Accepted counts new messages (each one is a delivery).
	Accepted int `json:"accepted"`
	// DuplicatesSuppressed counts repeats answered with the original.
	DuplicatesSuppressed int `json:"duplicates_suppressed"`
	// Faults counts injected faults by kind.
	Faults map[FaultKind]int `json:"faults"`
	// CallbacksSent counts callbacks answered 2xx (duplicates included).
	CallbacksSent int `json:"callbacks_sent"`
	// CallbacksFailed counts callbacks given up after every attempt.
	CallbacksFailed int `json:"callbacks_failed"`
	// CallbacksDropped counts messages accepted while closing, whose
	// callbacks were never posted.
	CallbacksDropped int `json:"callbacks_dropped"`
}

type plannedFault struct {
	Fault
	left int // 0: unlimited
}

// Simulator is the provider simulator. Its methods are safe for
// concurrent use. Close stops its callbacks and releases hung requests.
type Simulator struct {
	opts Options

	ctx     context.Context // canceled by Close
	cancel  context.CancelFunc
	once    sync.Once
	wg      sync.WaitGroup
	workers chan struct{} // a semaphore: one token per message posting its callbacks
	client  *http.Client

	mu      sync.Mutex
	rng     *rand.Rand
	latency time.Duration
	jitter  time.Duration
	faults  []*plannedFault
	random  RandomFaults
	byKey   map[string]*Message
	byRef   map[string][]*Message
	msgs    []*Message
	stats   Stats
	nextID  int
	closed  bool
}

// New returns a Simulator. Call Close when done.
func New(opts Options) *Simulator {
	s := &Simulator{
		opts:    opts,
		rng:     rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15)),
		latency: opts.Latency,
		jitter:  opts.Jitter,
		byKey:   map[string]*Message{},
		byRef:   map[string][]*Message{},
		stats:   Stats{Faults: map[FaultKind]int{}},
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.workers = make(chan struct{}, max(1, cmp.Or(opts.Callbacks.Workers, 4)))
	s.client = &http.Client{Timeout: 5 * time.Second}
	return s
}

// Close stops posting callbacks (pending ones are dropped), wakes every
// hung request and waits for the callbacks being posted to stop. It is
// idempotent.
func (s *Simulator) Close() {
	s.once.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		s.cancel()
		s.wg.Wait()
	})
}

// Handler returns the simulator's HTTP handler: /messages.
func (s *Simulator) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /messages", s.auth(s.handleSend))
	mux.HandleFunc("GET /messages", s.auth(s.handleLookup))
	return mux
}

func (s *Simulator) auth(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.opts.Token != "" && r.Header.Get("Authorization") != "Bearer "+s.opts.Token {
			writeError(w, http.StatusUnauthorized, "invalid bearer token")
			return
		}
		h(w, r)
	}
}

// AddFault appends f to the plan.
func (s *Simulator) AddFault(f Fault) {
	f.Op = cmp.Or(f.Op, OpSend)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, &plannedFault{Fault: f, left: f.Count})
}

// ClearFaults removes every planned fault and turns random faults off.
func (s *Simulator) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
	s.random = RandomFaults{}
}

// SetRandom sets the random fault mode (the zero RandomFaults turns it
// off). Its error wraps ErrInvalidFault.
func (s *Simulator) SetRandom(r RandomFaults) error {
	if err := r.validate(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.random = r
	return nil
}

// SetLatency sets the delay of every /messages request: fixed plus a
// uniform random part of up to jitter. Negative values count as zero.
func (s *Simulator) SetLatency(fixed, jitter time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.latency, s.jitter = max(fixed, 0), max(jitter, 0)
}

// Delivered returns how many distinct messages with this reference the
// simulator accepted for delivery: 1 for a message sent exactly once, more
// than 1 for a duplicate, 0 if never accepted. Messages whose delivery
// fails (FaultUndeliverable) count too: they were handed to delivery.
func (s *Simulator) Delivered(reference string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byRef[reference])
}

// DeliveredAll returns Delivered for every reference ever accepted.
func (s *Simulator) DeliveredAll() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.byRef))
	for ref, rs := range s.byRef {
		out[ref] = len(rs)
	}
	return out
}

// Duplicates returns the references delivered more than once, sorted.
func (s *Simulator) Duplicates() []string {
	var out []string
	for ref, n := range s.DeliveredAll() {
		if n > 1 {
			out = append(out, ref)
		}
	}
	slices.Sort(out)
	return out
}

// Messages returns a copy of every accepted message, in acceptance order.
func (s *Simulator) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Message, len(s.msgs))
	for i, m := range s.msgs {
		out[i] = *m
	}
	return out
}

// Stats returns a copy of the totals.
func (s *Simulator) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Faults = maps.Clone(s.stats.Faults)
	return st
}

// sleep waits d (forever if d < 0); false if ctx or the simulator ended.
func (s *Simulator) sleep(ctx context.Context, d time.Duration) bool {
	if d == 0 {
		return ctx.Err() == nil && s.ctx.Err() == nil
	}
	var timer <-chan time.Time
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timer = t.C
	}
	select {
	case <-timer:
		return true
	case <-ctx.Done():
	case <-s.ctx.Done():
	}
	return false
}

// pickFault takes the first planned fault matching the request, else
// draws a random one for a send. It counts the fault.
func (s *Simulator) pickFault(op FaultOp, reference, key string) (Fault, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, p := range s.faults {
		if !p.matches(op, reference, key) {
			continue
		}
		if p.left > 0 {
			p.left--
			if p.left == 0 {
				s.faults = slices.Delete(s.faults, i, i+1)
			}
		}
		s.stats.Faults[p.Kind]++
		return p.Fault, true
	}
	if op != OpSend {
		return Fault{}, false
	}
	f, ok := s.random.pick(s.rng.Float64(), s.rng.IntN(1<<30))
	if ok {
		s.stats.Faults[f.Kind]++
	}
	return f, ok
}

// admit counts a request, and in count (if not nil) its kind, then
// applies the configured latency. It reports false when the request was
// cut off during it (the connection is then abandoned).
func (s *Simulator) admit(w http.ResponseWriter, r *http.Request, count *int) bool {
	s.mu.Lock()
	s.stats.Requests++
	if count != nil {
		*count++
	}
	d := s.latency
	if s.jitter > 0 {
		d += time.Duration(s.rng.Int64N(int64(s.jitter) + 1))
	}
	s.mu.Unlock()
	if !s.sleep(r.Context(), d) {
		s.abandon(w)
		return false
	}
	return true
}

func (s *Simulator) handleSend(w http.ResponseWriter, r *http.Request) {
	if !s.admit(w, r, &s.stats.Sends) {
		return
	}
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body larger than %d bytes", maxBody))
		}
		return // else the client went away
	}
	var req httpprovider.SendRequest
	if err := json.Unmarshal(raw, &req); err != nil {
		writeError(w, http.StatusBadRequest, "body is not a JSON message")
		return
	}
	if msg := validate(req); msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	key := r.Header.Get("Idempotency-Key")

	f, faulted := s.pickFault(OpSend, req.Reference, key)
	if faulted && s.beforeAccept(w, r, f) {
		return
	}

	rec, status, conflict := s.accept(req, key, faulted && f.Kind == FaultUndeliverable)
	if conflict {
		writeError(w, http.StatusUnprocessableEntity, "Idempotency-Key reused with a different message")
		return
	}
	if faulted {
		switch f.Kind {
		case FaultTimeoutAfterAccept:
			if !s.sleep(r.Context(), cmp.Or(f.Hang, -1)) { // Hang 0: until the client gives up
				s.abandon(w)
				return
			}
		case FaultResetAfterAccept:
			reset(w)
			return
		}
	}
	writeJSON(w, status, httpprovider.MessageInfo{ID: rec.ID, Status: rec.Status})
}

// accept records a new message, or finds the original of a repeat. It
// returns the record, 202 (new) or 200 (repeat), or conflict.
func (s *Simulator) accept(req httpprovider.SendRequest, key string, undeliverable bool) (Message, int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	idem := !s.opts.IdempotencyDisabled && key != ""
	if idem {
		if orig, ok := s.byKey[key]; ok {
			a, b := orig.SendRequest, req
			a.CallbackURL, b.CallbackURL = "", ""
			if a != b {
				return Message{}, 0, true
			}
			s.stats.DuplicatesSuppressed++
			return *orig, http.StatusOK, false
		}
	}
	s.nextID++
	rec := &Message{SendRequest: req, ID: "msg_" + strconv.Itoa(s.nextID), IdempotencyKey: key,
		Status: httpprovider.StatusAccepted, AcceptedAt: time.Now()}
	final, reason := httpprovider.StatusDelivered, ""
	if undeliverable {
		final, reason = httpprovider.StatusFailed, "simulated delivery failure"
	}
	if idem {
		s.byKey[key] = rec
	}
	s.byRef[req.Reference] = append(s.byRef[req.Reference], rec)
	s.msgs = append(s.msgs, rec)
	s.stats.Accepted++
	answer := *rec
	if !s.enqueueCallbacks(rec, final, reason) {
		// No callbacks will move it: it reaches its final status now.
		rec.Status, rec.Reason = final, reason
	}
	return answer, http.StatusAccepted, false
}

func validate(req httpprovider.SendRequest) string {
	switch {
	case req.Channel != "sms" && req.Channel != "email" && req.Channel != "push":
		return "channel must be sms, email or push"
	case req.To == "":
		return "to is required"
	case req.Body == "":
		return "body is required"
	case req.Reference == "":
		return "reference is required"
	}
	return ""
}

func (s *Simulator) handleLookup(w http.ResponseWriter, r *http.Request) {
	if !s.admit(w, r, nil) {
		return
	}
	ref := r.URL.Query().Get("reference")
	if ref == "" {
		writeError(w, http.StatusBadRequest, "reference is required")
		return
	}
	if f, ok := s.pickFault(OpLookup, ref, ref); ok && s.beforeAccept(w, r, f) {
		return
	}
	s.mu.Lock()
	resp := httpprovider.LookupResponse{Messages: []httpprovider.MessageInfo{}}
	for _, rec := range s.byRef[ref] {
		resp.Messages = append(resp.Messages, httpprovider.MessageInfo{ID: rec.ID, Status: rec.Status, Reason: rec.Reason})
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, resp)
}

// beforeAccept plays the part of fault f that comes before the request is
// taken: a status, a delay, a hang or a reset. It reports whether that
// ended the response.
func (s *Simulator) beforeAccept(w http.ResponseWriter, r *http.Request, f Fault) bool {
	switch f.Kind {
	case FaultStatus:
		writeFault(w, f.Status)
	case FaultLatency:
		if s.sleep(r.Context(), f.Delay) {
			return false
		}
		s.abandon(w)
	case FaultTimeoutBeforeAccept:
		if s.sleep(r.Context(), cmp.Or(f.Hang, -1)) { // Hang 0: until the client gives up
			writeError(w, http.StatusGatewayTimeout, "simulated timeout")
		} else {
			s.abandon(w)
		}
	case FaultResetBeforeAccept:
		reset(w)
	default:
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, httpprovider.ErrorResponse{Error: msg})
}

func writeFault(w http.ResponseWriter, status int) {
	if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	writeError(w, status, "simulated fault: "+http.StatusText(status))
}

// abandon ends a request cut short: when the simulator is closing, the
// connection is reset so the client sees no answer; when the client went
// away, there is no one to answer.
func (s *Simulator) abandon(w http.ResponseWriter) {
	if s.ctx.Err() != nil {
		reset(w)
	}
}

// reset drops the connection with a TCP reset instead of answering.
func reset(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		// Not hijackable (HTTP/2): abort the stream instead.
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	conn.Close()
}
