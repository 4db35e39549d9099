package dynamoledger_test

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sendonce/sendonce/internal/ddbfront"
	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/ledger/dynamoledger"
	"github.com/sendonce/sendonce/internal/ledger/ledgertest"
	"github.com/sendonce/sendonce/internal/tableschema"
	"github.com/sendonce/sendonce/internal/testenv"
	"github.com/sendonce/sendonce/internal/testsupport"
)

// One client for the whole package: the SDK client is safe for concurrent
// use and reuses connections.
var (
	clientOnce sync.Once
	client     *dynamodb.Client
)

func dynamo(t testing.TB) *dynamodb.Client {
	t.Helper()
	testenv.DynamoDBEndpoint(t) // fails t with a hint when unset
	clientOnce.Do(func() { client = testenv.DynamoDB(t) })
	return client
}

func TestConformance(t *testing.T) {
	t.Parallel()
	ledgertest.Run(t, func(t *testing.T, now func() time.Time) ledger.Ledger {
		c := dynamo(t)
		l, err := dynamoledger.New(c, testenv.NewTable(t, c), dynamoledger.Config{Now: now})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		return l
	})
}

// counter wraps the client and counts calls by operation.
type counter struct {
	api                          dynamoledger.API
	puts, updates, gets, queries atomic.Int64
	failedPuts, failedUpdates    atomic.Int64
}

// countWrite counts a write's answer in n and, when it failed, in failed.
func countWrite[T any](n, failed *atomic.Int64, out T, err error) (T, error) {
	n.Add(1)
	if err != nil {
		failed.Add(1)
	}
	return out, err
}

func (c *counter) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	out, err := c.api.PutItem(ctx, in, o...)
	return countWrite(&c.puts, &c.failedPuts, out, err)
}

func (c *counter) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	out, err := c.api.UpdateItem(ctx, in, o...)
	return countWrite(&c.updates, &c.failedUpdates, out, err)
}

func (c *counter) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	c.gets.Add(1)
	return c.api.GetItem(ctx, in, o...)
}

func (c *counter) Query(ctx context.Context, in *dynamodb.QueryInput, o ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	c.queries.Add(1)
	return c.api.Query(ctx, in, o...)
}

type calls struct{ writes, failedWrites, reads int64 }

func (c *counter) take() calls {
	got := calls{
		writes:       c.puts.Swap(0) + c.updates.Swap(0),
		failedWrites: c.failedPuts.Swap(0) + c.failedUpdates.Swap(0),
		reads:        c.gets.Swap(0) + c.queries.Swap(0),
	}
	return got
}

func TestCallCounts(t *testing.T) {
	t.Parallel()
	clock := testsupport.NewClock(testsupport.Start)
	base := dynamo(t)
	table := testenv.NewTable(t, base)

	// A second client whose requests are counted on the wire.
	wire, err := ddbfront.New(testenv.DynamoDBEndpoint(t), ddbfront.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(wire.Close)
	counted := testenv.DynamoDBAt(wire.URL)
	cnt := &counter{api: counted}
	var units atomic.Int64 // consumed capacity, in thousandths
	l, err := dynamoledger.New(cnt, table, dynamoledger.Config{Now: clock.Now, ConsumedCapacity: func(op string, cc *types.ConsumedCapacity) {
		if cc.CapacityUnits != nil {
			units.Add(int64(*cc.CapacityUnits * 1000))
		}
	}})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx := t.Context()
	e := ledgertest.NewEntry(ledgertest.Key("call-counts"))

	t.Run("FirstDelivery", func(t *testing.T) {
		c, err := l.Claim(ctx, e, time.Minute)
		if err != nil {
			t.Fatalf("Claim: %v", err)
		}
		if err := l.Mark(ctx, c, ledger.Outcome{State: ledger.StateSent, ProviderMessageID: "msg_1"}); err != nil {
			t.Fatalf("Mark: %v", err)
		}
		if got, want := cnt.take(), (calls{writes: 2}); got != want {
			t.Errorf("calls = %+v, want %+v", got, want)
		}
		if got, want := wire.Take(table).Calls, map[string]int{"PutItem": 1, "UpdateItem": 1}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("HTTP requests = %v, want %v", got, want)
		}
		if units.Load() <= 0 {
			t.Errorf("consumed capacity hook saw %d milli-units, want some", units.Load())
		}
	})

	t.Run("Duplicate", func(t *testing.T) {
		_, err := l.Claim(ctx, e, time.Minute)
		cur, ok := ledger.AsConflict(err)
		if !ok || !errors.Is(err, ledger.ErrExists) {
			t.Fatalf("duplicate Claim: err = %v, want a conflict", err)
		}
		if cur.Key != e.Key || cur.State != ledger.StateSent || cur.ProviderMessageID != "msg_1" || cur.Attempts != 1 || cur.ClaimID == "" {
			t.Errorf("conflict row = %+v, want the SENT row with msg_1", cur)
		}
		if got, want := cnt.take(), (calls{writes: 1, failedWrites: 1}); got != want {
			t.Errorf("calls = %+v, want %+v", got, want)
		}
		if got, want := wire.Take(table).Calls, map[string]int{"PutItem": 1}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("HTTP requests = %v, want %v", got, want)
		}
	})
}

