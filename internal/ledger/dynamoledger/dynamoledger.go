// Package dynamoledger is the production ledger.Ledger, stored in the one
// sendonce DynamoDB table (package tableschema).
//
// Every transition is one conditional write; nothing on the hot path reads.
// A first delivery costs two writes (Claim's PutItem, Mark's UpdateItem),
// no index write and no read; a duplicate delivery costs one failed conditional PutItem
// whose ReturnValuesOnConditionCheckFailure=ALL_OLD brings the row it
// collided with back inside the error, so the caller learns the row's
// state without a GetItem.
//
// # Item layout
//
// One item per key, partition key pk = the idempotency key. Times are Unix
// milliseconds (N), except the TTL attribute in Unix seconds.
//
//	attribute        type  meaning
//	pk               S     the idempotency key (ledger.Entry.Key)
//	state            S     PENDING, SENT, FAILED, UNCERTAIN or ABANDONED
//	claim_id         S     fencing token of the latest claim
//	attempts         N     claims so far (1, +1 per takeover)
//	releases         N     claims released so far (absent: none)
//	released         BOOL  present (true) while the latest claim is released
//	lease_until      N     ms: end of the latest claim's lease
//	retry_at         N     ms: when a released row is due for the reconciler;
//	                       only while released
//	attempted_at     N     ms: when the latest claim was taken
//	lookup_from      N     ms: start of the lookup window (ledger.Record.LookupFrom)
//	created_at       N     ms: first claim
//	updated_at       N     ms: latest state change (claim, takeover, mark, release)
//	expires_at       N     s: TTL, now + retention, refreshed on every write
//	valid_until      N     ms: the message's validity (ledger.Entry.ValidUntil);
//	                       absent: none. Written by the claim, kept when final
//	tenant, channel, class, provider, template, recipient_id
//	                 S     what identifies the message (ledger.Entry)
//	address          S     raw address; removed when the row becomes final
//	subject, body, html
//	                 S     a pre-rendered request's content (or, on rows
//	                       written before rows held render inputs, the
//	                       rendered message); removed when the row becomes final
//	tpl_version      N     the stored template version (0/absent: pre-rendered)
//	tpl_locale       S     that version's locale ("": its default)
//	data             S     the request's template data as JSON: with
//	                       tpl_version, the render inputs; removed when final
//	provider_msg_id  S     the provider's message id
//	reason           S     why FAILED, UNCERTAIN, ABANDONED, or the latest release
//	dlv_status       S     latest applied delivery status (callbacks)
//	dlv_rank         N     its rank; only a higher rank replaces it
//	dlv_at           N     ms: when the provider saw it
//	attn_pk          S     attention shard "attn#NN"; only while indexed
//	attn_sk          S     due time "2006-01-02T15:04:05.000Z" + "#" + key;
//	                       only while indexed
//
// Empty strings are not stored. The attention index (attn_pk, attn_sk) is
// sparse: only rows that need the reconciler carry its keys
// (ledger.Record.Indexed). Claim's put writes none (a first send writes
// no index entry); TakeOver, Release and an UNCERTAIN Mark set both; a
// final Mark removes them. Rows claimed by an earlier release carry the
// keys from their claim; they are listed and resolved as before.
//
// Attribute names are kept as they are: a typical row is about 500 bytes
// (one write unit) and a stored-template email holds its data, not its
// HTML, so shorter names would buy no unit on a typical message while
// every in-flight row of an earlier release would need both spellings. The
// index projects all attributes (tableschema): CloudFormation cannot change
// a deployed index's projection, and a first send no longer writes it.
//
// A PENDING row is due when its lease ends, a released one at
// its retry_at (the reconciler's backoff; a release ends the lease at
// once, so a sender may take it over at once); an UNCERTAIN row is due
// from when it was marked. The shard is
// FNV-1a of the key modulo ledger.AttentionShards (see ledger.Shard).
//
// # Expiry
//
// A row is expired when expires_at is below the current Unix second. Every
// condition treats an expired row as absent (Claim may overwrite it), and
// Get and Attention never return one, because DynamoDB deletes expired
// items late.
//
// # Retries
//
// The SDK retries a write whose response was lost. When such a retry fails
// its condition on the item its own first try wrote (recognised by the new
// claim id, or by the same claim, state and timestamp), Claim, TakeOver
// and Mark report success rather than a conflict; Release reports success
// when the claim is already released. When the answer stays lost (any
// error that is not a failed condition), Claim and TakeOver return the
// claim they tried to take with the error, for the caller to release.
package dynamoledger

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/tableschema"
)

