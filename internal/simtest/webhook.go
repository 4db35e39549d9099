package simtest

import (
	"context"
	"fmt"
	"time"

	"github.com/sendonce/sendonce/internal/webhook"
	"github.com/sendonce/sendonce/internal/webhook/memdedup"
)

// callback is a delivery callback a provider will post.
type callback struct {
	cb    webhook.Callback
	due   time.Time
	tries int
}

// scheduleCallbacks queues the status callbacks of an accepted message:
// "sent", then "delivered" (or "undelivered" when the carrier fails it),
// sometimes posted twice, in any order; some are lost (the seed's
// callback loss). Each carries the message's key, as the callback URL
// does: the ledger's evidence of which provider message is the key's.
// Plain providers do not call back, nor does Twilio without a callback
// base URL. w.mu is held.
func (w *World) scheduleCallbacks(p *simProvider, d *delivery) {
	prov := webhook.ProviderHTTP
	switch {
	case p.class == classPlain:
		return
	case p.class == classTwilio:
		if !p.tw.callbacks {
			return
		}
		prov = webhook.ProviderTwilio
	}
	final, finalAt := webhook.StatusDelivered, d.visible
	if !d.failAt.IsZero() {
		final, finalAt = webhook.StatusUndelivered, d.failAt
	}
	now := w.now()
	statuses := [2]webhook.Status{webhook.StatusSent, final}
	for i, at := range [2]time.Time{d.visible, finalAt} {
		st, from := statuses[i], at // posted from now on, at the earliest
		if from.Before(now) {
			from = now
		}
		n := 1
		if w.rng.IntN(4) == 0 {
			n = 2 // the provider posts it again
		}
		for range n {
			if w.rng.Float64() < w.sc.callbackLoss {
				w.faults["callback_lost"]++
				continue
			}
			w.callbacks = append(w.callbacks, &callback{
				cb: webhook.Callback{
					Provider: prov, EventID: fmt.Sprintf("%s-%d", d.id, i), Key: d.key, Status: st,
					At: at, ProviderMessageID: d.id,
				},
				due: from.Add(time.Duration(1+w.rng.IntN(90)) * time.Second),
			})
		}
	}
}

// simDedup is the webhook's dedup store (memdedup, on the virtual clock),
// with the store's faults.
type simDedup struct {
	w     *World
	inner *memdedup.Dedup
}

func (d *simDedup) Seen(ctx context.Context, id string) (bool, error) {
	wk := d.w.yield(ctx, "dedup-seen", id)
	d.w.mu.Lock()
	defer d.w.mu.Unlock()
	if f := d.w.readFault(wk); f != faultNone {
		return false, d.w.faultErr("dedup seen", f)
	}
	return d.inner.Seen(ctx, id)
}

func (d *simDedup) Record(ctx context.Context, cb webhook.Callback) (bool, error) {
	wk := d.w.yield(ctx, "dedup-record", cb.DedupID())
	d.w.mu.Lock()
	defer d.w.mu.Unlock()
	f := d.w.writeFault(wk)
	if refused(f) {
		return false, d.w.faultErr("dedup record", f)
	}
	created, err := d.inner.Record(ctx, cb)
	if f == faultLost {
		return false, d.w.faultErr("dedup record", f)
	}
	return created, err
}
