package simulator

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"time"

	"github.com/sendonce/sendonce/internal/provider/httpprovider"
)

// CallbackOptions tunes delivery callbacks. Callbacks are posted for a
// message that carries a callback_url when Options.CallbackSecret is set:
// "sent", then "delivered" (or "failed" for FaultUndeliverable). Each
// (message, status) has one event_id, "evt_{message id}_{status}", which
// its duplicates repeat.
type CallbackOptions struct {
	// Delay is waited before each callback is posted.
	Delay time.Duration
	// Duplicates is how many extra copies of each callback are posted
	// (same body, same event_id), right after it.
	Duplicates int
	// Reorder posts the final status before "sent".
	Reorder bool
	// Workers bounds the messages whose callbacks are posted at once; 0
	// means 4. The callbacks of one message are posted in order.
	Workers int
}

// callbackAttempts is how many times a callback is posted until it gets a
// 2xx answer, backing off from 100ms, doubling.
const callbackAttempts = 3

type event struct {
	status httpprovider.MessageStatus
	reason string
	body   []byte
}

// enqueueCallbacks starts posting the callbacks of rec, as soon as a
// worker is free; false if it has none. The caller holds s.mu; it never
// blocks.
func (s *Simulator) enqueueCallbacks(rec *Message, final httpprovider.MessageStatus, reason string) bool {
	if len(s.opts.CallbackSecret) == 0 || rec.CallbackURL == "" {
		return false
	}
	if s.closed {
		s.stats.CallbacksDropped++
		return false
	}
	at := rec.AcceptedAt.UTC()
	mk := func(st httpprovider.MessageStatus, reason string, t time.Time) event {
		body, _ := json.Marshal(httpprovider.Callback{
			EventID: "evt_" + rec.ID + "_" + string(st), MessageID: rec.ID, Reference: rec.Reference,
			Status: st, Timestamp: t.Format(time.RFC3339Nano),
		})
		return event{status: st, reason: reason, body: body}
	}
	order := []event{mk(httpprovider.StatusSent, "", at), mk(final, reason, at.Add(time.Millisecond))}
	if s.opts.Callbacks.Reorder {
		order[0], order[1] = order[1], order[0]
	}
	var events []event
	for _, e := range order {
		for range 1 + max(s.opts.Callbacks.Duplicates, 0) {
			events = append(events, e)
		}
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		select {
		case s.workers <- struct{}{}:
			defer func() { <-s.workers }()
			s.run(rec, events)
		case <-s.ctx.Done():
		}
	}()
	return true
}

// rank orders a message's statuses: a callback posted late (Reorder)
// never takes a message back to an earlier one.
var rank = map[httpprovider.MessageStatus]int{
	httpprovider.StatusSent: 1, httpprovider.StatusDelivered: 2, httpprovider.StatusFailed: 2,
}

// run posts events, the callbacks of rec, in order.
func (s *Simulator) run(rec *Message, events []event) {
	for _, e := range events {
		if !s.sleep(s.ctx, s.opts.Callbacks.Delay) {
			return
		}
		s.mu.Lock()
		if rank[e.status] > rank[rec.Status] {
			rec.Status, rec.Reason = e.status, e.reason
		}
		s.mu.Unlock()
		ok := s.post(rec.CallbackURL, e.body)
		s.mu.Lock()
		if ok {
			s.stats.CallbacksSent++
		} else if s.ctx.Err() == nil {
			s.stats.CallbacksFailed++
		}
		s.mu.Unlock()
	}
}

// post posts one callback until it is answered 2xx or attempts run out.
func (s *Simulator) post(url string, body []byte) bool {
	backoff := 100 * time.Millisecond
	for i := range callbackAttempts {
		if i > 0 && !s.sleep(s.ctx, backoff) {
			return false
		}
		backoff *= 2
		req, err := http.NewRequestWithContext(s.ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return false // a bad callback_url
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(httpprovider.SignatureHeader, httpprovider.Sign(s.opts.CallbackSecret, time.Now(), body))
		resp, err := s.client.Do(req)
		if err != nil {
			if s.ctx.Err() != nil {
				return false
			}
			continue
		}
		io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		resp.Body.Close()
		if resp.StatusCode/100 == 2 {
			return true
		}
	}
	return false
}