// Attribute names (see the package doc).
const (
	attrPK          = tableschema.PartitionKey
	attrState       = "state"
	attrClaimID     = "claim_id"
	attrAttempts    = "attempts"
	attrReleased    = "released"
	attrReleases    = "releases"
	attrRetryAt     = "retry_at"
	attrLeaseUntil  = "lease_until"
	attrAttemptedAt = "attempted_at"
	attrLookupFrom  = "lookup_from"
	attrCreatedAt   = "created_at"
	attrUpdatedAt   = "updated_at"
	attrExpiresAt   = tableschema.TTLAttribute
	attrValidUntil  = "valid_until"
	attrTrace       = "trace"
	attrTenant      = "tenant"
	attrChannel     = "channel"
	attrClass       = "class"
	attrProvider    = "provider"
	attrHistory     = "history"
	attrTemplate    = "template"
	attrRecipientID = "recipient_id"
	attrAddress     = "address"
	attrSubject     = "subject"
	attrBody        = "body"
	attrHTML        = "html"
	attrTplVersion  = "tpl_version"
	attrTplLocale   = "tpl_locale"
	attrData        = "data"
	attrProviderMsg = "provider_msg_id"
	attrReason      = "reason"
	attrDlvStatus   = "dlv_status"
	attrDlvRank     = "dlv_rank"
	attrDlvAt       = "dlv_at"
	attrAttnPK      = tableschema.AttentionPK
	attrAttnSK      = tableschema.AttentionSK
)

// DefaultRetention is how long rows live after their last write unless
// Config.Retention says otherwise (SENDONCE_RETENTION; README.md, Configuration).
const DefaultRetention = 720 * time.Hour

// DefaultPageSize is the page size of Attention when the query sets no
// limit.
const DefaultPageSize = 100

// API is the part of *dynamodb.Client the ledger uses. Wrap a client to
// count or inspect calls.
type API interface {
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
}

// Ledger is the DynamoDB ledger.Ledger. It is safe for concurrent use.
type Ledger struct {
	db        API
	table     *string
	now       func() time.Time
	retention time.Duration
	newID     func() string
	capacity  func(op string, cc *types.ConsumedCapacity)
	rcc       types.ReturnConsumedCapacity
	scanning  func(op string) // Config.ScanWarning (admin.go)
}

var _ ledger.Ledger = (*Ledger)(nil)

// Config configures a Ledger. The zero value is the production setting.
type Config struct {
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Retention is how long a row lives after its last write; zero means
	// DefaultRetention. New rejects a retention below one minute.
	Retention time.Duration
	// ClaimID generates the claim ids, the fencing tokens; nil means 128
	// random bits in hex. It must return a different id on every call.
	ClaimID func() string
	// ConsumedCapacity, when set, asks DynamoDB for the capacity every
	// successful call consumed (ReturnConsumedCapacity=TOTAL) and is
	// handed it with the operation's name ("claim", "takeover", "mark",
	// "release", "get", "attention", "apply delivery"). Failed conditional
	// writes report none.
	ConsumedCapacity func(op string, cc *types.ConsumedCapacity)
	// ScanWarning, when set, is called with the operation's name ("by
	// event") just before an admin operation falls back to scanning the
	// whole table: ByEvent on a table without the event index. The CLI
	// warns the operator there, since a scan's cost grows with the table.
	ScanWarning func(op string)
}

// New returns a ledger on table through db. It returns an error when db is
// nil, table is empty or the retention is below one minute.
func New(db API, table string, cfg Config) (*Ledger, error) {
	l := &Ledger{db: db, table: aws.String(table), now: cfg.Now, retention: cfg.Retention, newID: cfg.ClaimID,
		capacity: cfg.ConsumedCapacity, rcc: types.ReturnConsumedCapacityNone, scanning: cfg.ScanWarning}
	if l.now == nil {
		l.now = time.Now
	}
	if l.retention == 0 {
		l.retention = DefaultRetention
	}
	if l.newID == nil {
		l.newID = randomID
	}
	switch {
	case db == nil:
		return nil, errors.New("dynamoledger: nil DynamoDB client")
	case table == "":
		return nil, errors.New("dynamoledger: empty table name")
	case l.retention < time.Minute:
		return nil, fmt.Errorf("dynamoledger: retention %v: must be at least 1m", l.retention)
	}
	if l.capacity != nil {
		l.rcc = types.ReturnConsumedCapacityTotal
	}
	return l, nil
}

func randomID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func attnPK(shard int) string { return fmt.Sprintf("attn#%02d", shard) }

const dueLayout = "2006-01-02T15:04:05.000Z"

func dueString(t time.Time) string { return t.UTC().Format(dueLayout) }

func attnSK(due time.Time, key string) string { return dueString(due) + "#" + key }

// clock returns now at the stored precision: milliseconds, UTC.
func (l *Ledger) clock() time.Time { return time.UnixMilli(l.now().UnixMilli()).UTC() }

func (l *Ledger) ttl(now time.Time) types.AttributeValue {
	return numInt(now.Add(l.retention).Unix())
}

func (l *Ledger) report(op string, cc *types.ConsumedCapacity) {
	if l.capacity != nil && cc != nil {
		l.capacity(op, cc)
	}
}

