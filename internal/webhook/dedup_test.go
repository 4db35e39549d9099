package webhook_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sendonce/sendonce/internal/tableschema"
	"github.com/sendonce/sendonce/internal/testenv"
	"github.com/sendonce/sendonce/internal/testsupport"
	"github.com/sendonce/sendonce/internal/webhook"
	"github.com/sendonce/sendonce/internal/webhook/deduptest"
)

func TestDynamoDedupConformance(t *testing.T) {
	t.Parallel()
	c := testenv.DynamoDB(t)
	deduptest.Run(t, func(t *testing.T, ttl time.Duration, now func() time.Time) webhook.Dedup {
		d, err := webhook.NewDynamoDedup(c, testenv.NewTable(t, c), ttl, now)
		if err != nil {
			t.Fatalf("NewDynamoDedup: %v", err)
		}
		return d
	})
}

func TestMemDedupConformance(t *testing.T) {
	t.Parallel()
	deduptest.Run(t, func(t *testing.T, ttl time.Duration, now func() time.Time) webhook.Dedup {
		return deduptest.NewMem(ttl, now)
	})
}

// TestDynamoDedupStoredItem checks the record's layout in the one table:
// its TTL attribute, and no attention-index key.
func TestDynamoDedupStoredItem(t *testing.T) {
	t.Parallel()
	c := testenv.DynamoDB(t)
	table := testenv.NewTable(t, c)
	d, err := webhook.NewDynamoDedup(c, table, time.Hour, func() time.Time { return testsupport.Start })
	if err != nil {
		t.Fatal(err)
	}
	cb := webhook.Callback{Provider: webhook.ProviderHTTP, EventID: "evt_1", Key: "v1_k", Status: webhook.StatusDelivered}
	if _, err := d.Record(t.Context(), cb); err != nil {
		t.Fatal(err)
	}
	out, err := c.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: aws.String(table), Key: tableschema.Key(cb.DedupID()), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatalf("GetItem: %v", err)
	}
	exp, _ := out.Item[tableschema.TTLAttribute].(*types.AttributeValueMemberN)
	if want := testsupport.Start.Add(time.Hour).Unix(); exp == nil || exp.Value != strconv.FormatInt(want, 10) {
		t.Errorf("expires_at = %v, want %d", exp, want)
	}
	for name, want := range map[string]string{"provider": "http", "ledger_key": "v1_k", "status": "delivered", "kind": "callback"} {
		if got, _ := out.Item[name].(*types.AttributeValueMemberS); got == nil || got.Value != want {
			t.Errorf("%s = %v, want %q", name, got, want)
		}
	}
	if _, ok := out.Item[tableschema.AttentionPK]; ok {
		t.Errorf("dedup record carries the attention index key")
	}
}

func TestNewDynamoDedupErrors(t *testing.T) {
	t.Parallel()
	if _, err := webhook.NewDynamoDedup(nil, "t", 0, nil); err == nil {
		t.Error("NewDynamoDedup(nil client) = nil error")
	}
	if _, err := webhook.NewDynamoDedup(&dynamodb.Client{}, "", 0, nil); err == nil {
		t.Error("NewDynamoDedup(empty table) = nil error")
	}
}
