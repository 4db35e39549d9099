package webhook

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sendonce/sendonce/internal/ledger/ledgertest"
	"github.com/sendonce/sendonce/internal/tableschema"
	"github.com/sendonce/sendonce/internal/testenv"
)

type dedupBundle struct {
	client *dynamodb.Client
	table  string
	clock  *ledgertest.Clock
	store  *DynamoDedup
}

func setupDedup(t *testing.T) dedupBundle {
	t.Helper()
	c := testenv.DynamoDB(t)
	table := testenv.NewTable(t, c)
	clock := ledgertest.NewClock(ledgertest.Start)
	store, err := NewDynamoDedup(c, table, time.Hour, clock.Now)
	if err != nil {
		t.Fatalf("NewDynamoDedup: %v", err)
	}
	return dedupBundle{client: c, table: table, clock: clock, store: store}
}

func TestDynamoDedup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupDedup(t)
	cb := Callback{Provider: ProviderHTTP, EventID: "evt_" + testenv.RandomID(), Key: testKey, Status: StatusDelivered}

	t.Run("RecordThenSeen", func(t *testing.T) {
		seen, err := b.store.Seen(ctx, cb.DedupID())
		if err != nil || seen {
			t.Fatalf("Seen before Record = %v, %v; want false, nil", seen, err)
		}
		created, err := b.store.Record(ctx, cb)
		if err != nil || !created {
			t.Fatalf("Record = %v, %v; want true, nil", created, err)
		}
		seen, err = b.store.Seen(ctx, cb.DedupID())
		if err != nil || !seen {
			t.Fatalf("Seen after Record = %v, %v; want true, nil", seen, err)
		}
		created, err = b.store.Record(ctx, cb)
		if err != nil || created {
			t.Fatalf("second Record = %v, %v; want false, nil", created, err)
		}
	})
	t.Run("StoredItem", func(t *testing.T) {
		out, err := b.client.GetItem(ctx, &dynamodb.GetItemInput{
			TableName:      aws.String(b.table),
			Key:            map[string]types.AttributeValue{tableschema.PartitionKey: &types.AttributeValueMemberS{Value: cb.DedupID()}},
			ConsistentRead: aws.Bool(true),
		})
		if err != nil {
			t.Fatalf("GetItem: %v", err)
		}
		exp, _ := out.Item[tableschema.TTLAttribute].(*types.AttributeValueMemberN)
		if want := ledgertest.Start.Add(time.Hour).Unix(); exp == nil || exp.Value != strconv.FormatInt(want, 10) {
			t.Errorf("expires_at = %v, want %d", exp, want)
		}
		if _, ok := out.Item[tableschema.AttentionPK]; ok {
			t.Errorf("dedup record carries the attention index key")
		}
	})
	t.Run("ExpiredCountsAsAbsent", func(t *testing.T) {
		b.clock.Advance(time.Hour) // exactly at expiry
		seen, err := b.store.Seen(ctx, cb.DedupID())
		if err != nil || seen {
			t.Fatalf("Seen after TTL = %v, %v; want false, nil", seen, err)
		}
		created, err := b.store.Record(ctx, cb)
		if err != nil || !created {
			t.Fatalf("Record over an expired record = %v, %v; want true, nil", created, err)
		}
	})
}

func TestDynamoDedupConcurrentRecord(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupDedup(t)
	cb := Callback{Provider: ProviderTwilio, EventID: "tok-" + testenv.RandomID(), Key: testKey, Status: StatusSent}
	var created atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			ok, err := b.store.Record(ctx, cb)
			if err != nil {
				t.Errorf("Record: %v", err)
			}
			if ok {
				created.Add(1)
			}
		})
	}
	wg.Wait()
	if got := created.Load(); got != 1 {
		t.Errorf("records created = %d, want 1", got)
	}
}

func TestNewDynamoDedupErrors(t *testing.T) {
	t.Parallel()
	if _, err := NewDynamoDedup(nil, "t", 0, nil); err == nil {
		t.Error("NewDynamoDedup(nil client) = nil error")
	}
	if _, err := NewDynamoDedup(&dynamodb.Client{}, "", 0, nil); err == nil {
		t.Error("NewDynamoDedup(empty table) = nil error")
	}
}