func str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }
func numInt(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}
func millis(t time.Time) types.AttributeValue { return numInt(t.UnixMilli()) }
func keyOf(key string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrPK: str(key)}
}

// Condition and names shared by the writes. Placeholders are the attribute
// names, so every name is escaped whether or not DynamoDB reserves it.
const (
	condClaim = "attribute_not_exists(#pk) OR #expires_at < :now"
	condHeld  = "#state = :pending AND #claim_id = :claim AND #expires_at >= :now"
	condTake  = "#claim_id = :old AND #expires_at >= :now AND ((#state = :pending AND #lease_until <= :now_ms) OR #state = :uncertain)"
	condDlv   = "attribute_exists(#pk) AND #expires_at >= :now AND (attribute_not_exists(#dlv_rank) OR #dlv_rank < :rank)"
	condAttn  = "#attn_pk = :shard AND #attn_sk < :due"
	// condAttnFrom is condAttn from a due time on (AttentionQuery.DueFrom).
	condAttnFrom = "#attn_pk = :shard AND #attn_sk BETWEEN :from AND :due"
	filtLive     = "#expires_at >= :now"
)

// Claim implements ledger.Ledger with one conditional PutItem that
// succeeds when no live row holds e.Key. It returns an input error for an
// empty key or a lease that is not positive, a *ledger.ConflictError
// holding the live row (from the failed write itself), or the DynamoDB
// error, wrapped with the operation and key.
func (l *Ledger) Claim(ctx context.Context, e ledger.Entry, lease time.Duration) (ledger.Claim, error) {
	if err := ledger.CheckClaim(e.Key, lease); err != nil {
		return ledger.Claim{}, fmt.Errorf("dynamoledger: claim %s: %w", e.Key, err)
	}
	now := l.clock()
	c := ledger.Claim{Key: e.Key, ClaimID: l.newID(), Attempt: 1, LeaseUntil: now.Add(lease), AttemptedAt: now}
	nowMS := millis(now)
	item := make(map[string]types.AttributeValue, 24)
	item[attrPK] = str(e.Key)
	item[attrState] = str(string(ledger.StatePending))
	item[attrClaimID] = str(c.ClaimID)
	item[attrAttempts] = numInt(1)
	item[attrLeaseUntil] = millis(c.LeaseUntil)
	item[attrAttemptedAt] = nowMS
	item[attrLookupFrom] = nowMS
	item[attrCreatedAt] = nowMS
	item[attrUpdatedAt] = nowMS
	item[attrExpiresAt] = l.ttl(now)
	// A first claim is not indexed (ledger package doc, Stranding).
	for _, f := range [...]struct{ name, v string }{
		{attrTenant, e.Tenant}, {attrChannel, e.Channel}, {attrClass, e.Class},
		{attrProvider, e.Provider}, {attrTemplate, e.Template}, {attrRecipientID, e.RecipientID},
		{attrAddress, e.Address}, {attrSubject, e.Subject}, {attrBody, e.Body},
		{attrData, e.Data},
	} {
		if f.v != "" {
			item[f.name] = str(f.v)
		}
	}
	if e.HTML != "" {
		item[attrHTML] = str(e.HTML)
	}
	if e.TemplateVersion > 0 {
		item[attrTplVersion] = numInt(int64(e.TemplateVersion))
	}
	if e.TemplateLocale != "" {
		item[attrTplLocale] = str(e.TemplateLocale)
	}
	if e.EventID != "" {
		item[attrEventPK] = str(eventPK(e.Tenant, e.EventID)) // the event lookup (admin.go)
	}
	if !e.ValidUntil.IsZero() {
		item[attrValidUntil] = millis(e.ValidUntil)
	}
	if e.Trace != "" {
		item[attrTrace] = str(e.Trace)
	}
	out, err := l.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                           l.table,
		Item:                                item,
		ConditionExpression:                 aws.String(condClaim),
		ExpressionAttributeNames:            map[string]string{"#pk": attrPK, "#expires_at": attrExpiresAt},
		ExpressionAttributeValues:           map[string]types.AttributeValue{":now": numInt(now.Unix())},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		ReturnConsumedCapacity:              l.rcc,
	})
	if err != nil {
		old, failed, derr := conditionFailed(err)
		switch {
		case !failed:
			// The answer was lost: the write may have applied.
			return c, fmt.Errorf("dynamoledger: claim %s: %w", e.Key, err)
		case derr != nil:
			return ledger.Claim{}, fmt.Errorf("dynamoledger: claim %s: %w", e.Key, derr)
		case old.ClaimID == c.ClaimID:
			return c, nil // a retry found its own first try's row
		}
		if old.Key == "" {
			old.Key = e.Key
		}
		return ledger.Claim{}, fmt.Errorf("dynamoledger: claim %s: %w", e.Key, &ledger.ConflictError{Op: "claim", Current: old})
	}
	l.report("claim", out.ConsumedCapacity)
	return c, nil
}

