package chaos

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sendonce/sendonce/internal/localpipeline"
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
	// Lost is, per ledger operation ("claim", "takeover", "release"; see
	// Operation), the probability that its answer is lost for good: the
	// write happens (a release's does not: it never reaches DynamoDB), the
	// connection is closed without an answer, and the SDK's retries of the
	// same request are dropped too, so the function sees an error it
	// cannot tell from a write that never happened.
	Lost map[string]float64
	// LostKill is the fraction of those lost answers after which the
	// worker that sent the request is killed (Proxy.Kill) before it can
	// react: it never releases what it may have claimed.
	LostKill float64
}

// ProxyStats are a Proxy's totals.
type ProxyStats struct {
	// Requests counts every request; Throttled those answered with a
	// throttling error; Dropped those forwarded whose answer was lost;
	// Bursts the burst windows that saw at least one request.
	Requests, Throttled, Dropped, Bursts int64
	// Lost counts answers lost for good, by operation; Retried the SDK
	// retries of those that were dropped unforwarded; Killed the workers
	// killed right after a lost answer.
	Lost            map[string]int64
	Retried, Killed int64
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
	retried, killed                      atomic.Int64

	// Kill, if set, kills the worker behind tag (see Listen) and reports
	// whether it did.
	Kill func(tag string) bool

	lostMu   sync.Mutex
	lost     map[string]int64
	lostKeys map[string][]string // message key → "claim", "takeover+kill", ...
	// recent are the lost answers per worker tag, for Killed.
	recent map[string][]lostRef
	holes  map[[sha256.Size]byte]*hole
	srvs   []*http.Server
	// journal lists each answer lost for good, each death and each act
	// after a loss, in order (Journal).
	journal []string
}

// Journal returns, one line each, every answer lost for good (when, what,
// which key, which worker), every death recorded and every release or
// mark after a loss: the evidence behind LostKeys.
func (p *Proxy) Journal() []string {
	p.lostMu.Lock()
	defer p.lostMu.Unlock()
	return slices.Clone(p.journal)
}

// maxInvocation bounds how long before a worker's death a loss it had not
// acted on counts as lost right before it: the reconciler's timeout in the
// local pipeline, the longest any function invocation runs there.
const maxInvocation = localpipeline.DefaultReconcilerTimeout

// lostRef is one entry of lostKeys, with when it was lost: kept (in
// recent) until its worker acts on the key again (a release or a mark
// reaches the proxy) or dies (Killed, Died).
type lostRef struct {
	key string
	i   int
	at  time.Time
}

// hole drops the retries of a request whose answer was lost.
type hole struct {
	left  int
	until time.Time
}

// NewProxy returns a Proxy forwarding to target (DynamoDB Local's URL),
// drawing its faults from a RNG seeded with seed.
func NewProxy(target string, opts StormOptions, seed uint64) *Proxy {
	if opts.Window <= 0 {
		opts.Window = time.Second
	}
	return &Proxy{
		target:   strings.TrimRight(target, "/"),
		opts:     opts,
		client:   &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}},
		rng:      rand.New(rand.NewPCG(seed, seed^0xd1a0)),
		lost:     map[string]int64{},
		lostKeys: map[string][]string{},
		recent:   map[string][]lostRef{},
		holes:    map[[sha256.Size]byte]*hole{},
	}
}

// keyRE finds a message's idempotency key in a request.
var keyRE = regexp.MustCompile(`v1_[0-9a-f]{64}`)

// LostKeys returns, per message key, the operations whose answers were
// lost for good, in order; "+kill" marks one after which the worker was
// killed before it acted on the key again (by the proxy, by the crasher,
// or by the emulator at the function's timeout: Killed, Died), and
// "takeover(unreleased)" a TakeOver of a row that was not released (its
// earlier attempt's outcome was unknown before the answer was lost; the
// update keeps the lookup window instead of restarting it).
func (p *Proxy) LostKeys() map[string][]string {
	p.lostMu.Lock()
	defer p.lostMu.Unlock()
	out := make(map[string][]string, len(p.lostKeys))
	for k, v := range p.lostKeys {
		out[k] = slices.Clone(v)
	}
	return out
}

