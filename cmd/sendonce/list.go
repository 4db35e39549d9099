package main

import (
	"cmp"
	"container/heap"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/ledger/dynamoledger"
)

func listCmd(a *app) *cobra.Command {
	c := &cobra.Command{
		Use:   "list --state pending|uncertain|abandoned|failed [--older-than D] [--tenant T] [--channel C] [--limit N] [--table NAME]",
		Short: "rows that need a human, oldest first",
		Long: `
Lists ledger rows in one state, oldest first, with key, tenant, channel,
class, attempts, age and reason: one JSON object per line (--output json,
each the row as "inspect" prints it plus "due_at" and "age"), or a table.

Age is how long the row has needed attention: for a PENDING row since its
lease ended (negative while a worker still holds it: it is in flight), for
UNCERTAIN, ABANDONED and FAILED rows since they entered that state.

Where the rows come from, and what it costs:
  pending, uncertain   the attention index (the reconciler's), every shard,
                       merged oldest first: reads only rows in those states.
  abandoned            the abandoned rows' own entries in the same index:
                       no scan.
  failed               a paginated Scan of the whole table (FAILED rows
                       leave every index): it reads every item, so it costs
                       about (table size / 4 KB) / 2 read units and takes
                       time on a big table. A warning goes to stderr first,
                       progress while it reads (on a terminal) and the
                       scan's totals at the end.

--tenant and --channel filter what is read (the indexes are not per
tenant), so a narrow filter on a big backlog still reads the backlog.

  sendonce list --state uncertain --older-than 15m --query '[].key' --output text`,
		Args: noArgs,
	}
	tableF := tableFlag(c)
	f := c.Flags()
	state := f.String("state", "", "the `STATE`: pending, uncertain, abandoned or failed (required)")
	olderThan := f.Duration("older-than", 0, "only rows whose age is at least `D` (a Go duration: 15m, 2h)")
	tenant := f.String("tenant", "", "only this `TENANT`'s rows")
	channel := f.String("channel", "", "only this `CHANNEL`'s rows")
	limit := f.Int("limit", 100, "at most `N` rows")
	c.RunE = func(c *cobra.Command, _ []string) error {
		ctx := c.Context()
		want := ledger.State(strings.ToUpper(*state))
		switch want {
		case ledger.StatePending, ledger.StateUncertain, ledger.StateAbandoned, ledger.StateFailed:
		case "":
			return &usageError{cmd: c, msg: "list needs --state pending, uncertain, abandoned or failed"}
		default:
			return &usageError{cmd: c, msg: fmt.Sprintf("--state %q: want pending, uncertain, abandoned or failed", *state)}
		}
		if *limit <= 0 {
			return &usageError{cmd: c, msg: "--limit must be positive"}
		}
		if *olderThan < 0 {
			return &usageError{cmd: c, msg: "--older-than must not be negative"}
		}
		table, err := a.table(c, *tableF)
		if err != nil {
			return err
		}
		led, err := a.openLedger(ctx, table)
		if err != nil {
			return fmt.Errorf("list: %w", err)
		}
		now := time.Now()
		keep := func(r ledger.Record) bool {
			return r.State == want && (*tenant == "" || r.Tenant == *tenant) && (*channel == "" || r.Channel == *channel) &&
				(*olderThan == 0 || !r.DueAt().After(now.Add(-*olderThan)))
		}
		var recs []ledger.Record
		if want == ledger.StateFailed {
			a.note("warning: listing failed rows scans the whole table %s (every item is read and billed); it may take a while", table)
			recs, err = scanFailed(ctx, led, keep)
			if err == nil {
				slices.SortStableFunc(recs, func(a, b ledger.Record) int { return a.DueAt().Compare(b.DueAt()) })
				_, totals := a.scanned()
				a.note("scanned table %s for FAILED rows: %s; %d left after --tenant, --channel and --older-than, %d printed",
					table, totals, len(recs), min(len(recs), *limit))
				recs = recs[:min(len(recs), *limit)]
			}
		} else {
			recs, err = merged(ctx, shardPager(led, want, now, *olderThan), keep, *limit)
		}
		if err != nil {
			return fmt.Errorf("list: %w", err)
		}
		rd, err := a.redactor(ctx)
		if err != nil {
			return fmt.Errorf("list: %w", err)
		}
		views := make([]listView, len(recs))
		for i, r := range recs {
			views[i] = listView{rowView: view(r, rd), DueAt: timeString(r.DueAt()), Age: now.Sub(r.DueAt()).Round(time.Second).String()}
		}
		return writeList(a.printer(), views, []string{"KEY", "STATE", "TENANT", "CHANNEL", "CLASS", "ATTEMPTS", "AGE", "REASON"},
			func(v listView) []string {
				return []string{v.Key, string(v.State), v.Tenant, v.Channel, v.Class, fmt.Sprint(v.Attempts), v.Age, v.Reason}
			})
	}
	return c
}

