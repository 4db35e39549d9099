package api

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sendonce/sendonce/internal/tableschema"
)

// IdemState is the state of an idempotency record.
type IdemState string

// The states of an idempotency record.
const (
	// IdemInFlight: a request holds the record under a lease and is
	// enqueueing now. Past its lease the record is taken over by the next
	// request with the same key and the same body (the first one died).
	IdemInFlight IdemState = "in_flight"
	// IdemCompleted: the response is stored; a retry gets it again.
	IdemCompleted IdemState = "completed"
)

// Idempotency record attributes.
const (
	attrState      = "state"
	attrFP         = "fingerprint"
	attrFields     = "fields"
	attrToken      = "token"
	attrLeaseUntil = "lease_until"
	attrStatus     = "status"
	attrBody       = "body"
	attrLedgerKey  = "ledger_key"
	attrCreatedAt  = "created_at"
)

// ErrFencingLost is returned by IdemStore.Complete when the record is no
// longer held by the caller's token (it was taken over or has expired).
var ErrFencingLost = errors.New("api: idempotency record lost (fenced out)")

// Fingerprint identifies a request's content: Sum is the SHA-256 of its
// canonical JSON; Fields holds a short hash per top-level field so a
// mismatch can be named without storing the request (or its addresses).
type Fingerprint struct {
	Sum    string
	Fields map[string]string
}

// Differ returns the names of fields whose hashes differ between f and o,
// sorted.
func (f Fingerprint) Differ(o Fingerprint) []string {
	var d []string
	for k, v := range f.Fields {
		if o.Fields[k] != v {
			d = append(d, k)
		}
	}
	for k := range o.Fields {
		if _, ok := f.Fields[k]; !ok {
			d = append(d, k)
		}
	}
	slices.Sort(d)
	return slices.Compact(d)
}

// Outcome is what Begin found.
type Outcome int

// The outcomes of Begin.
const (
	// Started: the caller holds a new (or taken-over) in-flight record and
	// must Complete or Abandon it.
	Started Outcome = iota + 1
	// Replay: a completed record with the same fingerprint; answer with
	// its stored response.
	Replay
	// Mismatch: the key was used with a different request.
	Mismatch
	// InFlight: another request with this key holds a live lease.
	InFlight
)

// Begun is the result of Begin.
type Begun struct {
	Outcome Outcome
	// Token is the fencing token of a Started record.
	Token string
	// TookOver is true when Started replaced a dead in-flight record.
	TookOver bool
	// Status, Body and LedgerKey are the stored response of a Replay.
	Status    int
	Body      string
	LedgerKey string
	// Differ names the fields that differ, for a Mismatch.
	Differ []string
	// RetryAfter is how long the live lease has left, for InFlight.
	RetryAfter time.Duration
}

// IdemStore keeps the API's idempotency records in the sendonce table:
// pk "idem#<tenant>#<hex SHA-256 of the Idempotency-Key>".
type IdemStore struct {
	db        DynamoDB
	table     string
	now       func() time.Time
	lease     time.Duration
	retention time.Duration
}

// NewIdemStore returns an IdemStore on table. lease is how long an
// in-flight record is owned before a retry may take it over; retention is
// how long records are kept (their TTL). Both must be positive, retention
// longer than lease.
func NewIdemStore(db DynamoDB, table string, lease, retention time.Duration, now func() time.Time) *IdemStore {
	return &IdemStore{db: db, table: table, now: now, lease: lease, retention: retention}
}

func idemPK(tenant, key string) string {
	sum := sha256.Sum256([]byte(key))
	return "idem#" + tenant + "#" + hex.EncodeToString(sum[:])
}

