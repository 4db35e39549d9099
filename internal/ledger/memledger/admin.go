package memledger

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/sendonce/sendonce/internal/ledger"
)

var _ ledger.Admin = (*Ledger)(nil)

// Resolve implements ledger.Admin with dynamoledger's semantics.
func (l *Ledger) Resolve(ctx context.Context, r ledger.Resolution) (ledger.Record, error) {
	wrap := func(err error) error { return fmt.Errorf("memledger: resolve %s: %w", r.Key, err) }
	if err := r.Check(); err != nil {
		return ledger.Record{}, wrap(err)
	}
	if r.FromState.Final() && !r.Force {
		return ledger.Record{}, wrap(fmt.Errorf("%w: row is %s", ledger.ErrFinal, r.FromState))
	}
	if err := ctx.Err(); err != nil {
		return ledger.Record{}, wrap(err)
	}
	now := l.clock()
	l.mu.Lock()
	defer l.mu.Unlock()
	cur, ok := l.live(r.Key, now)
	switch {
	case !ok:
		return ledger.Record{}, wrap(ledger.ErrNotFound)
	case cur.State != r.FromState || cur.ClaimID != r.FromClaimID:
		return ledger.Record{}, wrap(&ledger.ConflictError{Op: "resolve", Current: cur})
	}
	if err := r.Refused(cur, now); err != nil {
		return ledger.Record{}, wrap(err)
	}
	cur.ResolvedFrom = cur.State
	cur.State = r.State
	cur.ResolvedBy, cur.ResolvedAt, cur.ResolvedReason = r.By, now, r.Reason
	if r.ProviderMessageID != "" {
		cur.ProviderMessageID = r.ProviderMessageID
	}
	cur.Released = false
	cur.Address, cur.Subject, cur.Body = "", "", ""
	cur.UpdatedAt = now
	cur.ExpiresAt = l.expiry(now)
	l.rows[r.Key] = cur
	return cur, nil
}

// ByEvent implements ledger.Admin.
func (l *Ledger) ByEvent(ctx context.Context, tenant, eventID string) ([]ledger.Record, error) {
	if tenant == "" || eventID == "" || strings.Contains(tenant, "#") {
		return nil, fmt.Errorf("memledger: by event %s/%s: want a tenant (without '#') and an event id", tenant, eventID)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memledger: by event: %w", err)
	}
	now := l.clock()
	var recs []ledger.Record
	l.mu.Lock()
	for _, r := range l.rows {
		if r.Tenant == tenant && r.EventID == eventID && !expired(r, now) {
			recs = append(recs, r)
		}
	}
	l.mu.Unlock()
	sort.Slice(recs, func(i, j int) bool { return recs[i].Key < recs[j].Key })
	return recs, nil
}

// Abandoned implements ledger.Admin.
func (l *Ledger) Abandoned(ctx context.Context, q ledger.AbandonedQuery) (ledger.AttentionPage, error) {
	if q.Shard < 0 || q.Shard >= ledger.AttentionShards {
		return ledger.AttentionPage{}, fmt.Errorf("memledger: abandoned: shard %d outside [0, %d)", q.Shard, ledger.AttentionShards)
	}
	bound := "~" // above every due string
	if !q.Before.IsZero() {
		bound = dueString(q.Before)
	}
	return l.page(ctx, "abandoned", q.Limit, q.Cursor, func(r ledger.Record) (string, bool) {
		if r.State != ledger.StateAbandoned || ledger.Shard(r.Key) != q.Shard {
			return "", false
		}
		sk := dueString(r.UpdatedAt) + "#" + r.Key
		return sk, sk < bound
	})
}

// Failed implements ledger.Admin (in key order, where DynamoDB's scan
// order is unspecified).
func (l *Ledger) Failed(ctx context.Context, q ledger.ScanQuery) (ledger.AttentionPage, error) {
	return l.page(ctx, "failed scan", q.Limit, q.Cursor, func(r ledger.Record) (string, bool) {
		return r.Key, r.State == ledger.StateFailed
	})
}

// page returns the live rows that sel selects, ordered by the sort key sel
// gives them, after cursor, at most limit (0: the default).
func (l *Ledger) page(ctx context.Context, op string, limit int, cur string, sel func(ledger.Record) (string, bool)) (ledger.AttentionPage, error) {
	if limit < 0 {
		return ledger.AttentionPage{}, fmt.Errorf("memledger: %s: negative limit %d", op, limit)
	}
	after := ""
	if cur != "" {
		b, err := base64.RawURLEncoding.DecodeString(cur)
		if err != nil || len(b) == 0 {
			return ledger.AttentionPage{}, fmt.Errorf("memledger: %s: %w", op, errors.New("malformed cursor"))
		}
		after = string(b)
	}
	if err := ctx.Err(); err != nil {
		return ledger.AttentionPage{}, fmt.Errorf("memledger: %s: %w", op, err)
	}
	if limit == 0 {
		limit = defaultLimit
	}
	now := l.clock()
	rows := l.sorted(func(r ledger.Record) (string, bool) {
		sk, ok := sel(r)
		return sk, ok && sk > after && !expired(r, now)
	})
	var p ledger.AttentionPage
	for i, r := range rows {
		if i == limit {
			p.Cursor = base64.RawURLEncoding.EncodeToString([]byte(rows[i-1].sk))
			break
		}
		p.Records = append(p.Records, r.r)
	}
	return p, nil
}
