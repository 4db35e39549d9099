// Package twiliotest is a local HTTP fake of the few Twilio Messages API
// endpoints the twilio adapter uses, written from Twilio's documented REST
// API (2010-04-01), for tests:
//
//	POST {base}/2010-04-01/Accounts/{AccountSid}/Messages.json   create (form-encoded)
//	GET  {base}/2010-04-01/Accounts/{AccountSid}/Messages.json   list; To, From,
//	     DateSent, DateSent>, DateSent< (YYYY-MM-DD), PageSize, Page filters;
//	     next_page_uri pages
//
// Both need HTTP basic auth with the account SID and auth token. Errors
// have Twilio's shape: {"code":21211,"message":...,"more_info":...,"status":400}.
//
// The fake records every message it accepted: Count(to, body) is the
// ground truth of how many times a text was sent. Fail queues faults for
// the next create requests: an error status, or accepting the message and
// then never answering (the ambiguous case).
//
// A created message is "sent" at once (date_sent set): the fake has no
// carrier. SetStatus moves it on (delivered, failed, undelivered).
package twiliotest

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Message is a message the fake accepted.
type Message struct {
	SID                 string
	To                  string
	From                string
	MessagingServiceSID string
	Body                string
	StatusCallback      string
	Status              string
	ErrorCode           int
	DateCreated         time.Time
	DateSent            time.Time
}

// Fault is what the fake does with one create request instead of (or
// after) accepting it.
type Fault struct {
	// Status, when non-zero, is answered at once without accepting the
	// message, with Code and Message as Twilio's error body.
	Status  int
	Code    int
	Message string
	// AcceptThenHang accepts and records the message, then never answers
	// (until the client gives up): the response was lost.
	AcceptThenHang bool
	// HangBeforeAccept never answers and records nothing.
	HangBeforeAccept bool
	// Delay, when positive, holds the answer (or, with a Status, the
	// rejection) that long; the message is recorded first. A client that
	// gives up meanwhile has an accepted message and no answer.
	Delay time.Duration
	// AcceptThenStatus, when non-zero, accepts and records the message,
	// then answers this status (with Code and Message) instead of 201, as
	// an API that fails after it took the message does.
	AcceptThenStatus int
}

// Server is the fake. Its zero value is not usable: call New.
type Server struct {
	// URL is the base URL to configure the adapter with.
	URL        string
	AccountSID string
	AuthToken  string

	srv *httptest.Server

	mu      sync.Mutex
	now     func() time.Time
	msgs    []*Message
	faults  []Fault
	decide  func(to string) Fault
	optOut  map[string]bool
	creates int
	lists   int
}

// New starts a fake for account "AC" + 32 hex digits with a random auth
// token, and stops it when t ends.
func New(t testing.TB) *Server {
	t.Helper()
	s := NewServer()
	t.Cleanup(s.Close)
	return s
}

// NewServer starts a fake as New does, outside a test (a local pipeline,
// a chaos run); the caller must Close it.
func NewServer() *Server {
	s := &Server{
		AccountSID: "AC" + randomHex(16),
		AuthToken:  randomHex(16),
		now:        time.Now,
		optOut:     map[string]bool{},
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	return s
}

// Close stops the fake, dropping every open connection.
func (s *Server) Close() {
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// SetDecide installs a source of faults consulted for every create
// request when no queued fault (Fail) is left: it gets the request's To
// and returns the fault to apply (the zero Fault for none). Nil removes it.
func (s *Server) SetDecide(decide func(to string) Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.decide = decide
}

// SetNow replaces the fake's clock (used for date_created and date_sent).
func (s *Server) SetNow(now func() time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = now
}

// Fail queues faults; each create request takes the next one.
func (s *Server) Fail(f ...Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, f...)
}

// OptOut makes create answer 21610 (the recipient unsubscribed) for to.
func (s *Server) OptOut(to string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.optOut[to] = true
}

// SetStatus sets the status (and error code) of the message sid. It
// reports whether the message exists.
func (s *Server) SetStatus(sid, status string, errorCode int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.msgs {
		if m.SID == sid {
			m.Status, m.ErrorCode = status, errorCode
			return true
		}
	}
	return false
}

// Count returns how many accepted messages went to to with body: the
// ground truth of duplicates.
func (s *Server) Count(to, body string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, m := range s.msgs {
		if m.To == to && m.Body == body {
			n++
		}
	}
	return n
}

// Messages returns a copy of every accepted message, oldest first.
func (s *Server) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Message, len(s.msgs))
	for i, m := range s.msgs {
		out[i] = *m
	}
	return out
}

// Requests returns how many create and list requests the fake answered
// (faults included).
func (s *Server) Requests() (creates, lists int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.creates, s.lists
}

func (s *Server) path() string {
	return "/2010-04-01/Accounts/" + s.AccountSID + "/Messages.json"
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != s.path() {
		writeError(w, http.StatusNotFound, 20404, "The requested resource "+r.URL.Path+" was not found")
		return
	}
	user, pass, ok := r.BasicAuth()
	if !ok || user != s.AccountSID || pass != s.AuthToken {
		writeError(w, http.StatusUnauthorized, 20003, "Authenticate")
		return
	}
	switch r.Method {
	case http.MethodPost:
		s.create(w, r)
	case http.MethodGet:
		s.list(w, r)
	default:
		writeError(w, http.StatusMethodNotAllowed, 20004, "Method not allowed")
	}
}

var e164 = regexp.MustCompile(`^\+[1-9][0-9]{6,14}$`)

