// Package dynamoidempotency is the idempotency.Records of the one
// sendonce DynamoDB table (package tableschema): one item per record, pk
// "idem#<record id>", each write one conditional PutItem, UpdateItem or
// DeleteItem that returns the item in the way when its condition fails.
// It passes package idempotencytest's suite against DynamoDB Local.
package dynamoidempotency

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sendonce/sendonce/internal/api/idempotency"
	"github.com/sendonce/sendonce/internal/tableschema"
)

// PKPrefix starts the partition key of every idempotency record:
// "idem#<tenant>#<hex SHA-256 of the key>" (the record's ID after it).
const PKPrefix = "idem#"

// The stored states.
const (
	stateInFlight  = "in_flight"
	stateCompleted = "completed"
)

// API is the part of the DynamoDB client Records uses.
type API interface {
	tableschema.PutAPI
	tableschema.UpdateAPI
	tableschema.DeleteAPI
}

// Records keeps idempotency records in the one sendonce table. It is
// safe for concurrent use.
type Records struct {
	db    API
	table string
}

var _ idempotency.Records = (*Records)(nil)

// New returns the Records on table through db.
func New(db API, table string) *Records {
	return &Records{db: db, table: table}
}

// item is a record as stored.
type item struct {
	PK          string            `dynamodbav:"pk"`
	State       string            `dynamodbav:"state"`
	Fingerprint string            `dynamodbav:"fingerprint"`
	Fields      map[string]string `dynamodbav:"fields,omitempty"`
	Token       string            `dynamodbav:"token"`
	LeaseUntil  int64             `dynamodbav:"lease_until,omitempty"` // Unix ms; removed on completion
	LedgerKey   string            `dynamodbav:"ledger_key"`
	CreatedAt   string            `dynamodbav:"created_at"` // RFC 3339, UTC
	ExpiresAt   int64             `dynamodbav:"expires_at"` // Unix seconds (tableschema.TTLAttribute)
	Status      int               `dynamodbav:"status,omitempty"`
	Body        string            `dynamodbav:"body,omitempty"`
}

func decode(av map[string]types.AttributeValue) (idempotency.Record, error) {
	if av == nil {
		return idempotency.Record{}, nil
	}
	var it item
	if err := attributevalue.UnmarshalMap(av, &it); err != nil {
		return idempotency.Record{}, fmt.Errorf("decode: %w", err)
	}
	r := idempotency.Record{
		ID: strings.TrimPrefix(it.PK, PKPrefix), Fingerprint: idempotency.Fingerprint{Sum: it.Fingerprint, Fields: it.Fields},
		Token: it.Token, LedgerKey: it.LedgerKey, ExpiresAt: time.Unix(it.ExpiresAt, 0).UTC(),
		Completed: it.State == stateCompleted, Status: it.Status, Body: it.Body,
	}
	if it.LeaseUntil != 0 {
		r.LeaseUntil = time.UnixMilli(it.LeaseUntil).UTC()
	}
	r.CreatedAt, _ = time.Parse(time.RFC3339Nano, it.CreatedAt)
	return r, nil
}

// heldBy is the condition of every write but the create: an in-flight
// record under token.
func heldBy(token string) expression.ConditionBuilder {
	return expression.Name("token").Equal(expression.Value(token)).
		And(expression.Name("state").Equal(expression.Value(stateInFlight)))
}

// failed turns a failed condition into idempotency.ErrConflict and the item in the
// way.
func failed(err error) (idempotency.Record, error) {
	old, ok := tableschema.ConditionFailed(err)
	if !ok {
		return idempotency.Record{}, err
	}
	cur, derr := decode(old)
	if derr != nil {
		return idempotency.Record{}, derr
	}
	return cur, idempotency.ErrConflict
}

func (d *Records) put(ctx context.Context, r idempotency.Record, cond expression.ConditionBuilder) (idempotency.Record, error) {
	return failed(tableschema.Put(ctx, d.db, d.table, item{
		PK: PKPrefix + r.ID, State: stateInFlight, Fingerprint: r.Fingerprint.Sum, Fields: r.Fingerprint.Fields,
		Token: r.Token, LeaseUntil: r.LeaseUntil.UnixMilli(), LedgerKey: r.LedgerKey,
		CreatedAt: r.CreatedAt.UTC().Format(time.RFC3339Nano), ExpiresAt: r.ExpiresAt.Unix(),
	}, cond))
}

// Create implements idempotency.Records with a PutItem conditional on no live item
// (absent, or past its TTL: DynamoDB deletes expired items late).
func (d *Records) Create(ctx context.Context, r idempotency.Record, now time.Time) (idempotency.Record, error) {
	return d.put(ctx, r, tableschema.Vacant(now))
}

// Replace implements idempotency.Records with a PutItem fenced on token.
func (d *Records) Replace(ctx context.Context, r idempotency.Record, token string) (idempotency.Record, error) {
	return d.put(ctx, r, heldBy(token))
}

// Complete implements idempotency.Records with an UpdateItem fenced on token.
func (d *Records) Complete(ctx context.Context, id, token string, status int, body string) (idempotency.Record, error) {
	return failed(tableschema.Update(ctx, d.db, d.table, PKPrefix+id,
		expression.Set(expression.Name("state"), expression.Value(stateCompleted)).
			Set(expression.Name("status"), expression.Value(status)).
			Set(expression.Name("body"), expression.Value(body)).
			Remove(expression.Name("lease_until")),
		heldBy(token)))
}

// Delete implements idempotency.Records with a DeleteItem fenced on token.
func (d *Records) Delete(ctx context.Context, id, token string) error {
	err := tableschema.Delete(ctx, d.db, d.table, PKPrefix+id, heldBy(token))
	if _, ok := tableschema.ConditionFailed(err); ok {
		return nil
	}
	return err
}
