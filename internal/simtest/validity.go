package simtest

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/sendonce/sendonce/internal/decide"
	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/notify"
)

// Validity (docs/request.md, "Validity"): a third of the workload's
// requests carry an expires_at, most of them short, and the sender applies
// the template's per-class defaults (SENDONCE_VALIDITY). The invariants:
// sent-after-expiry (no provider call sends a message past its request's
// expires_at or its row's validity, beyond the clocks' error) and
// expired-early (no row ends expired before its validity passed, less the
// clocks' error). An expired row counts Expired, never Failed,
// ReconciledFailed or Abandoned (metrics), and is no refusal
// (failed-not-refused).
const (
	InvSentExpired  = "sent-after-expiry"
	InvExpiredEarly = "expired-early"
)

// drawValidity gives request idx an expires_at, for one in three of
// them: between 30 s and 20 min after the run starts (messages arrive
// in its first 2 minutes). It draws from a PRNG of its own, derived from
// the seed and idx, so the rest of the run draws what it drew before.
func (w *World) drawValidity(req *notify.Request, idx int) {
	rng := rand.New(rand.NewPCG(w.seed^0x5eed0fe7a11d17e5, uint64(idx)))
	if rng.IntN(3) != 0 {
		return
	}
	d := 30*time.Second + time.Duration(rng.Int64N(int64(20*time.Minute)))
	if rng.IntN(2) == 0 {
		d = 30*time.Second + time.Duration(rng.Int64N(int64(3*time.Minute))) // short: an OTP's
	}
	req.ExpiresAt = w.t0.Add(d).UTC().Format(time.RFC3339Nano)
}

// checkValidSend checks a provider call that sends key's message, before
// it is made: never past its validity by more than the clocks' error. The
// validity is the earlier of its request's expires_at (the producer's
// word, whatever the row says) and the row's own (zero row: none). w.mu
// is held.
func (w *World) checkValidSend(p *simProvider, key string, row ledger.Record) {
	var v time.Time
	if kt := w.keys[key]; kt != nil && kt.msg != nil {
		v = kt.msg.req.Expiry()
	}
	if !row.ValidUntil.IsZero() && (v.IsZero() || row.ValidUntil.Before(v)) {
		v = row.ValidUntil
	}
	if now := w.now(); !v.IsZero() && now.After(v.Add(2*maxSkew)) {
		w.violate(InvSentExpired, key, fmt.Sprintf("sent through %s at %s, %s after its validity (%s)", p.name, w.at(now), now.Sub(v).Round(time.Millisecond), w.at(v)))
	}
}

// expiredMark reports whether a final mark of key with outcome o over row
// before says the message expired (then Mark expects the Expired count in
// place of the others), and checks that its validity had passed. w.mu is
// held.
func (w *World) expiredMark(key string, before ledger.Record, o ledger.Outcome) bool {
	if !o.State.Final() || o.State == ledger.StateSent || !decide.IsExpired(o.Reason) {
		return false
	}
	v := before.ValidUntil
	if kt := w.keys[key]; kt != nil && kt.msg != nil && v.IsZero() {
		v = kt.msg.req.Expiry()
	}
	if now := w.now(); v.IsZero() || now.Before(v.Add(-2*maxSkew)) {
		w.violate(InvExpiredEarly, key, fmt.Sprintf("%s (%q) at %s, but its validity is %s", o.State, o.Reason, w.at(now), w.at(v)))
	}
	w.faults["expired_rows"]++
	return true
}