func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		writeError(w, http.StatusBadRequest, 20001, "Could not parse the form")
		return
	}
	s.mu.Lock()
	s.creates++
	var f Fault
	decide := s.decide
	if len(s.faults) > 0 {
		f, s.faults, decide = s.faults[0], s.faults[1:], nil
	}
	s.mu.Unlock()
	if decide != nil {
		f = decide(r.PostForm.Get("To"))
	}

	switch {
	case f.HangBeforeAccept:
		<-r.Context().Done()
		return
	case f.Status != 0:
		if !wait(r, f.Delay) {
			return
		}
		writeError(w, f.Status, f.Code, f.Message)
		return
	}
	to, body := r.PostForm.Get("To"), r.PostForm.Get("Body")
	from, svc := r.PostForm.Get("From"), r.PostForm.Get("MessagingServiceSid")
	switch {
	case to == "":
		writeError(w, http.StatusBadRequest, 21604, "A 'To' phone number is required.")
		return
	case !e164.MatchString(to):
		writeError(w, http.StatusBadRequest, 21211, "The 'To' number "+to+" is not a valid phone number.")
		return
	case body == "":
		writeError(w, http.StatusBadRequest, 21602, "Message body is required.")
		return
	case from == "" && svc == "":
		writeError(w, http.StatusBadRequest, 21603, "The 'From' phone number is required.")
		return
	}
	s.mu.Lock()
	if s.optOut[to] {
		s.mu.Unlock()
		writeError(w, http.StatusBadRequest, 21610, "Attempt to send to unsubscribed recipient")
		return
	}
	now := s.now().UTC().Truncate(time.Second)
	m := &Message{
		SID: "SM" + randomHex(16), To: to, From: from, MessagingServiceSID: svc, Body: body,
		StatusCallback: r.PostForm.Get("StatusCallback"), Status: "sent", DateCreated: now, DateSent: now,
	}
	s.msgs = append(s.msgs, m)
	res := s.resource(m)
	s.mu.Unlock()

	if f.AcceptThenHang {
		<-r.Context().Done()
		return
	}
	if !wait(r, f.Delay) {
		return
	}
	if f.AcceptThenStatus != 0 {
		writeError(w, f.AcceptThenStatus, f.Code, f.Message)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(res)
}

// resource is a message as the API shows it. Callers hold s.mu.
func (s *Server) resource(m *Message) map[string]any {
	var dateSent, errCode any
	if !m.DateSent.IsZero() {
		dateSent = m.DateSent.Format(time.RFC1123Z)
	}
	if m.ErrorCode != 0 {
		errCode = m.ErrorCode
	}
	var svc any
	if m.MessagingServiceSID != "" {
		svc = m.MessagingServiceSID
	}
	return map[string]any{
		"sid": m.SID, "account_sid": s.AccountSID, "to": m.To, "from": m.From,
		"messaging_service_sid": svc, "body": m.Body, "status": m.Status,
		"direction": "outbound-api", "error_code": errCode,
		"date_created": m.DateCreated.Format(time.RFC1123Z), "date_updated": m.DateCreated.Format(time.RFC1123Z),
		"date_sent": dateSent, "num_segments": "1", "api_version": "2010-04-01",
		"uri": "/2010-04-01/Accounts/" + s.AccountSID + "/Messages/" + m.SID + ".json",
	}
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	day := func(k string) (time.Time, bool, error) {
		v := q.Get(k)
		if v == "" {
			return time.Time{}, false, nil
		}
		d, err := time.Parse("2006-01-02", v)
		return d, true, err
	}
	onDay, hasOn, err1 := day("DateSent")
	after, hasAfter, err2 := day("DateSent>")
	before, hasBefore, err3 := day("DateSent<")
	if err1 != nil || err2 != nil || err3 != nil {
		writeError(w, http.StatusBadRequest, 20001, "DateSent must be YYYY-MM-DD")
		return
	}
	pageSize, page := 50, 0
	if v := q.Get("PageSize"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			writeError(w, http.StatusBadRequest, 20001, "PageSize must be 1 to 1000")
			return
		}
		pageSize = n
	}
	if v := q.Get("Page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			writeError(w, http.StatusBadRequest, 20001, "Page must be a non-negative integer")
			return
		}
		page = n
	}

	s.mu.Lock()
	s.lists++
	var match []map[string]any
	// Newest first, as Twilio lists.
	for i := len(s.msgs) - 1; i >= 0; i-- {
		m := s.msgs[i]
		if (q.Get("To") != "" && m.To != q.Get("To")) || (q.Get("From") != "" && m.From != q.Get("From")) {
			continue
		}
		if hasOn || hasAfter || hasBefore {
			if m.DateSent.IsZero() {
				continue
			}
			d := m.DateSent.UTC().Truncate(24 * time.Hour)
			if (hasOn && !d.Equal(onDay)) || (hasAfter && d.Before(after)) || (hasBefore && d.After(before)) {
				continue
			}
		}
		match = append(match, s.resource(m))
	}
	s.mu.Unlock()

	start := min(page*pageSize, len(match))
	end := min(start+pageSize, len(match))
	var next any
	if end < len(match) {
		nq := url.Values{}
		for k, v := range q {
			nq[k] = v
		}
		nq.Set("Page", strconv.Itoa(page+1))
		nq.Set("PageSize", strconv.Itoa(pageSize))
		next = s.path() + "?" + nq.Encode()
	}
	items := match[start:end]
	if items == nil {
		items = []map[string]any{}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"messages": items, "page": page, "page_size": pageSize,
		"uri": r.URL.RequestURI(), "next_page_uri": next,
	})
}

// wait holds r for d; it reports false when the client went away first.
func wait(r *http.Request, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	}
}

func writeError(w http.ResponseWriter, status, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"code": code, "message": msg, "status": status,
		"more_info": fmt.Sprintf("https://www.twilio.com/docs/errors/%d", code),
	})
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return strings.ToLower(hex.EncodeToString(b))
}