// TakeOver implements ledger.Ledger with one conditional UpdateItem on
// cur.ClaimID. It returns an input error for an empty key or a lease that
// is not positive, a *ledger.ConflictError holding the current row when
// the row is held by another claim or is neither a stale PENDING nor an
// UNCERTAIN row, ledger.ErrNotFound when no live row exists, or the
// DynamoDB error, wrapped with the operation and key.
func (l *Ledger) TakeOver(ctx context.Context, cur ledger.Record, provider string, lease time.Duration) (ledger.Claim, error) {
	if err := ledger.CheckClaim(cur.Key, lease); err != nil {
		return ledger.Claim{}, fmt.Errorf("dynamoledger: takeover %s: %w", cur.Key, err)
	}
	now := l.clock()
	newID := l.newID()
	leaseUntil := now.Add(lease)
	nowMS := millis(now)
	// The lookup window restarts after a release (nothing was sent), and
	// otherwise keeps covering the attempt being resolved.
	lookupFrom := "#lookup_from = if_not_exists(#lookup_from, :prev_ms)"
	prev := millis(cur.AttemptedAt)
	if cur.Released {
		lookupFrom, prev = "#lookup_from = :prev_ms", nowMS
	}
	names := map[string]string{
		"#state": attrState, "#claim_id": attrClaimID, "#attempts": attrAttempts,
		"#lease_until": attrLeaseUntil, "#attempted_at": attrAttemptedAt, "#updated_at": attrUpdatedAt,
		"#expires_at": attrExpiresAt, "#attn_pk": attrAttnPK, "#attn_sk": attrAttnSK, "#released": attrReleased,
		"#retry_at": attrRetryAt, "#lookup_from": attrLookupFrom, "#history": attrHistory,
	}
	// The new attempt's provider, when the caller names one.
	setProvider := ""
	if provider != "" {
		setProvider, names["#provider"] = ", #provider = :provider", attrProvider
	}
	input := &dynamodb.UpdateItemInput{
		ConditionExpression: aws.String(condTake),
		UpdateExpression: aws.String("SET #state = :pending, #claim_id = :new, #attempts = #attempts + :one, " +
			"#lease_until = :lease, #attempted_at = :now_ms, #updated_at = :now_ms, #expires_at = :ttl, " +
			"#attn_pk = :shard, #attn_sk = :due, #history = :history, " + lookupFrom + setProvider + " REMOVE #released, #retry_at"),
		ExpressionAttributeNames: names,
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":prev_ms":   prev,
			":old":       str(cur.ClaimID),
			":new":       str(newID),
			":now":       numInt(now.Unix()),
			":now_ms":    nowMS,
			":pending":   str(string(ledger.StatePending)),
			":uncertain": str(string(ledger.StateUncertain)),
			":one":       numInt(1),
			":lease":     millis(leaseUntil),
			":ttl":       l.ttl(now),
			":shard":     str(attnPK(ledger.Shard(cur.Key))),
			":due":       str(attnSK(leaseUntil, cur.Key)),
			":history":   strList(ledger.NextHistory(cur)),
		},
		ReturnValues: types.ReturnValueUpdatedNew,
	}
	if provider != "" {
		input.ExpressionAttributeValues[":provider"] = str(provider)
	}
	out, old, failed, err := l.update(ctx, "takeover", cur.Key, input)
	switch {
	case err != nil && !failed:
		// The answer was lost: the write may have applied.
		return ledger.Claim{Key: cur.Key, ClaimID: newID, Attempt: cur.Attempts + 1, LeaseUntil: leaseUntil, AttemptedAt: now}, err
	case err != nil:
		return ledger.Claim{}, err
	case failed && (old.Key == "" || old.ExpiresAt.Unix() < now.Unix()):
		return ledger.Claim{}, fmt.Errorf("dynamoledger: takeover %s: %w", cur.Key, ledger.ErrNotFound)
	case failed && old.ClaimID == newID:
		return ledger.Claim{Key: cur.Key, ClaimID: newID, Attempt: old.Attempts, LeaseUntil: leaseUntil, AttemptedAt: now}, nil
	case failed:
		return ledger.Claim{}, fmt.Errorf("dynamoledger: takeover %s: %w", cur.Key, &ledger.ConflictError{Op: "takeover", Current: old})
	}
	attempts, err := intAttr(out.Attributes, attrAttempts)
	if err != nil {
		return ledger.Claim{}, fmt.Errorf("dynamoledger: takeover %s: %w", cur.Key, err)
	}
	return ledger.Claim{Key: cur.Key, ClaimID: newID, Attempt: int(attempts), LeaseUntil: leaseUntil, AttemptedAt: now}, nil
}

