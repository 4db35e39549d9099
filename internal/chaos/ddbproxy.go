package chaos

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// StormOptions configures the DynamoDB error storm of a Proxy.
type StormOptions struct {
	// BurstRate is the probability that a one-second window is a burst.
	BurstRate float64
	// BurstFailure is the fraction of requests answered with a throttling
	// error during a burst.
	BurstFailure float64
	// DropRate is the probability, at any time, that a request is
	// forwarded (the write happens) and its response is then lost: the
	// connection is closed without an answer.
	DropRate float64
	// Window is the length of one burst window; zero means one second.
	Window time.Duration
}

// ProxyStats are a Proxy's totals.
type ProxyStats struct {
	// Requests counts every request; Throttled those answered with a
	// throttling error; Dropped those forwarded whose answer was lost;
	// Bursts the burst windows that saw at least one request.
	Requests, Throttled, Dropped, Bursts int64
}

// The throttling errors a Proxy answers with, in turn, as DynamoDB sends
// them (HTTP 400, JSON 1.0).
var throttleTypes = []string{
	"com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException",
	"com.amazonaws.dynamodb.v20120810#ThrottlingException",
}

// Proxy is a reverse proxy in front of DynamoDB Local that injects an
// error storm: throttling errors in bursts and lost responses. The
// functions reach DynamoDB through it (AWS_ENDPOINT_URL_DYNAMODB), so the
// SDK's retries and the ledger's recognition of its own retried writes
// meet real failures. Faults are off until Enable.
type Proxy struct {
	target string
	opts   StormOptions
	client *http.Client

	enabled atomic.Bool

	mu          sync.Mutex
	rng         *rand.Rand
	window      time.Time // start of the current window
	burst, seen bool

	requests, throttled, dropped, bursts atomic.Int64
}

// NewProxy returns a Proxy forwarding to target (DynamoDB Local's URL),
// drawing its faults from a RNG seeded with seed.
func NewProxy(target string, opts StormOptions, seed uint64) *Proxy {
	if opts.Window <= 0 {
		opts.Window = time.Second
	}
	return &Proxy{
		target: strings.TrimRight(target, "/"),
		opts:   opts,
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}},
		rng:    rand.New(rand.NewPCG(seed, seed^0xd1a0)),
	}
}

// Enable turns fault injection on or off.
func (p *Proxy) Enable(on bool) { p.enabled.Store(on) }

// Stats returns the totals so far.
func (p *Proxy) Stats() ProxyStats {
	return ProxyStats{Requests: p.requests.Load(), Throttled: p.throttled.Load(), Dropped: p.dropped.Load(), Bursts: p.bursts.Load()}
}

// decide draws the fate of one request: throttle, drop or neither.
func (p *Proxy) decide(now time.Time) (throttle, drop bool, typ string) {
	if !p.enabled.Load() {
		return false, false, ""
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if now.Sub(p.window) >= p.opts.Window {
		p.window = now.Truncate(p.opts.Window)
		p.burst = p.rng.Float64() < p.opts.BurstRate
		p.seen = false
	}
	if p.burst && !p.seen {
		p.seen = true
		p.bursts.Add(1)
	}
	if p.burst && p.rng.Float64() < p.opts.BurstFailure {
		return true, false, throttleTypes[p.rng.IntN(len(throttleTypes))]
	}
	return false, p.rng.Float64() < p.opts.DropRate, ""
}

// ServeHTTP forwards r to DynamoDB Local, or fails it as decided.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.requests.Add(1)
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	throttle, drop, typ := p.decide(time.Now())
	if throttle {
		p.throttled.Add(1)
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.Header().Set("x-amzn-RequestId", fmt.Sprintf("chaos-%d", p.requests.Load()))
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"__type":%q,"message":"chaos: the request rate is too high for this table"}`, typ)
		return
	}
	req, err := http.NewRequestWithContext(r.Context(), r.Method, p.target+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, "chaos proxy: bad request", http.StatusBadGateway)
		return
	}
	req.Header = r.Header.Clone()
	req.Host = r.Host
	req.GetBody = nil // forward each request once; the SDK does the retrying
	resp, err := p.client.Do(req)
	if err != nil {
		hangUp(w)
		return
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil || drop {
		if drop {
			p.dropped.Add(1)
		}
		hangUp(w) // the write happened; its answer is lost
		return
	}
	for k, vs := range resp.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(out)
}

// hangUp closes the client's connection without an answer.
func hangUp(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			_ = conn.Close()
			return
		}
	}
	panic(http.ErrAbortHandler)
}
