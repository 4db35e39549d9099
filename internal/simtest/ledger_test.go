package simtest

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sendonce/sendonce/internal/ledger"
)

// TestAttentionPagesLikeDynamoDB checks the model of the attention index:
// the page limit applies before the expiry filter, so expired rows at the
// head of a shard give empty pages that still carry a cursor, and paging
// on reaches the live row behind them.
func TestAttentionPagesLikeDynamoDB(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(1)
		w.sc.intensity = 1
		w.calm = true
		ctx := context.Background()
		shard := -1
		var keys []string
		for i := 0; len(keys) < 4; i++ {
			k := fmt.Sprintf("acme:%064d", i)
			if shard < 0 {
				shard = ledger.Shard(k)
			}
			if ledger.Shard(k) == shard {
				keys = append(keys, k)
			}
		}
		uncertain := func(k string) {
			c, err := w.mem.Claim(ctx, ledger.Entry{Key: k}, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if err := w.mem.Mark(ctx, c, ledger.Outcome{State: ledger.StateUncertain}); err != nil {
				t.Fatal(err)
			}
			w.snapshot(k)
		}
		w.ledgerOffset = -(retention + time.Hour)
		for _, k := range keys[:3] {
			uncertain(k)
		}
		w.ledgerOffset = 0
		uncertain(keys[3])

		var pages []ledger.AttentionPage
		wk := w.newWorker("reconciler", true)
		w.start(wk, time.Minute, func(ctx context.Context) {
			q := ledger.AttentionQuery{Shard: shard, DueBefore: time.Now().Add(time.Second), Limit: 2}
			for {
				p, err := w.led.Attention(ctx, q)
				if err != nil {
					t.Error(err)
					return
				}
				pages = append(pages, p)
				if p.Cursor == "" {
					return
				}
				q.Cursor = p.Cursor
			}
		}, nil)
		for !wk.done {
			w.resume(w.runnable[0])
		}
		if len(pages) != 2 || len(pages[0].Records) != 0 || pages[0].Cursor == "" {
			t.Fatalf("first page = %+v (of %d), want no rows and a cursor", pages[0], len(pages))
		}
		if got := pages[1].Records; len(got) != 1 || got[0].Key != keys[3] {
			t.Fatalf("second page = %+v, want the live row %s", got, keys[3])
		}
	})
}