func TestNew(t *testing.T) {
	t.Parallel()
	c := &counter{}
	for _, tc := range []struct {
		name  string
		db    dynamoledger.API
		table string
		cfg   dynamoledger.Config
	}{
		{"NilClient", nil, "t", dynamoledger.Config{}},
		{"EmptyTable", c, "", dynamoledger.Config{}},
		{"ShortRetention", c, "t", dynamoledger.Config{Retention: time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if l, err := dynamoledger.New(tc.db, tc.table, tc.cfg); err == nil {
				t.Fatalf("New = %v, nil; want an error", l)
			}
		})
	}
	for _, cfg := range []dynamoledger.Config{{}, {Retention: time.Hour}} {
		if _, err := dynamoledger.New(c, "t", cfg); err != nil {
			t.Errorf("New(%+v): %v", cfg, err)
		}
	}
}

func TestShard(t *testing.T) {
	t.Parallel()
	seen := map[int]bool{}
	for i := range 1000 {
		k := ledgertest.Key(fmt.Sprint(i))
		s := ledger.Shard(k)
		if s < 0 || s >= ledger.AttentionShards {
			t.Fatalf("Shard(%s) = %d, outside [0, %d)", k, s, ledger.AttentionShards)
		}
		if s2 := ledger.Shard(k); s2 != s {
			t.Fatalf("Shard(%s) = %d then %d", k, s, s2)
		}
		seen[s] = true
	}
	if len(seen) != ledger.AttentionShards {
		t.Errorf("1000 keys used %d shards, want all %d", len(seen), ledger.AttentionShards)
	}
}

// BenchmarkClaimMark measures a first delivery (Claim + Mark SENT) and a
// duplicate (one failed Claim) against DynamoDB Local, reporting calls per
// operation. DynamoDB Local is a correctness reference, not a speed one:
// read the ratios and call counts, not the absolute times.
func BenchmarkClaimMark(b *testing.B) {
	base := dynamo(b)
	table := testenv.NewTable(b, base)
	cnt := &counter{api: base}
	var units atomic.Int64
	l, err := dynamoledger.New(cnt, table, dynamoledger.Config{ConsumedCapacity: func(_ string, cc *types.ConsumedCapacity) {
		if cc.CapacityUnits != nil {
			units.Add(int64(*cc.CapacityUnits * 1000))
		}
	}})
	if err != nil {
		b.Fatalf("New: %v", err)
	}
	ctx := b.Context()
	run := testenv.RandomID()
	var i atomic.Int64 // keys stay fresh across the runs b.Run makes

	b.Run("FirstDelivery", func(b *testing.B) {
		cnt.take()
		units.Store(0)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				e := ledgertest.NewEntry(ledgertest.Key(fmt.Sprintf("bench-%s-%d", run, i.Add(1))))
				c, err := l.Claim(ctx, e, time.Minute)
				if err != nil {
					b.Errorf("Claim: %v", err)
					return
				}
				if err := l.Mark(ctx, c, ledger.Outcome{State: ledger.StateSent, ProviderMessageID: "msg"}); err != nil {
					b.Errorf("Mark: %v", err)
					return
				}
			}
		})
		got := cnt.take()
		b.ReportMetric(float64(got.writes)/float64(b.N), "writes/op")
		b.ReportMetric(float64(got.reads)/float64(b.N), "reads/op")
		b.ReportMetric(float64(units.Load())/1000/float64(b.N), "WCU/op")
	})

	dup := ledgertest.NewEntry(ledgertest.Key("bench-dup-" + run))
	c, err := l.Claim(ctx, dup, time.Minute)
	if err != nil {
		b.Fatalf("Claim: %v", err)
	}
	if err := l.Mark(ctx, c, ledger.Outcome{State: ledger.StateSent, ProviderMessageID: "msg"}); err != nil {
		b.Fatalf("Mark: %v", err)
	}
	b.Run("Duplicate", func(b *testing.B) {
		cnt.take()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := l.Claim(ctx, dup, time.Minute); !errors.Is(err, ledger.ErrExists) {
					b.Errorf("duplicate Claim: err = %v, want ErrExists", err)
					return
				}
			}
		})
		got := cnt.take()
		b.ReportMetric(float64(got.writes)/float64(b.N), "writes/op")
		b.ReportMetric(float64(got.reads)/float64(b.N), "reads/op")
	})
}

