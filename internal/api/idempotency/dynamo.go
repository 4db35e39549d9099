package idempotency

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

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

// DynamoDB is the part of the DynamoDB client DynamoRecords uses.
type DynamoDB interface {
	tableschema.PutAPI
	tableschema.UpdateAPI
	tableschema.DeleteAPI
}

// DynamoRecords keeps idempotency records in the one sendonce table, one
// item per record, each write one conditional PutItem, UpdateItem or
// DeleteItem that returns the item in the way when its condition fails.
// It is safe for concurrent use.
type DynamoRecords struct {
	db    DynamoDB
	table string
}

// NewDynamoRecords returns the Records on table through db.
func NewDynamoRecords(db DynamoDB, table string) *DynamoRecords {
	return &DynamoRecords{db: db, table: table}
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

func decode(av map[string]types.AttributeValue) (Record, error) {
	if av == nil {
		return Record{}, nil
	}
	var it item
	if err := attributevalue.UnmarshalMap(av, &it); err != nil {
		return Record{}, fmt.Errorf("decode: %w", err)
	}
	r := Record{
		ID: strings.TrimPrefix(it.PK, PKPrefix), Fingerprint: Fingerprint{Sum: it.Fingerprint, Fields: it.Fields},
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

// failed turns a failed condition into ErrConflict and the item in the
// way.
func failed(err error) (Record, error) {
	old, ok := tableschema.ConditionFailed(err)
	if !ok {
		return Record{}, err
	}
	cur, derr := decode(old)
	if derr != nil {
		return Record{}, derr
	}
	return cur, ErrConflict
}

func (d *DynamoRecords) put(ctx context.Context, r Record, cond expression.ConditionBuilder) (Record, error) {
	return failed(tableschema.Put(ctx, d.db, d.table, item{
		PK: PKPrefix + r.ID, State: stateInFlight, Fingerprint: r.Fingerprint.Sum, Fields: r.Fingerprint.Fields,
		Token: r.Token, LeaseUntil: r.LeaseUntil.UnixMilli(), LedgerKey: r.LedgerKey,
		CreatedAt: r.CreatedAt.UTC().Format(time.RFC3339Nano), ExpiresAt: r.ExpiresAt.Unix(),
	}, cond))
}

// Create implements Records with a PutItem conditional on no live item
// (absent, or past its TTL: DynamoDB deletes expired items late).
func (d *DynamoRecords) Create(ctx context.Context, r Record, now time.Time) (Record, error) {
	return d.put(ctx, r, tableschema.Vacant(now))
}

// Replace implements Records with a PutItem fenced on token.
func (d *DynamoRecords) Replace(ctx context.Context, r Record, token string) (Record, error) {
	return d.put(ctx, r, heldBy(token))
}

// Complete implements Records with an UpdateItem fenced on token.
func (d *DynamoRecords) Complete(ctx context.Context, id, token string, status int, body string) (Record, error) {
	return failed(tableschema.Update(ctx, d.db, d.table, PKPrefix+id,
		expression.Set(expression.Name("state"), expression.Value(stateCompleted)).
			Set(expression.Name("status"), expression.Value(status)).
			Set(expression.Name("body"), expression.Value(body)).
			Remove(expression.Name("lease_until")),
		heldBy(token)))
}

// Delete implements Records with a DeleteItem fenced on token.
func (d *DynamoRecords) Delete(ctx context.Context, id, token string) error {
	err := tableschema.Delete(ctx, d.db, d.table, PKPrefix+id, heldBy(token))
	if _, ok := tableschema.ConditionFailed(err); ok {
		return nil
	}
	return err
}