// Listen serves the proxy on a new loopback port for the requests of one
// worker, named tag, and returns its URL: a worker configured with it
// can be told apart (and killed after a lost answer). Close stops every
// listener.
func (p *Proxy) Listen(tag string) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("chaos: proxy listen: %w", err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { p.serve(w, r, tag) }), ReadHeaderTimeout: 10 * time.Second}
	p.lostMu.Lock()
	p.srvs = append(p.srvs, srv)
	p.lostMu.Unlock()
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String(), nil
}

// Close stops the listeners Listen started.
func (p *Proxy) Close() {
	p.lostMu.Lock()
	defer p.lostMu.Unlock()
	for _, s := range p.srvs {
		_ = s.Close()
	}
	p.srvs = nil
}

// Operation names the ledger operation a DynamoDB request carries, from
// its X-Amz-Target and the shape of its body: "claim" (a conditional
// PutItem), "takeover" (an UpdateItem that counts an attempt and removes
// the released mark), "release" (an UpdateItem that sets it), "mark" (one
// that sets a state), "update" (any other UpdateItem), or the target's
// operation in lower case ("getitem", "query", ...).
func Operation(target string, body []byte) string {
	_, op, _ := strings.Cut(target, ".")
	op = strings.ToLower(op)
	switch op {
	case "putitem":
		return "claim"
	case "updateitem":
	default:
		return op
	}
	var req struct {
		UpdateExpression string `json:"UpdateExpression"`
	}
	_ = json.Unmarshal(body, &req)
	u := req.UpdateExpression
	switch {
	case strings.Contains(u, "#attempts + ") || strings.Contains(u, "#attempts = #attempts"):
		return "takeover"
	case strings.HasPrefix(strings.TrimSpace(u), "SET #released"):
		return "release"
	case strings.Contains(u, "#state = "):
		return "mark"
	}
	return "update"
}

// lose decides whether this request's answer is lost for good, and
// whether a hole is already swallowing its retries.
func (p *Proxy) lose(tag, op string, body []byte) (lose, retry bool) {
	sum := sha256.Sum256(body)
	p.lostMu.Lock()
	defer p.lostMu.Unlock()
	if h, ok := p.holes[sum]; ok {
		if h.left > 0 && time.Now().Before(h.until) {
			h.left--
			return false, true
		}
		delete(p.holes, sum)
	}
	rate := p.opts.Lost[op]
	if rate <= 0 || !p.enabled.Load() {
		return false, false
	}
	p.mu.Lock()
	hit := p.rng.Float64() < rate
	p.mu.Unlock()
	if !hit {
		return false, false
	}
	p.lost[op]++
	if k := keyRE.Find(body); k != nil {
		name := op
		if op == "takeover" && bytes.Contains(body, []byte("if_not_exists(#lookup_from")) {
			name = "takeover(unreleased)"
		}
		p.lostKeys[string(k)] = append(p.lostKeys[string(k)], name)
		p.journal = append(p.journal, fmt.Sprintf("%s lost %s %s by %s", time.Now().UTC().Format(time.RFC3339Nano), name, k, tag))
		p.recent[tag] = append(p.recent[tag], lostRef{key: string(k), i: len(p.lostKeys[string(k)]) - 1, at: time.Now()})
	}
	p.holes[sum] = &hole{left: 10, until: time.Now().Add(30 * time.Second)}
	return true, false
}

// afterLoss kills, as drawn, the worker whose answer was just lost,
// before the answer could have reached it.
func (p *Proxy) afterLoss(tag string, body []byte) {
	if tag == "" || !p.killAfterLoss() || !p.Kill(tag) {
		return
	}
	p.killed.Add(1)
	// Every answer the worker lost and had not acted on yet, this one and
	// those of other records of its batch, was lost right before its death.
	p.Killed(tag)
}

