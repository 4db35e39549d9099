// Package smsgwtest is a stand-in for the in-house SMS gateway that
// package smsgw talks to: an HTTP server with the gateway's API that
// records what it accepted, so that tests count what the gateway
// received rather than what the adapter said.
package smsgwtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// RefusedNumber is a number the gateway refuses for good (422).
const RefusedNumber = "+15550000000"

// UndeliverableNumber is a number the stand-in accepts an SMS to and then
// fails to deliver: a lookup answers its SMS "failed".
const UndeliverableNumber = "+15550000002"

// The stand-in's faulty fronts, under its URL: a send there is accepted
// as anywhere else (Received counts it) and then its answer is lost.
const (
	// AcceptThen500 answers 500 after accepting: a gateway that crashed
	// after it queued the SMS.
	AcceptThen500 = "/accept-then-500"
	// AcceptThenStall never answers after accepting: the caller's
	// deadline passes first.
	AcceptThenStall = "/accept-then-stall"
)

// Gateway is the stand-in. It is safe for concurrent use.
type Gateway struct {
	// URL is the gateway's base URL.
	URL string

	apiKey string
	mu     sync.Mutex
	byRef  map[string]*sms
	posts  int
	down   map[string]bool // numbers answered 503
}

type sms struct {
	ID, To, Text, Ref string
	Requests          int // send requests with the ref, the repeats the gateway dropped included
}

var e164 = regexp.MustCompile(`^\+[1-9][0-9]{6,14}$`)

// Start starts the stand-in on loopback, accepting apiKey, and stops it
// when t ends.
func Start(t testing.TB, apiKey string) *Gateway {
	g := &Gateway{apiKey: apiKey, byRef: map[string]*sms{}, down: map[string]bool{}}
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	g.URL = srv.URL
	return g
}

// Down makes the gateway answer 503 to every send to the number to, as
// an outage before acceptance would.
func (g *Gateway) Down(to string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.down[to] = true
}

// Received returns how many SMS with client_ref ref the gateway sent:
// 1 once it accepted the ref, whatever the repeats it dropped.
func (g *Gateway) Received(ref string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.byRef[ref] != nil {
		return 1
	}
	return 0
}

// Requests returns how many send requests with client_ref ref the
// gateway accepted, the repeats it dropped included: what a caller that
// relied on no deduplication of the gateway's would have sent.
func (g *Gateway) Requests(ref string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	if m := g.byRef[ref]; m != nil {
		return m.Requests
	}
	return 0
}

// Texts returns the text of every SMS accepted, by client_ref.
func (g *Gateway) Texts() map[string]string {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make(map[string]string, len(g.byRef))
	for ref, m := range g.byRef {
		out[ref] = m.Text
	}
	return out
}

// Posts returns how many send requests the gateway answered, repeats
// and refusals included.
func (g *Gateway) Posts() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.posts
}

// ServeHTTP serves the gateway's API (package smsgw's documentation).
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("X-Api-Key") != g.apiKey {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	front := ""
	for _, f := range []string{AcceptThen500, AcceptThenStall} {
		if p, ok := strings.CutPrefix(r.URL.Path, f); ok {
			front, r.URL.Path = f, p
		}
	}
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v2/sms":
		if g.send(w, r, front) {
			<-r.Context().Done() // accepted; the answer never comes
		}
	case r.Method == http.MethodGet && r.URL.Path == "/v2/sms":
		g.lookup(w, r)
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

// send serves one send request through front (one of the faulty fronts,
// or "" for the gateway itself); it reports whether the answer must
// stall.
func (g *Gateway) send(w http.ResponseWriter, r *http.Request, front string) (stall bool) {
	var in struct {
		To        string `json:"to"`
		Text      string `json:"text"`
		ClientRef string `json:"client_ref"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		answer(w, http.StatusBadRequest, map[string]string{"error": "malformed JSON"})
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.posts++
	switch {
	case g.down[in.To]:
		w.WriteHeader(http.StatusServiceUnavailable)
	case !e164.MatchString(in.To) || in.To == RefusedNumber:
		answer(w, http.StatusUnprocessableEntity, map[string]string{"error": "invalid number"})
	case in.Text == "" || in.ClientRef == "":
		answer(w, http.StatusBadRequest, map[string]string{"error": "text and client_ref are required"})
	default:
		m := g.byRef[in.ClientRef]
		if m == nil { // a repeat of a client_ref sends nothing new
			m = &sms{ID: fmt.Sprintf("sms-%d", len(g.byRef)+1), To: in.To, Text: in.Text, Ref: in.ClientRef}
			g.byRef[in.ClientRef] = m
		}
		m.Requests++
		switch front {
		case AcceptThen500:
			w.WriteHeader(http.StatusInternalServerError)
		case AcceptThenStall:
			return true
		default:
			answer(w, http.StatusOK, map[string]string{"sms_id": m.ID})
		}
	}
	return false
}

func (g *Gateway) lookup(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	defer g.mu.Unlock()
	items := []map[string]string{}
	if m := g.byRef[r.URL.Query().Get("client_ref")]; m != nil {
		if m.To == UndeliverableNumber {
			items = append(items, map[string]string{"sms_id": m.ID, "state": "failed", "error": "handset unreachable"})
		} else {
			items = append(items, map[string]string{"sms_id": m.ID, "state": "queued"})
		}
	}
	answer(w, http.StatusOK, map[string]any{"items": items})
}

func answer(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