// listView is one row of list's output.
type listView struct {
	rowView
	DueAt string `json:"due_at"`
	Age   string `json:"age"`
}

// pager reads one page of one shard.
type pager func(ctx context.Context, shard int, cursor string) (ledger.AttentionPage, error)

// shardPager reads state's rows: the attention index for PENDING and
// UNCERTAIN (every row, due or not, unless olderThan bounds it), the
// abandoned entries for ABANDONED.
func shardPager(led *dynamoledger.Ledger, state ledger.State, now time.Time, olderThan time.Duration) pager {
	before := now.Add(-olderThan)
	if state == ledger.StateAbandoned {
		if olderThan == 0 {
			before = time.Time{}
		}
		return func(ctx context.Context, shard int, cursor string) (ledger.AttentionPage, error) {
			return led.Abandoned(ctx, ledger.AbandonedQuery{Shard: shard, Before: before, Cursor: cursor})
		}
	}
	if olderThan == 0 {
		before = now.Add(100 * 365 * 24 * time.Hour) // in-flight claims too
	}
	return func(ctx context.Context, shard int, cursor string) (ledger.AttentionPage, error) {
		return led.Attention(ctx, ledger.AttentionQuery{Shard: shard, DueBefore: before, Cursor: cursor})
	}
}

// scanFailed reads every page of the failed-row scan.
func scanFailed(ctx context.Context, led *dynamoledger.Ledger, keep func(ledger.Record) bool) ([]ledger.Record, error) {
	var out []ledger.Record
	cursor := ""
	for {
		p, err := led.Failed(ctx, ledger.ScanQuery{Cursor: cursor})
		if err != nil {
			return nil, err
		}
		for _, r := range p.Records {
			if keep(r) {
				out = append(out, r)
			}
		}
		if cursor = p.Cursor; cursor == "" {
			return out, nil
		}
	}
}

// merged reads every shard through next and returns up to limit rows that
// keep accepts, globally oldest first (a k-way merge of the shards'
// ordered pages, reading no page it does not need).
func merged(ctx context.Context, next pager, keep func(ledger.Record) bool, limit int) ([]ledger.Record, error) {
	var h streams
	for s := range ledger.AttentionShards {
		st := &stream{shard: s}
		if err := st.fill(ctx, next); err != nil {
			return nil, err
		}
		if len(st.rows) > 0 {
			h = append(h, st)
		}
	}
	heap.Init(&h)
	var out []ledger.Record
	for len(h) > 0 && len(out) < limit {
		st := h[0]
		r := st.rows[0]
		st.rows = st.rows[1:]
		if keep(r) {
			out = append(out, r)
		}
		if err := st.fill(ctx, next); err != nil {
			return nil, err
		}
		if len(st.rows) == 0 {
			heap.Pop(&h)
		} else {
			heap.Fix(&h, 0)
		}
	}
	return out, nil
}

// stream is one shard's rows not yet merged.
type stream struct {
	shard  int
	rows   []ledger.Record
	cursor string
	done   bool
}

// fill reads pages until the stream has a row or its shard is done.
func (s *stream) fill(ctx context.Context, next pager) error {
	for len(s.rows) == 0 && !s.done {
		p, err := next(ctx, s.shard, s.cursor)
		if err != nil {
			return err
		}
		s.rows, s.cursor, s.done = p.Records, p.Cursor, p.Cursor == ""
	}
	return nil
}

type streams []*stream

func (h streams) Len() int { return len(h) }
func (h streams) Less(i, j int) bool {
	return cmp.Or(h[i].rows[0].DueAt().Compare(h[j].rows[0].DueAt()), strings.Compare(h[i].rows[0].Key, h[j].rows[0].Key)) < 0
}
func (h streams) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *streams) Push(x any)   { *h = append(*h, x.(*stream)) }
func (h *streams) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
