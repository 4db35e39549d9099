package webhook

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sendonce/sendonce/internal/tableschema"
)

// DefaultDedupTTL is how long a callback's dedup record is kept: longer
// than any provider retries a callback (Twilio and the generic protocol
// retry for hours, not days).
const DefaultDedupTTL = 7 * 24 * time.Hour

// Dedup remembers which callbacks were handled. Implementations must be
// safe for concurrent use.
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
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
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
		TableName:            aws.String(d.table),
		Key:                  map[string]types.AttributeValue{tableschema.PartitionKey: &types.AttributeValueMemberS{Value: id}},
		ConsistentRead:       aws.Bool(true),
		ProjectionExpression: aws.String("#ttl"),
		ExpressionAttributeNames: map[string]string{
			"#ttl": tableschema.TTLAttribute,
		},
	})
	if err != nil {
		return false, fmt.Errorf("webhook: read dedup record %s: %w", id, err)
	}
	if out.Item == nil {
		return false, nil
	}
	exp, ok := out.Item[tableschema.TTLAttribute].(*types.AttributeValueMemberN)
	if !ok {
		return true, nil // no expiry: a live record
	}
	unix, err := strconv.ParseInt(exp.Value, 10, 64)
	if err != nil {
		return true, nil
	}
	return d.now().Unix() < unix, nil
}

// Record implements Dedup with one PutItem conditional on no live record
// (absent, or past its TTL: DynamoDB deletes expired items late).
func (d *DynamoDedup) Record(ctx context.Context, cb Callback) (bool, error) {
	id := cb.DedupID()
	now := d.now()
	_, err := d.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(d.table),
		Item: map[string]types.AttributeValue{
			tableschema.PartitionKey: &types.AttributeValueMemberS{Value: id},
			"kind":                   &types.AttributeValueMemberS{Value: "callback"},
			"provider":               &types.AttributeValueMemberS{Value: string(cb.Provider)},
			"ledger_key":             &types.AttributeValueMemberS{Value: cb.Key},
			"status":                 &types.AttributeValueMemberS{Value: string(cb.Status)},
			"handled_at":             &types.AttributeValueMemberS{Value: now.UTC().Format(time.RFC3339Nano)},
			tableschema.TTLAttribute: &types.AttributeValueMemberN{Value: strconv.FormatInt(now.Add(d.ttl).Unix(), 10)},
		},
		ConditionExpression: aws.String("attribute_not_exists(#pk) OR #ttl <= :now"),
		ExpressionAttributeNames: map[string]string{
			"#pk":  tableschema.PartitionKey,
			"#ttl": tableschema.TTLAttribute,
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":now": &types.AttributeValueMemberN{Value: strconv.FormatInt(now.Unix(), 10)},
		},
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("webhook: record callback %s: %w", id, err)
	}
	return true, nil
}
