package ddbfront

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"regexp"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sendonce/sendonce/internal/localpipeline"
)

// Storm configures the DynamoDB error storm of a Front: throttling in
// bursts and lost answers, so that the SDK's retries and the ledger's
// recognition of its own retried writes meet real failures.
type Storm struct {
	// BurstRate is the probability that a one-second window is a burst.
	BurstRate float64
	// BurstFailure is the fraction of requests answered with a throttling
	// error during a burst.
	BurstFailure float64
	// DropRate is the probability, at any time, that a request is
	// forwarded (the write happens) and its response is then lost: the
	// connection is closed without an answer.
	DropRate float64
	// Lost is, per ledger operation ("claim", "takeover", "release"; see
	// Operation), the probability that its answer is lost for good: the
	// write happens (a release's does not: it never reaches DynamoDB), the
	// connection is closed without an answer, and the SDK's retries of the
	// same request are dropped too, so the function sees an error it
	// cannot tell from a write that never happened.
	Lost map[string]float64
	// LostKill is the fraction of those lost answers after which the
	// worker that sent the request is killed (Front.Kill) before it can
	// react: it never releases what it may have claimed.
	LostKill float64
}

// Stats are a Front's fault totals.
type Stats struct {
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

// The throttling errors a Front answers with, in turn, as DynamoDB sends
// them (HTTP 400, JSON 1.0).
var throttleTypes = []string{
	"com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException",
	"com.amazonaws.dynamodb.v20120810#ThrottlingException",
}

// MaxInvocation bounds how long before a worker's death a loss it had not
// acted on counts as lost right before it: the reconciler's timeout in the
// local pipeline, the longest any function invocation runs there.
const MaxInvocation = localpipeline.DefaultReconcilerTimeout

// stormState is a Front's fault state.
type stormState struct {
	requests, throttled, dropped, bursts atomic.Int64
	retried, killed                      atomic.Int64

	mu          sync.Mutex
	rng         *rand.Rand
	window      time.Time // start of the current window
	burst, seen bool
	lost        map[string]int64
	lostKeys    map[string][]*lostAnswer // by message key
	// pending are, per worker tag, what it has not acted on (Killed,
	// DiedHolding).
	pending map[string][]pending
	holes   map[[sha256.Size]byte]*hole
	// journal lists each answer lost for good, each death and each act
	// after a loss, in order (Journal).
	journal []string
	// applied holds the claim id of every Claim and TakeOver that
	// DynamoDB applied while answers may be lost (Storm.Lost): a lost
	// retry whose condition failed because its own first try had applied
	// is not unapplied.
	applied map[string]bool
	// diedHolding are the keys of the claims whose worker died holding
	// them, by claim id (DiedHolding): a release or mark the worker sent
	// before it died may reach the front after its death was recorded,
	// and takes its claim off.
	diedHolding map[string]string
}

func (s *stormState) init(seed uint64) {
	s.rng = rand.New(rand.NewPCG(seed, seed^0xd1a0))
	s.lost, s.lostKeys = map[string]int64{}, map[string][]*lostAnswer{}
	s.pending, s.holes = map[string][]pending{}, map[[sha256.Size]byte]*hole{}
	s.applied, s.diedHolding = map[string]bool{}, map[string]string{}
}

// lostAnswer is an answer lost for good: its operation ("claim",
// "takeover", "takeover(unreleased)", "release"), whether DynamoDB refused
// the write (unapplied: a retry's condition failed, and not because its own
// first try had applied) and whether its worker died before it acted on the
// key again (killed).
type lostAnswer struct {
	op                string
	unapplied, killed bool
}

// String names a lost answer as LostKeys does: "claim",
// "takeover(unapplied)", "claim(unapplied)+kill", ...
func (a *lostAnswer) String() string {
	s := a.op
	if a.unapplied {
		s += "(unapplied)"
	}
	if a.killed {
		s += "+kill"
	}
	return s
}

// pending is something of a key's that a worker has not acted on (no
// release or mark of the key reached the front from it since), kept
// until it does or dies (Killed, Died): an answer it lost for good, or a
// claim (Claim, TakeOver) DynamoDB applied for it, with its id.
type pending struct {
	key  string
	lost *lostAnswer // nil for a claim
	id   string      // the claim's; "" for a lost answer
	at   time.Time
}

// hole drops the retries of a request whose answer was lost.
type hole struct {
	left  int
	until time.Time
}

// keyRE finds a message's idempotency key in a request.
var keyRE = regexp.MustCompile(`v1_[0-9a-f]{64}`)

// Journal returns, one line each, every answer lost for good (when, what,
// which key, which worker), every death recorded and every release or
// mark after a loss: the evidence behind LostKeys.
func (f *Front) Journal() []string {
	f.storm.mu.Lock()
	defer f.storm.mu.Unlock()
	return slices.Clone(f.storm.journal)
}

// LostKeys returns, per message key, the operations whose answers were
// lost for good, in order; "+kill" marks one after which the worker was
// killed before it acted on the key again (by the front, by the crasher,
// or by the emulator at the function's timeout: Killed, Died), and
// "takeover(unreleased)" a TakeOver of a row that was not released (its
// earlier attempt's outcome was unknown before the answer was lost; the
// update keeps the lookup window instead of restarting it).
func (f *Front) LostKeys() map[string][]string {
	f.storm.mu.Lock()
	defer f.storm.mu.Unlock()
	out := make(map[string][]string, len(f.storm.lostKeys))
	for k, as := range f.storm.lostKeys {
		for _, a := range as {
			out[k] = append(out[k], a.String())
		}
	}
	return out
}

// note adds a line to the journal, at at. The caller holds s.mu.
func (s *stormState) note(at time.Time, format string, args ...any) {
	s.journal = append(s.journal, at.UTC().Format(time.RFC3339Nano)+" "+fmt.Sprintf(format, args...))
}

// lose decides whether this request's answer is lost for good, and
// whether a hole is already swallowing its retries. ref.lost is the entry
// it added to LostKeys (nil when it added none).
func (f *Front) lose(tag, op string, body []byte) (lose bool, ref pending, retry bool) {
	s := &f.storm
	sum := sha256.Sum256(body)
	s.mu.Lock()
	defer s.mu.Unlock()
	if h, ok := s.holes[sum]; ok {
		if h.left > 0 && time.Now().Before(h.until) {
			h.left--
			return false, pending{}, true
		}
		delete(s.holes, sum)
	}
	rate := f.opts.Storm.Lost[op]
	if rate <= 0 || !f.enabled.Load() {
		return false, pending{}, false
	}
	hit := s.rng.Float64() < rate
	if !hit {
		return false, pending{}, false
	}
	s.lost[op]++
	if k := keyRE.Find(body); k != nil {
		a := &lostAnswer{op: op}
		if op == "takeover" && bytes.Contains(body, []byte("if_not_exists(#lookup_from")) {
			a.op = "takeover(unreleased)"
		}
		s.lostKeys[string(k)] = append(s.lostKeys[string(k)], a)
		ref = pending{key: string(k), lost: a, at: time.Now()}
		s.note(ref.at, "lost %s %s by %s", a.op, k, tag)
		s.pending[tag] = append(s.pending[tag], ref)
	}
	s.holes[sum] = &hole{left: 10, until: time.Now().Add(30 * time.Second)}
	return true, ref, false
}

// settled records what DynamoDB answered to a Claim or TakeOver (op) the
// front forwarded for the worker behind tag, whether or not the answer
// reaches it. One that applied: its claim id, and that the worker holds
// the row until it acts on the key again or dies (DiedHolding). The lost
// one behind ref (ref.lost nil for none), when DynamoDB refused it for good:
// "(unapplied)" in LostKeys. It is refused for good when its condition
// failed, the row (the refusal's old item) is gone or held by another
// claim id, and no earlier try of it applied.
func (f *Front) settled(tag, op string, body []byte, status int, out []byte, ref pending) {
	if op != "claim" && op != "takeover" || len(f.opts.Storm.Lost) == 0 {
		return
	}
	id := claimIDOf(op, body)
	if id == "" {
		return
	}
	s := &f.storm
	s.mu.Lock()
	defer s.mu.Unlock()
	if status == http.StatusOK {
		s.applied[id] = true
		if k := keyRE.Find(body); k != nil && tag != "" {
			s.pending[tag] = append(s.pending[tag], pending{key: string(k), id: id, at: time.Now()})
		}
		return
	}
	if ref.lost == nil || s.applied[id] || status != http.StatusBadRequest || !bytes.Contains(out, []byte("ConditionalCheckFailed")) {
		return
	}
	var refused struct{ Item map[string]stringValue }
	_ = json.Unmarshal(out, &refused)
	if refused.Item["claim_id"].S == id {
		return // the row is this claim's after all
	}
	if !ref.lost.unapplied {
		ref.lost.unapplied = true
		s.note(time.Now(), "unapplied %s %s (%s refused: the row holds another claim)", op, ref.key, id)
	}
}

// claimIDOf returns the claim id a ledger operation's request names: the
// one a Claim (its item's claim_id) or a TakeOver (its :new value) asks
// for, the one a release or a mark presents (its :claim value); "" when
// body names none.
func claimIDOf(op string, body []byte) string {
	var req struct {
		Item   map[string]stringValue
		Values map[string]stringValue `json:"ExpressionAttributeValues"`
	}
	_ = json.Unmarshal(body, &req)
	switch op {
	case "claim":
		return req.Item["claim_id"].S
	case "takeover":
		return req.Values[":new"].S
	}
	return req.Values[":claim"].S
}

// stringValue is a string AttributeValue in DynamoDB's JSON protocol
// ({"S":"..."}); S is "" for another type.
type stringValue struct{ S string }

// afterLoss kills, as drawn, the worker whose answer was just lost,
// before the answer could have reached it.
func (f *Front) afterLoss(tag string) {
	if tag == "" || f.Kill == nil || !f.storm.draw(f.opts.Storm.LostKill) || !f.Kill(tag) {
		return
	}
	f.storm.killed.Add(1)
	// Every answer the worker lost and had not acted on yet, this one and
	// those of other records of its batch, was lost right before its death.
	f.Killed(tag)
}

// Killed records that the worker behind tag was killed now (by the
// crasher): each answer it lost and had not acted on since (no release or
// mark of that key reached the front from it) counts as lost right before
// its death, however long it had been retrying.
func (f *Front) Killed(tag string) { f.Died(tag, time.Now()) }

// Died records that the worker behind tag stopped at at (killed, or its
// invocation ran past the function's timeout, which stops the process):
// each answer it lost and each claim DynamoDB applied for it before at,
// within MaxInvocation (so in the same invocation), that it had not acted
// on counts as lost right before its death, or held when it died.
func (f *Front) Died(tag string, at time.Time) {
	s := &f.storm
	s.mu.Lock()
	defer s.mu.Unlock()
	s.note(at, "died %s (%d losses or claims not acted on)", tag, len(s.pending[tag]))
	keep := s.pending[tag][:0]
	for _, p := range s.pending[tag] {
		switch {
		case p.at.After(at):
			keep = append(keep, p)
		case at.Sub(p.at) > MaxInvocation:
			// In an earlier invocation, which ended without acting on it.
		case p.lost != nil:
			p.lost.killed = true
		default:
			s.diedHolding[p.id] = p.key
			s.note(at, "died holding %s: %s", p.key, tag)
		}
	}
	s.pending[tag] = keep
}

// DiedHolding returns the keys whose row a worker died holding: DynamoDB
// applied its Claim or TakeOver, and it died (Killed, Died) within the
// same invocation before a release or a mark of the key reached the
// front from it (one under that claim that it sent before it died counts
// however late it reaches the front). Nobody can know whether it sent:
// the row is ambiguous, whatever its worker's logs say (it may have died
// before it wrote any).
// Claims are followed only while answers may be lost (Storm.Lost).
func (f *Front) DiedHolding() map[string]bool {
	f.storm.mu.Lock()
	defer f.storm.mu.Unlock()
	out := map[string]bool{}
	for _, key := range f.storm.diedHolding {
		out[key] = true
	}
	return out
}

// acted records that the worker behind tag sent a release or a mark of the
// key in body: it lived on after the answers of that key it lost, which
// no later death of it explains, and no longer holds a claim of it that
// it took.
func (s *stormState) acted(tag, op string, body []byte) {
	k := keyRE.Find(body)
	if k == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.pending[tag])
	s.pending[tag] = slices.DeleteFunc(s.pending[tag], func(p pending) bool {
		return p.key == string(k)
	})
	if len(s.pending[tag]) < n {
		s.note(time.Now(), "acted %s by %s", k, tag)
	}
	if id := claimIDOf(op, body); s.diedHolding[id] != "" {
		delete(s.diedHolding, id)
		s.note(time.Now(), "acted %s by %s after its death: it did not die holding claim %s", k, tag, id)
	}
}

