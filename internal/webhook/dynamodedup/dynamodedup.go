// Package dynamodedup is the webhook.Dedup of the one sendonce DynamoDB
// table: a record per handled callback under partition key
// "cb#<provider>#<event id>" (package tableschema), holding the provider,
// the ledger key, the status and when it was handled, and expiring the
// TTL after that. It passes package deduptest's suite against DynamoDB
// Local.
package dynamodedup

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sendonce/sendonce/internal/tableschema"
	"github.com/sendonce/sendonce/internal/webhook"
)

// API is the part of the DynamoDB client Dedup uses.
type API interface {
	tableschema.GetAPI
	tableschema.PutAPI
}

// Dedup keeps dedup records in the one sendonce table. It is safe for
// concurrent use.
type Dedup struct {
	client API
	table  string
	ttl    time.Duration
	now    func() time.Time
}

// dedupItem is a dedup record as stored.
type dedupItem struct {
	PK        string `dynamodbav:"pk"`
	Kind      string `dynamodbav:"kind"`
	Provider  string `dynamodbav:"provider"`
	LedgerKey string `dynamodbav:"ledger_key"`
	Status    string `dynamodbav:"status"`
	HandledAt string `dynamodbav:"handled_at"`
	ExpiresAt int64  `dynamodbav:"expires_at"` // Unix seconds (tableschema.TTLAttribute)
}

var _ webhook.Dedup = (*Dedup)(nil)

// Config configures a Dedup. The zero value is the production setting.
type Config struct {
	// TTL is how long a record is kept; zero or less means
	// webhook.DefaultDedupTTL.
	TTL time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// New returns a Dedup over table through client. It returns an error if
// client is nil or table is empty.
func New(client API, table string, cfg Config) (*Dedup, error) {
	if client == nil || table == "" {
		return nil, errors.New("dynamodedup: needs a DynamoDB client and a table name")
	}
	d := &Dedup{client: client, table: table, ttl: cfg.TTL, now: cfg.Now}
	if d.ttl <= 0 {
		d.ttl = webhook.DefaultDedupTTL
	}
	if d.now == nil {
		d.now = time.Now
	}
	return d, nil
}

// Seen implements webhook.Dedup with a strongly consistent GetItem.
func (d *Dedup) Seen(ctx context.Context, id string) (bool, error) {
	out, err := d.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(d.table), Key: tableschema.Key(id), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return false, fmt.Errorf("dynamodedup: read record %s: %w", id, err)
	}
	if out.Item == nil {
		return false, nil
	}
	var it dedupItem
	if err := attributevalue.UnmarshalMap(out.Item, &it); err != nil || it.ExpiresAt == 0 {
		return true, nil // no readable expiry: a live record
	}
	return d.now().Unix() < it.ExpiresAt, nil
}

// Record implements webhook.Dedup with one PutItem conditional on no live record
// (absent, or past its TTL: DynamoDB deletes expired items late).
func (d *Dedup) Record(ctx context.Context, cb webhook.Callback) (bool, error) {
	id, now := cb.DedupID(), d.now()
	err := tableschema.Put(ctx, d.client, d.table, dedupItem{
		PK: id, Kind: "callback", Provider: string(cb.Provider), LedgerKey: cb.Key, Status: string(cb.Status),
		HandledAt: now.UTC().Format(time.RFC3339Nano), ExpiresAt: now.Add(d.ttl).Unix(),
	}, tableschema.Vacant(now))
	if _, ok := tableschema.ConditionFailed(err); ok {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("dynamodedup: record callback %s: %w", id, err)
	}
	return true, nil
}
