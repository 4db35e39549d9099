package chaos

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/sendonce/sendonce/internal/localpipeline"
)

// Router is the generic HTTP provider's address as the functions see it:
// it routes each send to the simulator of its channel (so one channel can
// be served by a provider that ignores Idempotency-Key) and answers a
// lookup from every simulator (a key belongs to one channel, so at most
// one of them knows it). A simulator's dropped connection is passed on as
// a dropped connection, so the adapter sees what it would have seen.
type Router struct {
	client *http.Client

	mu       sync.RWMutex
	channels map[string]string // channel → simulator base URL
	all      []string

	inFlight, clientGone atomic.Int64
}

// NewRouter returns a Router with no routes; add them with Route.
func NewRouter() *Router {
	return &Router{client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}, channels: map[string]string{}}
}

// Route sends channel's messages to the simulator at base.
func (rt *Router) Route(channel, base string) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	base = strings.TrimRight(base, "/")
	rt.channels[channel] = base
	for _, b := range rt.all {
		if b == base {
			return
		}
	}
	rt.all = append(rt.all, base)
}

// InFlight returns the number of sends and lookups being served now.
func (rt *Router) InFlight() int64 { return rt.inFlight.Load() }

// ClientGone returns how many requests lost their client before the
// simulator answered (a provider timeout or a killed function).
func (rt *Router) ClientGone() int64 { return rt.clientGone.Load() }

// ServeHTTP routes POST and GET /messages.
func (rt *Router) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rt.inFlight.Add(1)
	defer rt.inFlight.Add(-1)
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return
	}
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/messages":
		var m struct {
			Channel string `json:"channel"`
		}
		_ = json.Unmarshal(body, &m)
		rt.mu.RLock()
		base, ok := rt.channels[m.Channel]
		rt.mu.RUnlock()
		if !ok {
			http.Error(w, `{"error":"no simulator for this channel"}`, http.StatusBadRequest)
			return
		}
		status, hdr, out, ok := rt.forward(r, base, body)
		if !ok {
			localpipeline.HangUp(w)
			return
		}
		localpipeline.Answer(w, status, hdr, out)
	case r.Method == http.MethodGet && r.URL.Path == "/messages":
		rt.mu.RLock()
		all := append([]string(nil), rt.all...)
		rt.mu.RUnlock()
		var merged struct {
			Messages []json.RawMessage `json:"messages"`
		}
		merged.Messages = []json.RawMessage{}
		for _, base := range all {
			status, hdr, out, ok := rt.forward(r, base, nil)
			if !ok {
				localpipeline.HangUp(w)
				return
			}
			if status != http.StatusOK {
				localpipeline.Answer(w, status, hdr, out)
				return
			}
			var page struct {
				Messages []json.RawMessage `json:"messages"`
			}
			if err := json.Unmarshal(out, &page); err != nil {
				http.Error(w, `{"error":"bad lookup answer"}`, http.StatusBadGateway)
				return
			}
			merged.Messages = append(merged.Messages, page.Messages...)
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(merged)
	default:
		http.NotFound(w, r)
	}
}

// forward sends r (with body) to base; ok is false when the simulator
// gave no answer (dropped connection) or the client went away.
func (rt *Router) forward(r *http.Request, base string, body []byte) (int, http.Header, []byte, bool) {
	status, hdr, out, err := localpipeline.Forward(r.Context(), rt.client, r, base+r.URL.RequestURI(), body)
	if err != nil && r.Context().Err() != nil {
		rt.clientGone.Add(1)
	}
	return status, hdr, out, err == nil
}
