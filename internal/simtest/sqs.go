package simtest

import (
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sendonce/sendonce/notify"
)

// sqsMsg is one message of the simulated notification queue.
type sqsMsg struct {
	id    string
	body  string
	key   string // "" for an invalid body
	group string
	// arrive is when the producer enqueued it.
	arrive                 time.Time
	receives               int
	visibleAt              time.Time
	deleted, dlq, inFlight bool
}

// queue models SQS: visibility timeout, redelivery, receive counts, the
// DLQ after maxReceiveCount, at-least-once delivery on a standard queue
// (one message handed to two workers at once) and FIFO groups (a group
// with a message in flight delivers nothing else).
type queue struct {
	fifo       bool
	visibility time.Duration
	maxReceive int
	msgs       []*sqsMsg
}

// done reports whether m left the queue: deleted or dead-lettered.
func (m *sqsMsg) done() bool { return m.deleted || m.dlq }

func (q *queue) visible(m *sqsMsg, now time.Time) bool {
	return !m.done() && !now.Before(m.arrive) && !now.Before(m.visibleAt)
}

// settled reports whether every message is deleted or dead-lettered.
func (q *queue) settled() bool {
	return !slices.ContainsFunc(q.msgs, func(m *sqsMsg) bool { return !m.done() })
}

// nextVisible is the earliest time a message becomes receivable.
func (q *queue) nextVisible(now time.Time) (time.Time, bool) {
	var best time.Time
	for _, m := range q.msgs {
		if m.done() {
			continue
		}
		for _, t := range []time.Time{m.arrive, m.visibleAt} {
			if t.After(now) && (best.IsZero() || t.Before(best)) {
				best = t
			}
		}
	}
	return best, !best.IsZero()
}

// candidates are the messages a receive may return now, in queue order.
func (q *queue) candidates(now time.Time) []*sqsMsg {
	// On a FIFO queue a group with a message in flight delivers nothing,
	// and nothing after a message that is not receivable (FIFO order).
	blocked := map[string]bool{}
	for _, m := range q.msgs {
		if q.fifo && !m.done() && m.receives > 0 && now.Before(m.visibleAt) {
			blocked[m.group] = true
		}
	}
	var cand []*sqsMsg
	for _, m := range q.msgs {
		if m.done() || now.Before(m.arrive) || blocked[m.group] {
			continue
		}
		if !q.visible(m, now) {
			blocked[m.group] = q.fifo
			continue
		}
		cand = append(cand, m)
	}
	return cand
}

// receive takes a batch as Lambda's poller would: on a FIFO queue the
// first messages of one group; on a standard queue any visible messages,
// and now and then one that is in flight elsewhere (at-least-once).
func (w *World) receive() []*sqsMsg {
	q := w.q
	now := w.now()
	cand := q.candidates(now)
	if q.fifo && len(cand) > 0 {
		var groups []string
		for _, m := range cand {
			if !slices.Contains(groups, m.group) {
				groups = append(groups, m.group)
			}
		}
		g := groups[w.rng.IntN(len(groups))]
		cand = slices.DeleteFunc(cand, func(m *sqsMsg) bool { return m.group != g })
	}
	if !q.fifo {
		w.rng.Shuffle(len(cand), func(i, j int) { cand[i], cand[j] = cand[j], cand[i] })
		if !w.calm && w.rng.Float64()/w.sc.intensity < 0.05 {
			for _, m := range q.msgs {
				if m.inFlight && !m.done() {
					w.faults["sqs_concurrent_delivery"]++
					cand = append(cand, m)
					break
				}
			}
		}
	}
	max := 1 + w.rng.IntN(3)
	var batch []*sqsMsg
	keys := map[string]bool{}
	for _, m := range cand {
		if len(batch) == max {
			break
		}
		k := m.key
		if k != "" && keys[k] {
			continue // one key per batch keeps the yield order deterministic
		}
		m.receives++
		if m.receives > q.maxReceive {
			m.dlq = true
			w.tracef(k, "sqs %s → DLQ after %d receives", m.id, m.receives-1)
			continue
		}
		keys[k] = true
		m.visibleAt = now.Add(q.visibility)
		m.inFlight = true
		batch = append(batch, m)
	}
	return batch
}

func (w *World) event(batch []*sqsMsg) events.SQSEvent {
	var ev events.SQSEvent
	arn := "arn:aws:sqs:us-east-1:123456789012:notifications"
	if w.q.fifo {
		arn += ".fifo"
	}
	for _, m := range batch {
		attrs := map[string]string{"ApproximateReceiveCount": strconv.Itoa(m.receives)}
		if w.q.fifo {
			attrs["MessageGroupId"] = m.group
		}
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: m.id, Body: m.body, Attributes: attrs, EventSourceARN: arn})
	}
	return ev
}

// finishBatch applies a sender's partial batch response: every record not
// reported failed is deleted; failed ones stay until their visibility
// timeout passes.
func (w *World) finishBatch(wk *worker, batch []*sqsMsg, resp events.SQSEventResponse) {
	failed := map[string]bool{}
	for _, f := range resp.BatchItemFailures {
		failed[f.ItemIdentifier] = true
	}
	for _, m := range batch {
		m.inFlight = false
		if failed[m.id] {
			w.tracef(m.key, "%s sqs %s: reported failed (receive %d)", wk.name, m.id, m.receives)
			continue
		}
		if !m.dlq {
			m.deleted = true
		}
		w.tracef(m.key, "%s sqs %s: deleted", wk.name, m.id)
	}
}

// simDLQ is the dead-letter queue the sender moves invalid requests to.
type simDLQ struct{ w *World }

func (d simDLQ) Put(ctx context.Context, rec events.SQSMessage, invalid *notify.InvalidError) error {
	wk := d.w.yield(ctx, "dlq", rec.MessageId)
	w := d.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if f := w.writeFault(wk); refused(f) {
		return w.faultErr("dlq put", f)
	}
	w.tracef("", "%s dlq %s: %s", wk.name, rec.MessageId, invalid.Reason)
	return nil
}