// Killed records that the worker behind tag was killed now (by the
// crasher): each answer it lost and had not acted on since (no release or
// mark of that key reached the proxy from it) counts as lost right before
// its death, however long it had been retrying.
func (p *Proxy) Killed(tag string) { p.Died(tag, time.Now()) }

// Died records that the worker behind tag stopped at at (killed, or its
// invocation ran past the function's timeout, which stops the process):
// each answer it lost before at, within maxInvocation (so in the same
// invocation), and had not acted on counts as lost right before its death.
func (p *Proxy) Died(tag string, at time.Time) {
	p.lostMu.Lock()
	defer p.lostMu.Unlock()
	p.journal = append(p.journal, fmt.Sprintf("%s died %s (%d losses not acted on)", at.UTC().Format(time.RFC3339Nano), tag, len(p.recent[tag])))
	keep := p.recent[tag][:0]
	for _, r := range p.recent[tag] {
		if r.at.After(at) {
			keep = append(keep, r)
			continue
		}
		if at.Sub(r.at) > maxInvocation {
			continue // lost in an earlier invocation, which ended without acting on it
		}
		if ops := p.lostKeys[r.key]; r.i < len(ops) && !strings.HasSuffix(ops[r.i], "+kill") {
			ops[r.i] += "+kill"
		}
	}
	p.recent[tag] = keep
}

// acted records that the worker behind tag sent a release or a mark of the
// key in body: it lived on after the answers of that key it lost, which
// no later death of it explains.
func (p *Proxy) acted(tag string, body []byte) {
	k := keyRE.Find(body)
	if k == nil {
		return
	}
	p.lostMu.Lock()
	defer p.lostMu.Unlock()
	rs := p.recent[tag]
	keep := rs[:0]
	for _, r := range rs {
		if r.key != string(k) {
			keep = append(keep, r)
		}
	}
	if len(keep) < len(rs) {
		p.journal = append(p.journal, fmt.Sprintf("%s acted %s by %s", time.Now().UTC().Format(time.RFC3339Nano), k, tag))
	}
	p.recent[tag] = keep
}

func (p *Proxy) killAfterLoss() bool {
	if p.opts.LostKill <= 0 || p.Kill == nil {
		return false
	}
	p.mu.Lock()
	hit := p.rng.Float64() < p.opts.LostKill
	p.mu.Unlock()
	return hit
}

// Enable turns fault injection on or off.
func (p *Proxy) Enable(on bool) { p.enabled.Store(on) }

// Stats returns the totals so far.
func (p *Proxy) Stats() ProxyStats {
	p.lostMu.Lock()
	lost := make(map[string]int64, len(p.lost))
	for k, v := range p.lost {
		lost[k] = v
	}
	p.lostMu.Unlock()
	return ProxyStats{Requests: p.requests.Load(), Throttled: p.throttled.Load(), Dropped: p.dropped.Load(), Bursts: p.bursts.Load(),
		Lost: lost, Retried: p.retried.Load(), Killed: p.killed.Load()}
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
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) { p.serve(w, r, "") }

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request, tag string) {
	p.requests.Add(1)
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	op := Operation(r.Header.Get("X-Amz-Target"), body)
	if op == "release" || op == "mark" {
		p.acted(tag, body)
	}
	lost, retry := p.lose(tag, op, body)
	if retry {
		p.retried.Add(1)
		hangUp(w) // a retry of a request whose answer was lost: lost too
		return
	}
	throttle, drop, typ := p.decide(time.Now())
	if lost {
		throttle, drop = false, true
		if op == "release" {
			// A release that never reaches DynamoDB: the claim stays held
			// unless the worker tries again.
			p.dropped.Add(1)
			p.afterLoss(tag, body)
			hangUp(w)
			return
		}
	}
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
		if lost {
			p.afterLoss(tag, body)
		}
		hangUp(w) // the write happened; its answer is lost
		return
	}
	localpipeline.Answer(w, resp.StatusCode, resp.Header, out)
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