// Mark implements ledger.Ledger with one UpdateItem conditional on the row
// being live and PENDING under c.ClaimID. The row's reason becomes
// o.Reason (removed when empty) and its provider message id becomes
// o.ProviderMessageID when that is set; delivery attributes are untouched.
// A final outcome removes the address, the rendered message and the
// attention keys; UNCERTAIN keeps them and makes the row due now. It
// returns an input error for an outcome state other than SENT, FAILED,
// UNCERTAIN or ABANDONED, an error matching ledger.ErrFencingLost when c
// does not hold the row, or the DynamoDB error, wrapped with the operation
// and key.
func (l *Ledger) Mark(ctx context.Context, c ledger.Claim, o ledger.Outcome) error {
	if !o.State.Final() && o.State != ledger.StateUncertain {
		return fmt.Errorf("dynamoledger: mark %s: outcome state %q: want SENT, FAILED, UNCERTAIN or ABANDONED", c.Key, o.State)
	}
	now := l.clock()
	names := map[string]string{
		"#state": attrState, "#claim_id": attrClaimID, "#expires_at": attrExpiresAt,
		"#updated_at": attrUpdatedAt, "#released": attrReleased, "#reason": attrReason, "#retry_at": attrRetryAt,
	}
	values := map[string]types.AttributeValue{
		":pending": str(string(ledger.StatePending)),
		":claim":   str(c.ClaimID),
		":now":     numInt(now.Unix()),
		":state":   str(string(o.State)),
		":now_ms":  millis(now),
		":ttl":     l.ttl(now),
	}
	set := "SET #state = :state, #updated_at = :now_ms, #expires_at = :ttl"
	remove := " REMOVE #released, #retry_at"
	if o.Reason != "" {
		set += ", #reason = :reason"
		values[":reason"] = str(o.Reason)
	} else {
		remove += ", #reason"
	}
	if o.ProviderMessageID != "" {
		set += ", #provider_msg_id = :pmid"
		names["#provider_msg_id"] = attrProviderMsg
		values[":pmid"] = str(o.ProviderMessageID)
	}
	if o.State.Final() {
		remove += ", #address, #subject, #body"
		names["#address"], names["#subject"], names["#body"] = attrAddress, attrSubject, attrBody
		remove += ", #html, #data"
		names["#html"], names["#data"] = attrHTML, attrData
		set, remove = finalIndex(o.State, c.Key, now, set, remove, names, values) // abandoned rows stay listable (admin.go)
	} else {
		set += ", #attn_pk = :shard, #attn_sk = :due"
		names["#attn_pk"], names["#attn_sk"] = attrAttnPK, attrAttnSK
		values[":shard"], values[":due"] = str(attnPK(ledger.Shard(c.Key))), str(attnSK(now, c.Key))
	}
	_, old, failed, err := l.update(ctx, "mark", c.Key, &dynamodb.UpdateItemInput{
		ConditionExpression:       aws.String(condHeld),
		UpdateExpression:          aws.String(set + remove),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	})
	switch {
	case err != nil:
		return err
	case !failed:
		return nil
	case old.ClaimID == c.ClaimID && old.State == o.State && old.UpdatedAt.Equal(now):
		return nil // a retry found its own first try's write
	}
	return fmt.Errorf("dynamoledger: mark %s: %w", c.Key, fenced(old, now))
}

// Release implements ledger.Ledger with one UpdateItem conditional on the
// row being live, PENDING under c.ClaimID and not yet released: the lease
// ends now, the row is marked released with reason (removed when empty),
// its releases count goes up by one and it becomes due at retryAt (now if
// that is zero or past). A claim already released is left as it is and
// Release succeeds. It returns an error matching ledger.ErrFencingLost
// when c does not hold the row, or the DynamoDB error, wrapped with the
// operation and key.
func (l *Ledger) Release(ctx context.Context, c ledger.Claim, reason string, retryAt time.Time) error {
	now := l.clock()
	if retryAt.Before(now) {
		retryAt = now
	}
	retryAt = time.UnixMilli(retryAt.UnixMilli()).UTC()
	names := map[string]string{
		"#state": attrState, "#claim_id": attrClaimID, "#expires_at": attrExpiresAt,
		"#released": attrReleased, "#lease_until": attrLeaseUntil, "#updated_at": attrUpdatedAt,
		"#attn_pk": attrAttnPK, "#attn_sk": attrAttnSK, "#reason": attrReason, "#releases": attrReleases, "#retry_at": attrRetryAt,
	}
	nowMS := millis(now)
	values := map[string]types.AttributeValue{
		":pending": str(string(ledger.StatePending)),
		":claim":   str(c.ClaimID),
		":now":     numInt(now.Unix()),
		":true":    &types.AttributeValueMemberBOOL{Value: true},
		":now_ms":  nowMS,
		":retry":   millis(retryAt),
		":ttl":     l.ttl(now),
		":shard":   str(attnPK(ledger.Shard(c.Key))),
		":due":     str(attnSK(retryAt, c.Key)),
		":zero":    numInt(0),
		":one":     numInt(1),
	}
	update := "SET #released = :true, #lease_until = :now_ms, #retry_at = :retry, #updated_at = :now_ms, #expires_at = :ttl, " +
		"#attn_pk = :shard, #attn_sk = :due, #releases = if_not_exists(#releases, :zero) + :one"
	if reason != "" {
		update += ", #reason = :reason"
		values[":reason"] = str(reason)
	} else {
		update += " REMOVE #reason"
	}
	_, old, failed, err := l.update(ctx, "release", c.Key, &dynamodb.UpdateItemInput{
		ConditionExpression:       aws.String(condHeld + " AND attribute_not_exists(#released)"),
		UpdateExpression:          aws.String(update),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	})
	switch {
	case err != nil:
		return err
	case !failed:
		return nil
	case old.State == ledger.StatePending && old.ClaimID == c.ClaimID && old.Released && old.ExpiresAt.Unix() >= now.Unix():
		return nil // already released (perhaps by this call's own first try)
	}
	return fmt.Errorf("dynamoledger: release %s: %w", c.Key, fenced(old, now))
}

