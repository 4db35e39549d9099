package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sendonce/sendonce/internal/tableschema"
)

// Rate is a fixed-window rate limit: at most Limit requests per Window.
type Rate struct {
	Limit  int
	Window time.Duration
}

// String formats r as ParseRate reads it ("100/1m0s").
func (r Rate) String() string { return strconv.Itoa(r.Limit) + "/" + r.Window.String() }

// ErrInvalidRate is returned by ParseRate for a malformed rate.
var ErrInvalidRate = errors.New("invalid rate")

// ParseRate reads a rate written "LIMIT/WINDOW", e.g. "100/1m" or "5/30s":
// LIMIT a positive integer, WINDOW a Go duration of at least one second in
// whole seconds. It returns an error matching ErrInvalidRate otherwise.
func ParseRate(s string) (Rate, error) {
	ls, ws, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok {
		return Rate{}, fmt.Errorf("%w %q: want LIMIT/WINDOW, e.g. 100/1m", ErrInvalidRate, s)
	}
	n, err := strconv.Atoi(ls)
	if err != nil || n < 1 {
		return Rate{}, fmt.Errorf("%w %q: limit must be a positive integer", ErrInvalidRate, s)
	}
	w, err := time.ParseDuration(ws)
	if err != nil || w < time.Second || w%time.Second != 0 {
		return Rate{}, fmt.Errorf("%w %q: window must be a Go duration of whole seconds, at least 1s (e.g. 1m)", ErrInvalidRate, s)
	}
	return Rate{Limit: n, Window: w}, nil
}

// Limiter counts requests in fixed windows stored in the sendonce table:
// one item per scope, subject and window, pk
// "rate#<scope>#<subject>#<window start, Unix seconds>", incremented with
// one conditional UpdateItem (ADD, allowed while the count is below the
// limit) and expiring (TTL) one window after the window ends.
type Limiter struct {
	db    DynamoDB
	table string
	now   func() time.Time
}

// NewLimiter returns a Limiter on table.
func NewLimiter(db DynamoDB, table string, now func() time.Time) *Limiter {
	return &Limiter{db: db, table: table, now: now}
}

// Allow counts one request of subject in scope against r. When the window
// is full it returns false and how long until the window ends (the
// Retry-After), without counting. subject is hashed into the key, so it
// may be any string.
func (l *Limiter) Allow(ctx context.Context, scope, subject string, r Rate) (bool, time.Duration, error) {
	now := l.now()
	w := int64(r.Window / time.Second)
	start := now.Unix() / w * w
	end := time.Unix(start+w, 0)
	sum := sha256.Sum256([]byte(subject))
	pk := "rate#" + scope + "#" + hex.EncodeToString(sum[:16]) + "#" + strconv.FormatInt(start, 10)
	_, err := l.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                aws.String(l.table),
		Key:                      map[string]types.AttributeValue{tableschema.PartitionKey: &types.AttributeValueMemberS{Value: pk}},
		UpdateExpression:         aws.String("ADD #c :one SET #exp = :exp"),
		ConditionExpression:      aws.String("attribute_not_exists(#c) OR #c < :limit"),
		ExpressionAttributeNames: map[string]string{"#c": "count", "#exp": tableschema.TTLAttribute},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":one":   numAV(1),
			":limit": numAV(int64(r.Limit)),
			":exp":   numAV(end.Add(r.Window).Unix()),
		},
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return false, end.Sub(now), nil
	}
	if err != nil {
		return false, 0, fmt.Errorf("api: rate limit %s: %w", scope, err)
	}
	return true, 0, nil
}