// draw reports true with probability p.
func (s *stormState) draw(p float64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return p > 0 && s.rng.Float64() < p
}

// Stats returns the fault totals so far.
func (f *Front) Stats() Stats {
	s := &f.storm
	s.mu.Lock()
	lost := maps.Clone(s.lost)
	s.mu.Unlock()
	return Stats{Requests: s.requests.Load(), Throttled: s.throttled.Load(), Dropped: s.dropped.Load(), Bursts: s.bursts.Load(),
		Lost: lost, Retried: s.retried.Load(), Killed: s.killed.Load()}
}

// decide draws the fate of one request: throttle, drop or neither.
func (f *Front) decide(now time.Time) (throttle, drop bool, typ string) {
	if !f.enabled.Load() {
		return false, false, ""
	}
	s, o := &f.storm, f.opts.Storm
	s.mu.Lock()
	defer s.mu.Unlock()
	if now.Sub(s.window) >= time.Second {
		s.window = now.Truncate(time.Second)
		s.burst = s.rng.Float64() < o.BurstRate
		s.seen = false
	}
	if s.burst && !s.seen {
		s.seen = true
		s.bursts.Add(1)
	}
	if s.burst && s.rng.Float64() < o.BurstFailure {
		return true, false, throttleTypes[s.rng.IntN(len(throttleTypes))]
	}
	return false, s.rng.Float64() < o.DropRate, ""
}