// fenced explains why a claim no longer holds a row.
func fenced(old ledger.Record, now time.Time) error {
	if old.Key == "" || old.ExpiresAt.Unix() < now.Unix() {
		return fmt.Errorf("%w: no live row", ledger.ErrFencingLost)
	}
	return fmt.Errorf("%w: row is %s under attempt %d", ledger.ErrFencingLost, old.State, old.Attempts)
}

// Get implements ledger.Ledger with a strongly consistent GetItem. It
// returns ledger.ErrNotFound when no live row holds key, or the DynamoDB
// or decoding error, wrapped with the operation and key.
func (l *Ledger) Get(ctx context.Context, key string) (ledger.Record, error) {
	if key == "" {
		return ledger.Record{}, errors.New("dynamoledger: get: empty key")
	}
	now := l.clock()
	out, err := l.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:              l.table,
		Key:                    keyOf(key),
		ConsistentRead:         aws.Bool(true),
		ReturnConsumedCapacity: l.rcc,
	})
	if err != nil {
		return ledger.Record{}, fmt.Errorf("dynamoledger: get %s: %w", key, err)
	}
	l.report("get", out.ConsumedCapacity)
	if out.Item == nil {
		return ledger.Record{}, fmt.Errorf("dynamoledger: get %s: %w", key, ledger.ErrNotFound)
	}
	r, err := decode(out.Item)
	if err != nil {
		return ledger.Record{}, fmt.Errorf("dynamoledger: get %s: %w", key, err)
	}
	if r.ExpiresAt.Unix() < now.Unix() {
		return ledger.Record{}, fmt.Errorf("dynamoledger: get %s: %w", key, ledger.ErrNotFound)
	}
	return r, nil
}

// cursor is the decoded form of an attention page's cursor: the
// LastEvaluatedKey of the index query.
type cursor struct {
	PK     string `json:"k"`
	AttnPK string `json:"s"`
	AttnSK string `json:"d"`
}

