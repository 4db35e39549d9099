package tableschema_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sendonce/sendonce/internal/tableschema"
	"github.com/sendonce/sendonce/internal/testenv"
)

// TestEventKeys puts the same items into a table with the event index and
// one without, and finds the same keys in both: through the index in the
// first (no scan), through a paginated scan in the second (the caller
// told).
func TestEventKeys(t *testing.T) {
	t.Parallel()
	db := testenv.DynamoDB(t)
	ctx := t.Context()
	for _, indexed := range []bool{true, false} {
		t.Run(fmt.Sprint("EventIndex=", indexed), func(t *testing.T) {
			t.Parallel()
			table := testenv.NewTable(t, db, tableschema.WithEventIndex(indexed))
			var want []string
			put := func(pk, evt string) {
				item := tableschema.Key(pk)
				if evt != "" {
					item[tableschema.EventPK] = &types.AttributeValueMemberS{Value: evt}
				}
				if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
					t.Fatal(err)
				}
			}
			for i := range 5 {
				k := fmt.Sprintf("v1_%02d", 9-i) // put out of order: the answer is sorted
				put(k, "acme#evt-1")
				want = append(want, k)
				put(fmt.Sprintf("v1_other%d", i), "acme#evt-2")
				put(fmt.Sprintf("v1_globex%d", i), "globex#evt-1")
				put(fmt.Sprintf("tpl#acme#%d", i), "")
			}
			slices.Sort(want)
			scans := 0
			ops := map[string]int{}
			got, err := tableschema.EventKeys(ctx, db, tableschema.EventQuery{
				Table: table, Value: "acme#evt-1", PageLimit: 3,
				Scanning:               func() { scans++ },
				ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
				Consumed:               func(op string, _ *types.ConsumedCapacity) { ops[op]++ },
			})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Errorf("EventKeys = %v, want %v", got, want)
			}
			if indexed && (scans != 0 || ops["event scan"] != 0 || ops["event query"] == 0) {
				t.Errorf("with the index: %d scan notices, pages %v; want a query, no scan", scans, ops)
			}
			// 20 items, 3 per page: at least 7 pages.
			if !indexed && (scans != 1 || ops["event scan"] < 7) {
				t.Errorf("without the index: %d scan notices, pages %v; want 1 notice and every page of the scan", scans, ops)
			}
			if got, err := tableschema.EventKeys(ctx, db, tableschema.EventQuery{Table: table, Value: "acme#none"}); err != nil || len(got) != 0 {
				t.Errorf("EventKeys of an unknown event = %v, %v; want none", got, err)
			}
		})
	}
	// Any other Query error is returned, not taken for a missing index.
	if _, err := tableschema.EventKeys(ctx, db, tableschema.EventQuery{Table: "sendonce-test-missing-" + testenv.RandomID(), Value: "a#b"}); err == nil {
		t.Error("EventKeys on a missing table succeeded")
	}
}
