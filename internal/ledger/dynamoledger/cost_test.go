package dynamoledger_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/ledger/dynamoledger"
	"github.com/sendonce/sendonce/internal/ledger/ledgertest"
	"github.com/sendonce/sendonce/internal/tableschema"
	"github.com/sendonce/sendonce/internal/testenv"
)

// TestEventIndexCost measures, with ReturnConsumedCapacity against
// DynamoDB Local, the write units of a first send: the same messages are
// claimed and marked SENT in a table with the default schema (no event
// index) and in one with the event index (EventIndex=true). By default a
// claim and a mark must cost 1 write unit each (a small item, no index
// entry): the floor of 2. The event index must add exactly one write unit
// at the claim and nothing at Mark.
func TestEventIndexCost(t *testing.T) {
	t.Parallel()
	c := dynamo(t)
	with := testenv.NewTable(t, c, tableschema.WithEventIndex(true))
	without := testenv.NewTable(t, c)

	cost := func(table string, final ledger.State) map[string]float64 {
		var mu sync.Mutex
		units := map[string]float64{}
		l, err := dynamoledger.New(c, table, dynamoledger.Config{ConsumedCapacity: func(op string, cc *types.ConsumedCapacity) {
			mu.Lock()
			units[op] += aws.ToFloat64(cc.CapacityUnits)
			mu.Unlock()
		}})
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
	got, base := cost(with, ledger.StateSent), cost(without, ledger.StateSent)
	abandoned := cost(without, ledger.StateAbandoned)
	t.Logf("write units per message: claim %.2f (%.2f with the event index), mark SENT %.2f (%.2f with); mark ABANDONED %.2f (keeps an attention entry)",
		base["claim"], got["claim"], base["mark"], got["mark"], abandoned["mark"])
	if base["claim"] != 1 || base["mark"] != 1 {
		t.Errorf("a first send costs claim %.2f + mark %.2f write units by default, want 1 + 1", base["claim"], base["mark"])
	}
	if d := got["claim"] - base["claim"]; d != 1 {
		t.Errorf("the event index adds %.2f write units to a claim, want 1", d)
	}
	if d := got["mark"] - base["mark"]; d != 0 {
		t.Errorf("the event index adds %.2f write units to a mark, want 0", d)
	}
}
