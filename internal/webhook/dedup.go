package webhook

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sendonce/sendonce/internal/tableschema"
)

// DefaultDedupTTL is how long a callback's dedup record is kept: longer
// than any provider retries a callback (Twilio and the generic protocol
// retry for hours, not days).
const DefaultDedupTTL = 7 * 24 * time.Hour

// Dedup remembers which callbacks were handled. Implementations must be
// safe for concurrent use and pass the suite of package deduptest
// (DynamoDedup here, deduptest.Mem in unit tests).
type Dedup interface {
	// Seen reports whether a live record of id exists (strongly
	// consistent; an expired record counts as absent).
	Seen(ctx context.Context, id string) (bool, error)
	// Record stores the record of cb under cb.DedupID() if no live record
	// exists. created is false when one already did (the callback is a
	// duplicate handled concurrently); that is not an error.
	Record(ctx context.Context, cb Callback) (created bool, err error)
}

// DynamoDBAPI is the part of the DynamoDB client that DynamoDedup uses.
type DynamoDBAPI interface {
	tableschema.GetAPI
	tableschema.PutAPI
}

// DynamoDedup keeps dedup records in the one sendonce table, under
// partition keys "cb#<provider>#<event id>" (package tableschema). A
// record holds the provider, the ledger key, the status and when it was
// handled, and expires TTL after that.
type DynamoDedup struct {
	client DynamoDBAPI
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

// NewDynamoDedup returns a Dedup over table. ttl <= 0 means
// DefaultDedupTTL; now nil means time.Now. It returns an error if client
// is nil or table is empty.
func NewDynamoDedup(client DynamoDBAPI, table string, ttl time.Duration, now func() time.Time) (*DynamoDedup, error) {
	if client == nil || table == "" {
		return nil, errors.New("webhook: dedup store needs a DynamoDB client and a table name")
	}
	if ttl <= 0 {
		ttl = DefaultDedupTTL
	}
	if now == nil {
		now = time.Now
	}
	return &DynamoDedup{client: client, table: table, ttl: ttl, now: now}, nil
}

// Seen implements Dedup with a strongly consistent GetItem.
func (d *DynamoDedup) Seen(ctx context.Context, id string) (bool, error) {
	out, err := d.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(d.table), Key: tableschema.Key(id), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return false, fmt.Errorf("webhook: read dedup record %s: %w", id, err)
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

// Record implements Dedup with one PutItem conditional on no live record
// (absent, or past its TTL: DynamoDB deletes expired items late).
func (d *DynamoDedup) Record(ctx context.Context, cb Callback) (bool, error) {
	id, now := cb.DedupID(), d.now()
	err := tableschema.Put(ctx, d.client, d.table, dedupItem{
		PK: id, Kind: "callback", Provider: string(cb.Provider), LedgerKey: cb.Key, Status: string(cb.Status),
		HandledAt: now.UTC().Format(time.RFC3339Nano), ExpiresAt: now.Add(d.ttl).Unix(),
	}, tableschema.Vacant(now))
	if _, ok := tableschema.ConditionFailed(err); ok {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("webhook: record callback %s: %w", id, err)
	}
	return true, nil
}
