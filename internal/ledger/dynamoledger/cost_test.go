package dynamoledger_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/ledger/dynamoledger"
	"github.com/sendonce/sendonce/internal/ledger/ledgertest"
	"github.com/sendonce/sendonce/internal/tableschema"
	"github.com/sendonce/sendonce/internal/testenv"
)

// TestEventIndexCost measures, with ReturnConsumedCapacity against
// DynamoDB Local, the write units the event index adds per message: the
// same messages are claimed and marked SENT in a table with the production
// schema and in one without the event index. The index must cost one
// write unit at the claim (a small item) and nothing at Mark.
func TestEventIndexCost(t *testing.T) {
	t.Parallel()
	c := dynamo(t)
	with := testenv.NewTable(t, c)
	in := tableschema.CreateTableInput("sendonce-test-noevt-" + testenv.RandomID())
	in.GlobalSecondaryIndexes = in.GlobalSecondaryIndexes[:1]
	in.AttributeDefinitions = in.AttributeDefinitions[:3]
	if _, err := c.CreateTable(t.Context(), in); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = c.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: in.TableName})
	})

	cost := func(table string, final ledger.State) map[string]float64 {
		var mu sync.Mutex
		units := map[string]float64{}
		l, err := dynamoledger.New(c, table, dynamoledger.WithConsumedCapacity(func(op string, cc *types.ConsumedCapacity) {
			mu.Lock()
			units[op] += aws.ToFloat64(cc.CapacityUnits)
			mu.Unlock()
		}))
		if err != nil {
			t.Fatal(err)
		}
		for i := range 10 {
			e := ledgertest.NewEntry(ledgertest.Key(fmt.Sprint("cost-", final, i)))
			e.EventID = fmt.Sprint("cost-", i)
			cl, err := l.Claim(t.Context(), e, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Mark(t.Context(), cl, ledger.Outcome{State: final, ProviderMessageID: "msg_1"}); err != nil {
				t.Fatal(err)
			}
		}
		for op := range units {
			units[op] /= 10
		}
		return units
	}
	got, base := cost(with, ledger.StateSent), cost(aws.ToString(in.TableName), ledger.StateSent)
	abandoned := cost(with, ledger.StateAbandoned)
	t.Logf("write units per message: claim %.2f (%.2f without the event index), mark SENT %.2f (%.2f without); mark ABANDONED %.2f (keeps an attention entry)",
		got["claim"], base["claim"], got["mark"], base["mark"], abandoned["mark"])
	if d := got["claim"] - base["claim"]; d != 1 {
		t.Errorf("the event index adds %.2f write units to a claim, want 1", d)
	}
	if d := got["mark"] - base["mark"]; d != 0 {
		t.Errorf("the event index adds %.2f write units to a mark, want 0", d)
	}
}
