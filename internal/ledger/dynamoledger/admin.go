package dynamoledger

// The operator's operations (ledger.Admin): none of them is on the send
// path.
//
// Item attributes added for them:
//
//	evt_pk           S     "<tenant>#<event id>": the event index's key, written
//	                       once by Claim (KEYS_ONLY GSI "event")
//	resolved_by      S     who settled the row by hand (an IAM ARN)
//	resolved_at      N     ms: when
//	resolved_reason  S     why
//	resolved_from    S     the state it was in
//
// Abandoned rows need a human, so they keep an entry in the attention GSI
// under partitions of their own, "abnd#NN" (same shards), sorted by when
// they were abandoned. The reconciler reads only "attn#NN" partitions, so
// it never sees them. A row leaves "abnd#NN" when it is resolved to another
// state.
//
// The event index is optional (template.yaml's EventIndex parameter,
// tableschema.WithEventIndex). Claim writes evt_pk either way: a few bytes
// of the row, which keep a typical claim under 1 KB, so the table's own
// cost does not change, and a table that gains the index later finds its
// older rows too. Without the index, ByEvent scans the table instead.
//
// Write cost of the event index, where the table has it: one index write
// per claim (the item's evt_pk appears); no later transition touches
// evt_pk or a projected attribute, so Mark, Release and TakeOver add
// nothing. Measured against DynamoDB Local with ReturnConsumedCapacity
// (TestEventIndexCost): a claim costs 2 write units with the index, 1
// without it, and a Mark to SENT 1 either way; on real DynamoDB's
// accounting a first send costs 3 write units with the index and 2 (the
// floor) without it (cmd/bench's peer section). Abandoning moves the row's
// attention entry from "attn#NN" to "abnd#NN" (an index delete and put)
// where it used to be a delete alone.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/tableschema"
)

// Attribute names of the admin operations.
const (
	attrEventPK        = tableschema.EventPK
	attrResolvedBy     = "resolved_by"
	attrResolvedAt     = "resolved_at"
	attrResolvedReason = "resolved_reason"
	attrResolvedFrom   = "resolved_from"
)

var _ ledger.Admin = (*Ledger)(nil)