// Attention implements ledger.Ledger with one Query of the attention index
// (attn_sk below q.DueBefore, from q.DueFrom when set, ascending),
// skipping expired rows. A page may
// hold fewer rows than the limit, even none, while its cursor is not
// empty. It returns an input error for a shard outside [0,
// ledger.AttentionShards), a negative limit or a cursor it did not hand
// out (or for another shard), or the DynamoDB or decoding error, wrapped
// with the operation and shard.
func (l *Ledger) Attention(ctx context.Context, q ledger.AttentionQuery) (ledger.AttentionPage, error) {
	if q.Shard < 0 || q.Shard >= ledger.AttentionShards {
		return ledger.AttentionPage{}, fmt.Errorf("dynamoledger: attention: shard %d outside [0, %d)", q.Shard, ledger.AttentionShards)
	}
	if q.Limit < 0 {
		return ledger.AttentionPage{}, fmt.Errorf("dynamoledger: attention shard %d: negative limit %d", q.Shard, q.Limit)
	}
	shard := attnPK(q.Shard)
	if !q.DueFrom.IsZero() && !q.DueFrom.Before(q.DueBefore) {
		return ledger.AttentionPage{Records: []ledger.Record{}}, nil
	}
	in := &dynamodb.QueryInput{
		TableName:              l.table,
		IndexName:              aws.String(tableschema.AttentionIndex),
		KeyConditionExpression: aws.String(condAttn),
		FilterExpression:       aws.String(filtLive),
		ExpressionAttributeNames: map[string]string{
			"#attn_pk": attrAttnPK, "#attn_sk": attrAttnSK, "#expires_at": attrExpiresAt,
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":shard": str(shard),
			":due":   str(dueString(q.DueBefore)),
			":now":   numInt(l.clock().Unix()),
		},
		ScanIndexForward:       aws.Bool(true),
		Limit:                  aws.Int32(DefaultPageSize),
		ReturnConsumedCapacity: l.rcc,
	}
	if q.Limit > 0 {
		in.Limit = aws.Int32(int32(min(q.Limit, 1000)))
	}
	if !q.DueFrom.IsZero() {
		// The sort key is the due time and "#" and the key: BETWEEN's
		// upper end excludes the rows due at DueBefore, as "<" does.
		in.KeyConditionExpression = aws.String(condAttnFrom)
		in.ExpressionAttributeValues[":from"] = str(dueString(q.DueFrom))
	}
	if q.Cursor != "" {
		start, err := decodeCursor(q.Cursor, shard)
		if err != nil {
			return ledger.AttentionPage{}, fmt.Errorf("dynamoledger: attention shard %d: %w", q.Shard, err)
		}
		in.ExclusiveStartKey = start
	}
	out, err := l.db.Query(ctx, in)
	if err != nil {
		return ledger.AttentionPage{}, fmt.Errorf("dynamoledger: attention shard %d: %w", q.Shard, err)
	}
	l.report("attention", out.ConsumedCapacity)
	p := ledger.AttentionPage{Records: make([]ledger.Record, 0, len(out.Items))}
	for _, item := range out.Items {
		r, err := decode(item)
		if err != nil {
			return ledger.AttentionPage{}, fmt.Errorf("dynamoledger: attention shard %d: %w", q.Shard, err)
		}
		p.Records = append(p.Records, r)
	}
	if len(out.LastEvaluatedKey) > 0 {
		c := cursor{PK: sAttr(out.LastEvaluatedKey, attrPK), AttnPK: sAttr(out.LastEvaluatedKey, attrAttnPK), AttnSK: sAttr(out.LastEvaluatedKey, attrAttnSK)}
		b, err := json.Marshal(c)
		if err != nil {
			return ledger.AttentionPage{}, fmt.Errorf("dynamoledger: attention shard %d: cursor: %w", q.Shard, err)
		}
		p.Cursor = base64.RawURLEncoding.EncodeToString(b)
	}
	return p, nil
}

func decodeCursor(s, shard string) (map[string]types.AttributeValue, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, errors.New("malformed cursor: not base64url")
	}
	var c cursor
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, errors.New("malformed cursor: not a page cursor")
	}
	if c.PK == "" || c.AttnSK == "" || c.AttnPK != shard {
		return nil, errors.New("malformed cursor: not a cursor of this shard")
	}
	return map[string]types.AttributeValue{attrPK: str(c.PK), attrAttnPK: str(c.AttnPK), attrAttnSK: str(c.AttnSK)}, nil
}

// ApplyDelivery implements ledger.Ledger with one UpdateItem conditional on
// a live row with a lower (or no) delivery rank; the provider message id
// is set only if the row has none. It returns an input error for an empty
// key or status or a rank below 1, ledger.ErrNotFound when no live row
// holds key, or the DynamoDB error, wrapped with the operation and key.
func (l *Ledger) ApplyDelivery(ctx context.Context, key string, d ledger.Delivery) (bool, error) {
	if err := checkDelivery(key, d); err != nil {
		return false, fmt.Errorf("dynamoledger: apply delivery %s: %w", key, err)
	}
	now := l.clock()
	names := map[string]string{
		"#pk": attrPK, "#expires_at": attrExpiresAt, "#dlv_rank": attrDlvRank,
		"#dlv_status": attrDlvStatus, "#dlv_at": attrDlvAt,
	}
	values := map[string]types.AttributeValue{
		":now":    numInt(now.Unix()),
		":rank":   numInt(int64(d.Rank)),
		":status": str(d.Status),
		":at":     millis(d.At),
		":ttl":    l.ttl(now),
	}
	update := "SET #dlv_status = :status, #dlv_rank = :rank, #dlv_at = :at, #expires_at = :ttl"
	if d.ProviderMessageID != "" {
		update += ", #provider_msg_id = if_not_exists(#provider_msg_id, :pmid)"
		names["#provider_msg_id"] = attrProviderMsg
		values[":pmid"] = str(d.ProviderMessageID)
	}
	_, old, failed, err := l.update(ctx, "apply delivery", key, &dynamodb.UpdateItemInput{
		ConditionExpression:       aws.String(condDlv),
		UpdateExpression:          aws.String(update),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	})
	switch {
	case err != nil:
		return false, err
	case !failed:
		return true, nil
	case old.Key == "" || old.ExpiresAt.Unix() < now.Unix():
		return false, fmt.Errorf("dynamoledger: apply delivery %s: %w", key, ledger.ErrNotFound)
	}
	return false, nil // a status of the same or a higher rank is already applied
}

