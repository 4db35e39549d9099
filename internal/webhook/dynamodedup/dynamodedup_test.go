package dynamodedup_test

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
	"github.com/sendonce/sendonce/internal/webhook/dynamodedup"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	c := testenv.DynamoDB(t)
	deduptest.Run(t, func(t *testing.T, ttl time.Duration, now func() time.Time) webhook.Dedup {
		d, err := dynamodedup.New(c, testenv.NewTable(t, c), dynamodedup.Config{TTL: ttl, Now: now})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		return d
	})
}

// TestStoredItem checks the record's layout in the one table:
// its TTL attribute, and no attention-index key.
func TestStoredItem(t *testing.T) {
	t.Parallel()
	c := testenv.DynamoDB(t)
	table := testenv.NewTable(t, c)
	d, err := dynamodedup.New(c, table, dynamodedup.Config{TTL: time.Hour, Now: func() time.Time { return testsupport.Start }})
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

func TestNewErrors(t *testing.T) {
	t.Parallel()
	if _, err := dynamodedup.New(nil, "t", dynamodedup.Config{}); err == nil {
		t.Error("New(nil client) = nil error")
	}
	if _, err := dynamodedup.New(&dynamodb.Client{}, "", dynamodedup.Config{}); err == nil {
		t.Error("New(empty table) = nil error")
	}
}
