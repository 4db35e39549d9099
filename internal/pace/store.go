package pace

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sendonce/sendonce/internal/tableschema"
)

// MemStore is a Store in memory, for one process (tests, the simulation).
type MemStore struct {
	mu     sync.Mutex
	counts map[string]int
	holds  map[string]Hold
	writes int
}

// Take implements Store.
func (s *MemStore) Take(_ context.Context, provider string, sec int64, n, limit int) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.counts == nil {
		s.counts = map[string]int{}
	}
	k := provider + "#" + strconv.FormatInt(sec, 10)
	s.writes++
	got := min(n, limit-s.counts[k])
	if got <= 0 {
		return 0, nil
	}
	s.counts[k] += got
	return got, nil
}

// Pause implements Pauser: every second in [from, to) has its limit spent.
func (s *MemStore) Pause(_ context.Context, provider string, from, to int64, limit int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.counts == nil {
		s.counts = map[string]int{}
	}
	for sec := from; sec < to; sec++ {
		s.writes++
		k := provider + "#" + strconv.FormatInt(sec, 10)
		s.counts[k] = max(s.counts[k], limit)
	}
	return nil
}

// Writes returns how many Take, Pause and PutHold writes were made (a
// DynamoStore's writes).
func (s *MemStore) Writes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writes
}

// DynamoStore keeps the counters in the one sendonce table: pk
// "pace#<provider>#<unix second>", attribute "count", TTL a minute later.
type DynamoStore struct {
	DB    tableschema.UpdateAPI
	Table string
}

// Take implements Store with one conditional UpdateItem (ADD n while
// count+n stays within limit); when the second has fewer than n tokens
// left, a second write takes what is left.
func (s *DynamoStore) Take(ctx context.Context, provider string, sec int64, n, limit int) (int, error) {
	for range 2 {
		count := expression.Name("count")
		err := tableschema.Update(ctx, s.DB, s.Table, "pace#"+provider+"#"+strconv.FormatInt(sec, 10),
			expression.Add(count, expression.Value(n)).Set(expression.Name(tableschema.TTLAttribute), expression.Value(sec+60)),
			expression.AttributeNotExists(count).Or(count.LessThanEqual(expression.Value(limit-n))))
		if err == nil {
			return n, nil
		}
		item, ok := tableschema.ConditionFailed(err)
		if !ok {
			return 0, fmt.Errorf("pace: take: %w", err)
		}
		cur := 0
		if v, ok := item["count"].(*types.AttributeValueMemberN); ok {
			cur, _ = strconv.Atoi(v.Value)
		}
		if n = min(n, limit-cur); n <= 0 {
			return 0, nil
		}
	}
	return 0, nil
}

// Pause implements Pauser with one UpdateItem per second in [from, to):
// the second's count is set to limit (never lowered), so every later
// Take of it is refused.
func (s *DynamoStore) Pause(ctx context.Context, provider string, from, to int64, limit int) error {
	for sec := from; sec < to; sec++ {
		count := expression.Name("count")
		err := tableschema.Update(ctx, s.DB, s.Table, "pace#"+provider+"#"+strconv.FormatInt(sec, 10),
			expression.Set(count, expression.Value(limit)).Set(expression.Name(tableschema.TTLAttribute), expression.Value(sec+60)),
			expression.AttributeNotExists(count).Or(count.LessThan(expression.Value(limit))))
		if _, failed := tableschema.ConditionFailed(err); err != nil && !failed {
			return fmt.Errorf("pace: pause %s second %d: %w", provider, sec, err)
		}
	}
	return nil
}

// PutHold implements Holds.
func (s *MemStore) PutHold(_ context.Context, provider string, h Hold) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.holds == nil {
		s.holds = map[string]Hold{}
	}
	s.writes++
	s.holds[provider] = h
	return nil
}

// GetHold implements Holds.
func (s *MemStore) GetHold(_ context.Context, provider string) (Hold, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.holds[provider], nil
}

// holdItem is a provider's hold as stored: pk "pace#<provider>#hold",
// times in Unix milliseconds (0: none), TTL a minute after it ends.
type holdItem struct {
	PK          string `dynamodbav:"pk"`
	Rate        int    `dynamodbav:"rate"`
	CutDeadline int64  `dynamodbav:"cut_deadline"`
	CutSince    int64  `dynamodbav:"cut_since"`
	UntilMillis int64  `dynamodbav:"until"`
	Backlog     int64  `dynamodbav:"backlog"`
}

func millis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fromMillis(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// PutHold implements Holds with one UpdateItem (the hold replaces the
// last; the roles that write counters may update pace items, nothing
// more).
func (s *DynamoStore) PutHold(ctx context.Context, provider string, h Hold) error {
	upd := expression.Set(expression.Name("rate"), expression.Value(h.Rate)).
		Set(expression.Name("cut_deadline"), expression.Value(millis(h.Cut.Deadline))).
		Set(expression.Name("cut_since"), expression.Value(millis(h.Cut.Since))).
		Set(expression.Name("until"), expression.Value(millis(h.Until))).
		Set(expression.Name("backlog"), expression.Value(millis(h.Backlog))).
		Set(expression.Name(tableschema.TTLAttribute), expression.Value(h.Until.Unix()+60))
	expr, err := expression.NewBuilder().WithUpdate(upd).Build()
	if err != nil {
		return err
	}
	if _, err := s.DB.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(s.Table), Key: tableschema.Key("pace#" + provider + "#hold"),
		UpdateExpression: expr.Update(), ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values()}); err != nil {
		return fmt.Errorf("pace: put hold of %s: %w", provider, err)
	}
	return nil
}

// GetHold implements Holds with one eventually consistent GetItem (half
// a read unit); no item is no hold.
func (s *DynamoStore) GetHold(ctx context.Context, provider string) (Hold, error) {
	db, ok := s.DB.(tableschema.GetAPI)
	if !ok {
		return Hold{}, nil
	}
	out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.Table), Key: tableschema.Key("pace#" + provider + "#hold")})
	if err != nil {
		return Hold{}, fmt.Errorf("pace: get hold of %s: %w", provider, err)
	}
	if len(out.Item) == 0 {
		return Hold{}, nil
	}
	var it holdItem
	if err := attributevalue.UnmarshalMap(out.Item, &it); err != nil {
		return Hold{}, fmt.Errorf("pace: get hold of %s: %w", provider, err)
	}
	return Hold{Rate: it.Rate, Cut: Order{Deadline: fromMillis(it.CutDeadline), Since: fromMillis(it.CutSince)}, Until: fromMillis(it.UntilMillis), Backlog: fromMillis(it.Backlog)}, nil
}