// conditionFailed reports whether err is a failed condition and decodes the
// old item it carries (a zero Record when there was none).
func conditionFailed(err error) (old ledger.Record, failed bool, decodeErr error) {
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		return ledger.Record{}, false, nil
	}
	if len(ccf.Item) == 0 {
		return ledger.Record{}, true, nil
	}
	old, decodeErr = decode(ccf.Item)
	return old, true, decodeErr
}

// update runs one conditional UpdateItem of op on key: in gets the table,
// the key, ALL_OLD on a failed condition and the capacity report. When
// the condition failed, failed is true and old is the row as it was (a
// zero Record when there was none). err is any other error, wrapped with
// op and key: with failed false the answer was lost and the write may
// have applied; with failed true the old row could not be decoded.
func (l *Ledger) update(ctx context.Context, op, key string, in *dynamodb.UpdateItemInput) (out *dynamodb.UpdateItemOutput, old ledger.Record, failed bool, err error) {
	in.TableName, in.Key = l.table, keyOf(key)
	in.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	in.ReturnConsumedCapacity = l.rcc
	out, err = l.db.UpdateItem(ctx, in)
	if err == nil {
		l.report(op, out.ConsumedCapacity)
		return out, ledger.Record{}, false, nil
	}
	old, failed, derr := conditionFailed(err)
	switch {
	case !failed:
		return nil, ledger.Record{}, false, fmt.Errorf("dynamoledger: %s %s: %w", op, key, err)
	case derr != nil:
		return nil, ledger.Record{}, true, fmt.Errorf("dynamoledger: %s %s: %w", op, key, derr)
	}
	return nil, old, true, nil
}

func checkDelivery(key string, d ledger.Delivery) error {
	switch {
	case key == "":
		return errors.New("empty key")
	case d.Rank < 1:
		return fmt.Errorf("rank %d: must be at least 1", d.Rank)
	case d.Status == "":
		return errors.New("empty status")
	}
	return nil
}

// BatchGetAPI is the DynamoDB call Owners makes; *dynamodb.Client has it.
// A client without it (a test double) makes Owners fail, which leaves a
// lookup's answer unproven.
type BatchGetAPI interface {
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
}

var _ ledger.OwnerIndex = (*Ledger)(nil)

// ownerPK is the item that records the owner of provider's message id:
// "pmid#<provider>#<id>", attribute "owner", with the rows' retention.
func ownerPK(provider, id string) string { return "pmid#" + provider + "#" + id }

const attrOwner = "owner"

// RecordOwner implements ledger.OwnerIndex with one PutItem of a small
// item (about 100 bytes: one write unit).
func (l *Ledger) RecordOwner(ctx context.Context, provider, id, key string) error {
	if provider == "" || id == "" || key == "" {
		return fmt.Errorf("dynamoledger: record owner: provider %q, id %q and key %q must be set", provider, id, key)
	}
	item := tableschema.Key(ownerPK(provider, id))
	item[attrOwner] = str(key)
	item[attrExpiresAt] = l.ttl(l.clock())
	out, err := l.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: l.table, Item: item, ReturnConsumedCapacity: l.rcc})
	if err != nil {
		return fmt.Errorf("dynamoledger: record owner of %s message %s: %w", provider, id, err)
	}
	l.report("record owner", out.ConsumedCapacity)
	return nil
}

// Owners implements ledger.OwnerIndex with one BatchGetItem per 100 ids
// (eventually consistent: an owner written a moment ago may be missing,
// which leaves the answer unproven), retrying unprocessed keys twice.
func (l *Ledger) Owners(ctx context.Context, provider string, ids []string) (map[string]string, error) {
	bg, ok := l.db.(BatchGetAPI)
	if !ok {
		return nil, errors.New("dynamoledger: owners: the DynamoDB client has no BatchGetItem")
	}
	out := map[string]string{}
	for start := 0; start < len(ids); start += 100 {
		var keys []map[string]types.AttributeValue
		for _, id := range ids[start:min(start+100, len(ids))] {
			keys = append(keys, tableschema.Key(ownerPK(provider, id)))
		}
		req := map[string]types.KeysAndAttributes{*l.table: {Keys: keys}}
		for try := 0; len(req) > 0; try++ {
			if try == 3 {
				return nil, fmt.Errorf("dynamoledger: owners of %s messages: keys left unprocessed", provider)
			}
			res, err := bg.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req, ReturnConsumedCapacity: l.rcc})
			if err != nil {
				return nil, fmt.Errorf("dynamoledger: owners of %s messages: %w", provider, err)
			}
			for _, cc := range res.ConsumedCapacity {
				l.report("owners", &cc)
			}
			for _, item := range res.Responses[*l.table] {
				pk := sAttr(item, attrPK)
				if owner := sAttr(item, attrOwner); owner != "" && strings.HasPrefix(pk, ownerPK(provider, "")) {
					out[strings.TrimPrefix(pk, ownerPK(provider, ""))] = owner
				}
			}
			req = res.UnprocessedKeys
		}
	}
	return out, nil
}