// Begin claims (tenant, key) for a request with fingerprint fp that will
// enqueue ledgerKey. It makes one conditional PutItem that succeeds when no
// live record exists (absent, or past its TTL: DynamoDB deletes expired
// items late). When a live record is in the way, the failed write returns
// it and Begin decides: a different fingerprint is a Mismatch, a completed
// record a Replay, an in-flight record with a live lease InFlight, and an
// in-flight record past its lease is taken over with a second PutItem
// conditional on the dead holder's token (so only one retry wins).
//
// A write of Begin's that was applied but whose answer was lost (the SDK
// retries it, and the retry fails its condition on the record the first
// try wrote) is recognised by its fencing token in the returned record:
// Begin reports Started, not InFlight, to the request that made it.
func (s *IdemStore) Begin(ctx context.Context, tenant, key string, fp Fingerprint, ledgerKey string) (Begun, error) {
	pk := idemPK(tenant, key)
	now := s.now()
	token, err := newToken()
	if err != nil {
		return Begun{}, fmt.Errorf("api: idempotency begin %s: %w", pk, err)
	}
	item := map[string]types.AttributeValue{
		tableschema.PartitionKey: &types.AttributeValueMemberS{Value: pk},
		attrState:                &types.AttributeValueMemberS{Value: string(IdemInFlight)},
		attrFP:                   &types.AttributeValueMemberS{Value: fp.Sum},
		attrFields:               fieldsAV(fp.Fields),
		attrToken:                &types.AttributeValueMemberS{Value: token},
		attrLeaseUntil:           numAV(now.Add(s.lease).UnixMilli()),
		attrLedgerKey:            &types.AttributeValueMemberS{Value: ledgerKey},
		attrCreatedAt:            &types.AttributeValueMemberS{Value: now.UTC().Format(time.RFC3339Nano)},
		tableschema.TTLAttribute: numAV(now.Add(s.retention).Unix()),
	}
	in := &dynamodb.PutItemInput{
		TableName:                           aws.String(s.table),
		Item:                                item,
		ConditionExpression:                 aws.String("attribute_not_exists(#pk) OR #exp <= :now"),
		ExpressionAttributeNames:            map[string]string{"#pk": tableschema.PartitionKey, "#exp": tableschema.TTLAttribute},
		ExpressionAttributeValues:           map[string]types.AttributeValue{":now": numAV(now.Unix())},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	tookOver := false
	// Each round either wins or learns the current record from the failed
	// write. Two rounds suffice unless takeovers race; give up after four.
	for range 4 {
		_, err := s.db.PutItem(ctx, in)
		if err == nil {
			return Begun{Outcome: Started, Token: token, TookOver: tookOver}, nil
		}
		var ccf *types.ConditionalCheckFailedException
		if !errors.As(err, &ccf) {
			return Begun{}, fmt.Errorf("api: idempotency begin %s: %w", pk, err)
		}
		old := decodeIdem(ccf.Item)
		if old.token == token {
			// Our own write: it was applied, its answer was lost, and the
			// SDK's retry failed the condition on the record it made.
			return Begun{Outcome: Started, Token: token, TookOver: tookOver}, nil
		}
		if old.token == "" {
			// The record vanished between writes (or was unreadable): try
			// the create again.
			in.ConditionExpression = aws.String("attribute_not_exists(#pk) OR #exp <= :now")
			in.ExpressionAttributeNames = map[string]string{"#pk": tableschema.PartitionKey, "#exp": tableschema.TTLAttribute}
			in.ExpressionAttributeValues = map[string]types.AttributeValue{":now": numAV(now.Unix())}
			tookOver = false
			continue
		}
		switch {
		case old.fp != fp.Sum:
			return Begun{Outcome: Mismatch, Differ: fp.Differ(Fingerprint{Fields: old.fields})}, nil
		case old.state == IdemCompleted:
			return Begun{Outcome: Replay, Status: old.status, Body: old.body, LedgerKey: old.ledgerKey}, nil
		case now.Before(old.leaseUntil):
			return Begun{Outcome: InFlight, RetryAfter: old.leaseUntil.Sub(now)}, nil
		}
		// A dead in-flight record: take it over, fenced on its token.
		in.ConditionExpression = aws.String("#tok = :tok AND #st = :inflight")
		in.ExpressionAttributeNames = map[string]string{"#tok": attrToken, "#st": attrState}
		in.ExpressionAttributeValues = map[string]types.AttributeValue{
			":tok":      &types.AttributeValueMemberS{Value: old.token},
			":inflight": &types.AttributeValueMemberS{Value: string(IdemInFlight)},
		}
		tookOver = true
	}
	return Begun{}, fmt.Errorf("api: idempotency begin %s: lost too many races", pk)
}

// Complete stores the response of the request holding token and marks the
// record completed. It returns ErrFencingLost if token no longer holds an
// in-flight record. A retry of its own applied write (the answer was lost)
// finds the record completed under token and is a success.
func (s *IdemStore) Complete(ctx context.Context, tenant, key, token string, status int, body string) error {
	pk := idemPK(tenant, key)
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                aws.String(s.table),
		Key:                      map[string]types.AttributeValue{tableschema.PartitionKey: &types.AttributeValueMemberS{Value: pk}},
		UpdateExpression:         aws.String("SET #st = :done, #status = :status, #body = :body REMOVE #lease"),
		ConditionExpression:      aws.String("#tok = :tok AND #st = :inflight"),
		ExpressionAttributeNames: map[string]string{"#st": attrState, "#status": attrStatus, "#body": attrBody, "#lease": attrLeaseUntil, "#tok": attrToken},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":done":     &types.AttributeValueMemberS{Value: string(IdemCompleted)},
			":inflight": &types.AttributeValueMemberS{Value: string(IdemInFlight)},
			":status":   numAV(int64(status)),
			":body":     &types.AttributeValueMemberS{Value: body},
			":tok":      &types.AttributeValueMemberS{Value: token},
		},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		if old := decodeIdem(ccf.Item); old.token == token && old.state == IdemCompleted {
			return nil // our own write, retried after its answer was lost
		}
		return fmt.Errorf("api: idempotency complete %s: %w", pk, ErrFencingLost)
	}
	if err != nil {
		return fmt.Errorf("api: idempotency complete %s: %w", pk, err)
	}
	return nil
}