// twice sends every write twice and returns the second answer: what the
// SDK's retry of a write whose first response was lost looks like.
type twice struct{ dynamoledger.API }

func (d twice) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if _, err := d.API.PutItem(ctx, in, o...); err != nil {
		return nil, err
	}
	return d.API.PutItem(ctx, in, o...)
}

func (d twice) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if _, err := d.API.UpdateItem(ctx, in, o...); err != nil {
		return nil, err
	}
	return d.API.UpdateItem(ctx, in, o...)
}

func TestRetriedWriteFindsItsOwnRow(t *testing.T) {
	t.Parallel()
	clock := testsupport.NewClock(testsupport.Start)
	c := dynamo(t)
	l, err := dynamoledger.New(twice{c}, testenv.NewTable(t, c), dynamoledger.Config{Now: clock.Now})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx := t.Context()
	e := ledgertest.NewEntry(ledgertest.Key("retried"))

	c1, err := l.Claim(ctx, e, time.Minute)
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	if err := l.Release(ctx, c1, "provider 503", time.Time{}); err != nil {
		t.Fatalf("Release: %v", err)
	}
	cur, err := l.Get(ctx, e.Key)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	c2, err := l.TakeOver(ctx, cur, "", time.Minute)
	if err != nil {
		t.Fatalf("TakeOver: %v", err)
	}
	if c2.Attempt != 2 {
		t.Errorf("TakeOver attempt = %d, want 2", c2.Attempt)
	}
	if err := l.Mark(ctx, c2, ledger.Outcome{State: ledger.StateSent, ProviderMessageID: "msg_1"}); err != nil {
		t.Fatalf("Mark: %v", err)
	}
	got, err := l.Get(ctx, e.Key)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if got.State != ledger.StateSent || got.ClaimID != c2.ClaimID || got.Attempts != 2 {
		t.Errorf("row %s/%s/%d, want SENT/%s/2", got.State, got.ClaimID, got.Attempts, c2.ClaimID)
	}
	// A real duplicate is still a conflict, and a stale claim still fenced.
	if _, err := l.Claim(ctx, e, time.Minute); !errors.Is(err, ledger.ErrExists) {
		t.Errorf("duplicate Claim: err = %v, want ErrExists", err)
	}
	if err := l.Mark(ctx, c1, ledger.Outcome{State: ledger.StateSent}); !errors.Is(err, ledger.ErrFencingLost) {
		t.Errorf("Mark with the old claim: err = %v, want ErrFencingLost", err)
	}
}

