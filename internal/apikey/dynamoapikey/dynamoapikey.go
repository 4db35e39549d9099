// Package dynamoapikey is the apikey.Records of the one sendonce DynamoDB
// table (package tableschema); package apikey's doc describes the item.
// It passes package apikeytest's suite against DynamoDB Local.
package dynamoapikey

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sendonce/sendonce/internal/apikey"
	"github.com/sendonce/sendonce/internal/tableschema"
)

// pkPrefix starts the partition key of every key item.
const pkPrefix = "apikey#"

// API is the part of the DynamoDB client Records uses.
type API interface {
	tableschema.GetAPI
	tableschema.PutAPI
	tableschema.UpdateAPI
	dynamodb.QueryAPIClient
}

// Records keeps key records in the one sendonce table (see package
// apikey's doc for the item). It is safe for concurrent use.
type Records struct {
	db    API
	table string
}

var _ apikey.Records = (*Records)(nil)

// New returns the Records on table through db.
func New(db API, table string) *Records {
	return &Records{db: db, table: table}
}

// keyItem is a key record as stored; times are RFC 3339 in UTC.
type keyItem struct {
	PK        string `dynamodbav:"pk"`
	Tenant    string `dynamodbav:"tenant"`
	Hash      string `dynamodbav:"key_hash"`
	Revoked   bool   `dynamodbav:"revoked"`
	CreatedAt string `dynamodbav:"created_at"`
	RevokedAt string `dynamodbav:"revoked_at,omitempty"`
	// ListPK is the event index key "#apikey#<tenant>" List queries.
	ListPK string `dynamodbav:"evt_pk,omitempty"`
}

func listPK(tenant string) string { return "#apikey#" + tenant }

// Put implements apikey.Records with a PutItem conditional on the id's absence.
func (d *Records) Put(ctx context.Context, r apikey.Record) error {
	err := tableschema.Put(ctx, d.db, d.table, keyItem{
		PK: pkPrefix + r.ID, Tenant: r.Tenant, Hash: r.Hash, Revoked: r.Revoked,
		CreatedAt: r.CreatedAt.UTC().Format(time.RFC3339), ListPK: listPK(r.Tenant),
	}, expression.AttributeNotExists(expression.Name(tableschema.PartitionKey)))
	if _, ok := tableschema.ConditionFailed(err); ok {
		return apikey.ErrExists
	}
	return err
}

// Get implements apikey.Records with a strongly consistent GetItem.
func (d *Records) Get(ctx context.Context, id string) (apikey.Record, error) {
	out, err := d.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(d.table), Key: tableschema.Key(pkPrefix + id), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return apikey.Record{}, err
	}
	if out.Item == nil {
		return apikey.Record{}, apikey.ErrNotFound
	}
	var it keyItem
	if err := attributevalue.UnmarshalMap(out.Item, &it); err != nil {
		return apikey.Record{}, fmt.Errorf("decode %s: %w", pkPrefix+id, err)
	}
	r := apikey.Record{ID: strings.TrimPrefix(it.PK, pkPrefix), Tenant: it.Tenant, Hash: it.Hash, Revoked: it.Revoked}
	r.CreatedAt, _ = time.Parse(time.RFC3339, it.CreatedAt)
	r.RevokedAt, _ = time.Parse(time.RFC3339, it.RevokedAt)
	return r, nil
}

// Revoke implements apikey.Records with one UpdateItem conditional on the item's
// existence.
func (d *Records) Revoke(ctx context.Context, id string, at time.Time) error {
	revokedAt := expression.Name("revoked_at")
	err := tableschema.Update(ctx, d.db, d.table, pkPrefix+id,
		expression.Set(expression.Name("revoked"), expression.Value(true)).
			Set(revokedAt, expression.IfNotExists(revokedAt, expression.Value(at.UTC().Format(time.RFC3339)))),
		expression.AttributeExists(expression.Name(tableschema.PartitionKey)))
	if _, ok := tableschema.ConditionFailed(err); ok {
		return apikey.ErrNotFound
	}
	return err
}

// List implements apikey.Records: the keys of the tenant's items from the
// KEYS_ONLY event index, or from a paginated Scan when the table has no
// such index (tableschema.EventKeys; the index is optional), then one Get
// per key. A client without Scan (db does not implement
// tableschema.EventAPI) needs the index. Keys created before List existed
// carry no index key and are not listed.
func (d *Records) List(ctx context.Context, tenant string) ([]apikey.Record, error) {
	db, ok := d.db.(tableschema.EventAPI)
	if !ok {
		db = queryOnly{d.db}
	}
	keys, err := tableschema.EventKeys(ctx, db, tableschema.EventQuery{Table: d.table, Value: listPK(tenant)})
	if err != nil {
		return nil, err
	}
	var rs []apikey.Record
	for _, pk := range keys {
		if !strings.HasPrefix(pk, pkPrefix) {
			continue
		}
		r, err := d.Get(ctx, strings.TrimPrefix(pk, pkPrefix))
		if errors.Is(err, apikey.ErrNotFound) {
			continue // deleted since the keys were read
		}
		if err != nil {
			return nil, err
		}
		if r.Tenant == tenant {
			rs = append(rs, r)
		}
	}
	return rs, nil
}

// queryOnly gives a client without Scan the tableschema.EventAPI shape.
type queryOnly struct{ API }

func (q queryOnly) Scan(context.Context, *dynamodb.ScanInput, ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	return nil, fmt.Errorf("client %T cannot Scan (the table has no event index)", q.API)
}