// Abandon deletes the in-flight record held by token, so that a retry with
// the same key starts afresh (used when the request was not accepted: rate
// limited, or the queue failed). A record no longer held by token is left
// alone.
func (s *IdemStore) Abandon(ctx context.Context, tenant, key, token string) error {
	pk := idemPK(tenant, key)
	_, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                aws.String(s.table),
		Key:                      map[string]types.AttributeValue{tableschema.PartitionKey: &types.AttributeValueMemberS{Value: pk}},
		ConditionExpression:      aws.String("#tok = :tok AND #st = :inflight"),
		ExpressionAttributeNames: map[string]string{"#st": attrState, "#tok": attrToken},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":inflight": &types.AttributeValueMemberS{Value: string(IdemInFlight)},
			":tok":      &types.AttributeValueMemberS{Value: token},
		},
	})
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		return fmt.Errorf("api: idempotency abandon %s: %w", pk, err)
	}
	return nil
}

type idemRecord struct {
	state      IdemState
	fp         string
	fields     map[string]string
	token      string
	leaseUntil time.Time
	status     int
	body       string
	ledgerKey  string
}

func decodeIdem(item map[string]types.AttributeValue) idemRecord {
	var r idemRecord
	r.state = IdemState(str(item[attrState]))
	r.fp = str(item[attrFP])
	r.token = str(item[attrToken])
	r.body = str(item[attrBody])
	r.ledgerKey = str(item[attrLedgerKey])
	if ms, ok := num(item[attrLeaseUntil]); ok {
		r.leaseUntil = time.UnixMilli(ms)
	}
	if st, ok := num(item[attrStatus]); ok {
		r.status = int(st)
	}
	if m, ok := item[attrFields].(*types.AttributeValueMemberM); ok {
		r.fields = make(map[string]string, len(m.Value))
		for k, v := range m.Value {
			r.fields[k] = str(v)
		}
	}
	return r
}

func str(v types.AttributeValue) string {
	if s, ok := v.(*types.AttributeValueMemberS); ok {
		return s.Value
	}
	return ""
}

func num(v types.AttributeValue) (int64, bool) {
	n, ok := v.(*types.AttributeValueMemberN)
	if !ok {
		return 0, false
	}
	i, err := strconv.ParseInt(n.Value, 10, 64)
	return i, err == nil
}

func numAV(i int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(i, 10)}
}

func fieldsAV(f map[string]string) types.AttributeValue {
	m := make(map[string]types.AttributeValue, len(f))
	for k, v := range f {
		m[k] = &types.AttributeValueMemberS{Value: v}
	}
	return &types.AttributeValueMemberM{Value: m}
}

func newToken() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}