func TestMalformedItem(t *testing.T) {
	t.Parallel()
	c := dynamo(t)
	table := testenv.NewTable(t, c)
	l, err := dynamoledger.New(c, table, dynamoledger.Config{})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	for _, tc := range []struct {
		name string
		attr string
		v    types.AttributeValue
	}{
		{"AttemptsNotANumber", "attempts", &types.AttributeValueMemberS{Value: "one"}},
		{"LeaseNotAnInteger", "lease_until", &types.AttributeValueMemberN{Value: "1.5"}},
		{"ExpiryNotANumber", "expires_at", &types.AttributeValueMemberBOOL{Value: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			key := ledgertest.Key("malformed-" + tc.name)
			item := map[string]types.AttributeValue{
				"pk":         &types.AttributeValueMemberS{Value: key},
				"state":      &types.AttributeValueMemberS{Value: "SENT"},
				"expires_at": &types.AttributeValueMemberN{Value: fmt.Sprint(time.Now().Add(time.Hour).Unix())},
			}
			item[tc.attr] = tc.v
			if _, err := c.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: &table, Item: item}); err != nil {
				t.Fatalf("PutItem: %v", err)
			}
			_, err := l.Get(t.Context(), key)
			if err == nil || errors.Is(err, ledger.ErrNotFound) || !strings.Contains(err.Error(), tc.attr) {
				t.Fatalf("Get: err = %v, want a decoding error naming %s", err, tc.attr)
			}
		})
	}
}

// TestRowOfSixteenShardsIsStillFound: ledger.AttentionShards went from 16
// to 64. A row a release with 16 shards indexed sits in shard h mod 16
// (h the key's FNV-1a), not h mod 64; a reader that reads every shard
// 0..AttentionShards−1 (reconcile.Find, sendonce list) still finds it
// there, once, and the row's next write moves it to its shard of 64.
func TestRowOfSixteenShardsIsStillFound(t *testing.T) {
	t.Parallel()
	c := dynamo(t)
	table := testenv.NewTable(t, c)
	now := testsupport.Start
	l, err := dynamoledger.New(c, table, dynamoledger.Config{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx := t.Context()
	// A key whose shard of 64 is not its shard of 16.
	var key string
	var old int
	for i := 0; key == ""; i++ {
		k := ledgertest.Key(fmt.Sprintf("%s-%d", t.Name(), i))
		h := fnv.New32a()
		h.Write([]byte(k))
		if s := int(h.Sum32() % 16); s != ledger.Shard(k) {
			key, old = k, s
		}
	}
	claim, err := l.Claim(ctx, ledgertest.NewEntry(key), time.Minute)
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	if err := l.Release(ctx, claim, "transient: down", now); err != nil {
		t.Fatalf("Release: %v", err)
	}
	// As the release of the version with 16 shards wrote it.
	if _, err := c.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &table, Key: tableschema.Key(key),
		UpdateExpression:          aws.String("SET #pk = :old"),
		ExpressionAttributeNames:  map[string]string{"#pk": tableschema.AttentionPK},
		ExpressionAttributeValues: map[string]types.AttributeValue{":old": &types.AttributeValueMemberS{Value: fmt.Sprintf("attn#%02d", old)}},
	}); err != nil {
		t.Fatalf("write the row's shard of 16: %v", err)
	}
	now = now.Add(time.Second)
	found := func() []int {
		var in []int
		for s := range ledger.AttentionShards {
			pg, err := l.Attention(ctx, ledger.AttentionQuery{Shard: s, DueBefore: now.Add(time.Second)})
			if err != nil {
				t.Fatalf("Attention shard %d: %v", s, err)
			}
			for _, r := range pg.Records {
				if r.Key == key {
					in = append(in, s)
				}
			}
		}
		return in
	}
	if got := found(); !slices.Equal(got, []int{old}) {
		t.Fatalf("the row of 16 shards found in shards %v, want [%d] (its shard of 16)", got, old)
	}
	// Its next write (a takeover, then a release) moves it to its shard of 64.
	rec, err := l.Get(ctx, key)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	claim, err = l.TakeOver(ctx, rec, rec.Provider, time.Minute)
	if err != nil {
		t.Fatalf("TakeOver: %v", err)
	}
	if err := l.Release(ctx, claim, "transient: down", now); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if got, want := found(), []int{ledger.Shard(key)}; !slices.Equal(got, want) {
		t.Errorf("after its next write, found in shards %v, want %v", got, want)
	}
}