// ScanAPI is what Failed needs beyond API; *dynamodb.Client has it.
type ScanAPI interface {
	Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

// eventPK is the event index key of tenant's event. A tenant id never
// holds '#', so the split is unambiguous.
func eventPK(tenant, eventID string) string { return tenant + "#" + eventID }

func abndPK(shard int) string { return fmt.Sprintf("abnd#%02d", shard) }

// finalIndex adds to a final write's update expression what becomes of
// the row's attention-index entry: an ABANDONED row moves to its
// "abnd#NN" partition, due now; any other final row leaves the index.
func finalIndex(s ledger.State, key string, now time.Time, set, remove string, names map[string]string, values map[string]types.AttributeValue) (string, string) {
	names["#attn_pk"], names["#attn_sk"] = attrAttnPK, attrAttnSK
	if s == ledger.StateAbandoned {
		values[":abnd_pk"] = str(abndPK(ledger.Shard(key)))
		values[":abnd_sk"] = str(attnSK(now, key))
		return set + ", #attn_pk = :abnd_pk, #attn_sk = :abnd_sk", remove
	}
	return set, remove + ", #attn_pk, #attn_sk"
}

// decodeAdmin reads the admin attributes of item into r (resolved_at is
// decoded with the other times).
func decodeAdmin(item map[string]types.AttributeValue, r *ledger.Record) {
	if ev := sAttr(item, attrEventPK); ev != "" {
		if _, id, ok := strings.Cut(ev, "#"); ok {
			r.EventID = id
		}
	}
	r.ResolvedBy = sAttr(item, attrResolvedBy)
	r.ResolvedReason = sAttr(item, attrResolvedReason)
	r.ResolvedFrom = ledger.State(sAttr(item, attrResolvedFrom))
}

// Resolve implements ledger.Admin with one UpdateItem conditional on the
// row being live in r.FromState under r.FromClaimID (and, without Force,
// a PENDING row's lease having passed). It returns an input error for an
// incomplete resolution, an error matching ledger.ErrFinal for a final
// FromState without Force, ledger.ErrInFlight for a PENDING row under a
// live lease without Force, ledger.ErrNotFound when no live row holds the
// key, a *ledger.ConflictError holding the current row when it moved since
// it was read, or the DynamoDB error, wrapped with the operation and key.
func (l *Ledger) Resolve(ctx context.Context, r ledger.Resolution) (ledger.Record, error) {
	wrap := func(err error) error { return fmt.Errorf("dynamoledger: resolve %s: %w", r.Key, err) }
	if err := r.Check(); err != nil {
		return ledger.Record{}, wrap(err)
	}
	if r.FromState.Final() && !r.Force {
		return ledger.Record{}, wrap(fmt.Errorf("%w: row is %s", ledger.ErrFinal, r.FromState))
	}
	now := l.clock()
	cond := "#state = :from AND #claim_id = :claim AND #expires_at >= :now"
	names := map[string]string{
		"#state": attrState, "#claim_id": attrClaimID, "#expires_at": attrExpiresAt, "#updated_at": attrUpdatedAt,
		"#released": attrReleased, "#address": attrAddress, "#subject": attrSubject, "#body": attrBody,
		"#rby": attrResolvedBy, "#rat": attrResolvedAt, "#rreason": attrResolvedReason, "#rfrom": attrResolvedFrom,
	}
	values := map[string]types.AttributeValue{
		":from":   str(string(r.FromState)),
		":claim":  str(r.FromClaimID),
		":now":    numInt(now.Unix()),
		":now_ms": millis(now),
		":to":     str(string(r.State)),
		":ttl":    l.ttl(now),
		":by":     str(r.By),
		":reason": str(r.Reason),
	}
	if r.FromState == ledger.StatePending && !r.Force {
		cond += " AND #lease_until <= :now_ms"
		names["#lease_until"] = attrLeaseUntil
	}
	set := "SET #state = :to, #updated_at = :now_ms, #expires_at = :ttl, #rby = :by, #rat = :now_ms, #rreason = :reason, #rfrom = :from"
	remove := " REMOVE #released, #address, #subject, #body"
	if r.ProviderMessageID != "" {
		set += ", #provider_msg_id = :pmid"
		names["#provider_msg_id"] = attrProviderMsg
		values[":pmid"] = str(r.ProviderMessageID)
	}
	set, remove = finalIndex(r.State, r.Key, now, set, remove, names, values)
	out, old, failed, err := l.update(ctx, "resolve", r.Key, &dynamodb.UpdateItemInput{
		ConditionExpression:       aws.String(cond),
		UpdateExpression:          aws.String(set + remove),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
		ReturnValues:              types.ReturnValueAllNew,
	})
	switch {
	case err != nil:
		return ledger.Record{}, err
	case !failed:
	case old.Key == "" || old.ExpiresAt.Unix() < now.Unix():
		return ledger.Record{}, wrap(ledger.ErrNotFound)
	case old.State == r.State && old.ResolvedBy == r.By && old.ResolvedAt.Equal(now):
		return old, nil // a retry found its own first try's write
	case old.State == r.FromState && old.ClaimID == r.FromClaimID:
		return ledger.Record{}, wrap(r.Refused(old, now)) // only the lease condition failed
	default:
		return ledger.Record{}, wrap(&ledger.ConflictError{Op: "resolve", Current: old})
	}
	rec, err := decode(out.Attributes)
	if err != nil {
		return ledger.Record{}, wrap(err)
	}
	return rec, nil
}

// ByEvent implements ledger.Admin: a Query of the event index when the
// table has one (keys only, every page), else a paginated Scan filtered on
// evt_pk (tableschema.EventKeys; Config.ScanWarning is told first), then a
// strongly consistent GetItem per key found, in key order. The Scan needs
// a client with Scan (ScanAPI). It returns an input error for an empty
// tenant or event id, or the DynamoDB or decoding error, wrapped with the
// operation.
func (l *Ledger) ByEvent(ctx context.Context, tenant, eventID string) ([]ledger.Record, error) {
	wrap := func(err error) error { return fmt.Errorf("dynamoledger: by event %s/%s: %w", tenant, eventID, err) }
	if tenant == "" || eventID == "" || strings.Contains(tenant, "#") {
		return nil, wrap(errors.New("want a tenant (without '#') and an event id"))
	}
	db, ok := l.db.(tableschema.EventAPI)
	if !ok {
		db = noScan{l.db}
	}
	keys, err := tableschema.EventKeys(ctx, db, tableschema.EventQuery{
		Table: aws.ToString(l.table), Value: eventPK(tenant, eventID),
		ReturnConsumedCapacity: l.rcc,
		Consumed:               func(_ string, cc *types.ConsumedCapacity) { l.report("by event", cc) },
		Scanning: func() {
			if l.scanning != nil {
				l.scanning("by event")
			}
		},
	})
	if err != nil {
		return nil, wrap(err)
	}
	recs := make([]ledger.Record, 0, len(keys))
	for _, k := range keys {
		if !strings.HasPrefix(k, "v1_") {
			continue // another kind of item carrying evt_pk (API keys use their own values)
		}
		r, err := l.Get(ctx, k)
		if errors.Is(err, ledger.ErrNotFound) {
			continue // expired, or gone since the keys were read
		}
		if err != nil {
			return nil, wrap(err)
		}
		recs = append(recs, r)
	}
	return recs, nil
}

// noScan gives a client without Scan the EventAPI shape: its Scan fails.
type noScan struct{ API }

func (n noScan) Scan(context.Context, *dynamodb.ScanInput, ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	return nil, fmt.Errorf("client %T cannot Scan (the table has no event index)", n.API)
}

// Abandoned implements ledger.Admin with one Query of the attention GSI's
// "abnd#NN" partition, oldest first, skipping expired rows. Like
// Attention, a page may hold fewer rows than the limit while its cursor is
// not empty. It returns an input error for a shard outside [0,
// ledger.AttentionShards), a negative limit or a foreign cursor, or the
// DynamoDB or decoding error, wrapped with the operation and shard.
func (l *Ledger) Abandoned(ctx context.Context, q ledger.AbandonedQuery) (ledger.AttentionPage, error) {
	wrap := func(err error) error { return fmt.Errorf("dynamoledger: abandoned shard %d: %w", q.Shard, err) }
	if q.Shard < 0 || q.Shard >= ledger.AttentionShards {
		return ledger.AttentionPage{}, wrap(fmt.Errorf("shard outside [0, %d)", ledger.AttentionShards))
	}
	if q.Limit < 0 {
		return ledger.AttentionPage{}, wrap(fmt.Errorf("negative limit %d", q.Limit))
	}
	shard := abndPK(q.Shard)
	cond := "#attn_pk = :shard"
	names := map[string]string{"#attn_pk": attrAttnPK, "#expires_at": attrExpiresAt}
	values := map[string]types.AttributeValue{":shard": str(shard), ":now": numInt(l.clock().Unix())}
	if !q.Before.IsZero() {
		cond += " AND #attn_sk < :due"
		names["#attn_sk"] = attrAttnSK
		values[":due"] = str(dueString(q.Before))
	}
	in := &dynamodb.QueryInput{
		TableName:                 l.table,
		IndexName:                 aws.String(tableschema.AttentionIndex),
		KeyConditionExpression:    aws.String(cond),
		FilterExpression:          aws.String(filtLive),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
		ScanIndexForward:          aws.Bool(true),
		Limit:                     aws.Int32(pageLimit(q.Limit)),
		ReturnConsumedCapacity:    l.rcc,
	}
	if q.Cursor != "" {
		start, err := decodeCursor(q.Cursor, shard)
		if err != nil {
			return ledger.AttentionPage{}, wrap(err)
		}
		in.ExclusiveStartKey = start
	}
	out, err := l.db.Query(ctx, in)
	if err != nil {
		return ledger.AttentionPage{}, wrap(err)
	}
	l.report("abandoned", out.ConsumedCapacity)
	p, err := page(out.Items, out.LastEvaluatedKey)
	if err != nil {
		return ledger.AttentionPage{}, wrap(err)
	}
	return p, nil
}

// Failed implements ledger.Admin with one Scan page filtered on live
// FAILED ledger rows. It needs a client with Scan (ScanAPI). It returns an
// input error for a negative limit or a foreign cursor, or the DynamoDB or
// decoding error, wrapped with the operation.
func (l *Ledger) Failed(ctx context.Context, q ledger.ScanQuery) (ledger.AttentionPage, error) {
	wrap := func(err error) error { return fmt.Errorf("dynamoledger: failed scan: %w", err) }
	sc, ok := l.db.(ScanAPI)
	if !ok {
		return ledger.AttentionPage{}, wrap(fmt.Errorf("client %T cannot Scan", l.db))
	}
	if q.Limit < 0 {
		return ledger.AttentionPage{}, wrap(fmt.Errorf("negative limit %d", q.Limit))
	}
	in := &dynamodb.ScanInput{
		TableName:                l.table,
		FilterExpression:         aws.String("#state = :failed AND #expires_at >= :now AND begins_with(#pk, :v1)"),
		ExpressionAttributeNames: map[string]string{"#state": attrState, "#expires_at": attrExpiresAt, "#pk": attrPK},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":failed": str(string(ledger.StateFailed)), ":now": numInt(l.clock().Unix()), ":v1": str("v1_"),
		},
		Limit:                  aws.Int32(pageLimit(q.Limit)),
		ReturnConsumedCapacity: l.rcc,
	}
	if q.Cursor != "" {
		// The page may have ended on any item of the table (a template,
		// an API key), not only a ledger row: the cursor marks itself
		// rather than its key.
		b, err := base64.RawURLEncoding.DecodeString(q.Cursor)
		pk, ok := strings.CutPrefix(string(b), scanCursorPrefix)
		if err != nil || !ok || pk == "" {
			return ledger.AttentionPage{}, wrap(errors.New("malformed cursor: not a scan cursor"))
		}
		in.ExclusiveStartKey = keyOf(pk)
	}
	out, err := sc.Scan(ctx, in)
	if err != nil {
		return ledger.AttentionPage{}, wrap(err)
	}
	l.report("failed scan", out.ConsumedCapacity)
	p := ledger.AttentionPage{Records: make([]ledger.Record, 0, len(out.Items))}
	for _, item := range out.Items {
		r, err := decode(item)
		if err != nil {
			return ledger.AttentionPage{}, wrap(err)
		}
		p.Records = append(p.Records, r)
	}
	if k := sAttr(out.LastEvaluatedKey, attrPK); k != "" {
		p.Cursor = base64.RawURLEncoding.EncodeToString([]byte(scanCursorPrefix + k))
	}
	return p, nil
}

// scanCursorPrefix starts a Failed cursor (before base64): the partition
// key of the item the page ended on follows.
const scanCursorPrefix = "failed-scan:"

func pageLimit(n int) int32 {
	if n == 0 {
		return DefaultPageSize
	}
	return int32(min(n, 1000))
}

// page decodes an attention-GSI query's items and cursor.
func page(items []map[string]types.AttributeValue, last map[string]types.AttributeValue) (ledger.AttentionPage, error) {
	p := ledger.AttentionPage{Records: make([]ledger.Record, 0, len(items))}
	for _, item := range items {
		r, err := decode(item)
		if err != nil {
			return ledger.AttentionPage{}, err
		}
		p.Records = append(p.Records, r)
	}
	if len(last) > 0 {
		b, err := json.Marshal(cursor{PK: sAttr(last, attrPK), AttnPK: sAttr(last, attrAttnPK), AttnSK: sAttr(last, attrAttnSK)})
		if err != nil {
			return ledger.AttentionPage{}, fmt.Errorf("cursor: %w", err)
		}
		p.Cursor = base64.RawURLEncoding.EncodeToString(b)
	}
	return p, nil
}
