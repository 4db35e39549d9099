package dynamoledger_test

import (
	"fmt"
	"slices"
	"sync/atomic"
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

// TestAdminConformance runs the admin cases on a table without the event
// index (the default: ByEvent scans) and on one with it (ByEvent queries
// the index): both find the same rows, in key order.
func TestAdminConformance(t *testing.T) {
	t.Parallel()
	for _, indexed := range []bool{false, true} {
		t.Run(fmt.Sprint("EventIndex=", indexed), func(t *testing.T) {
			t.Parallel()
			ledgertest.RunAdmin(t, func(t *testing.T, now func() time.Time) ledgertest.AdminLedger {
				c := dynamo(t)
				var scans atomic.Int64
				l, err := dynamoledger.New(c, testenv.NewTable(t, c, tableschema.WithEventIndex(indexed)), dynamoledger.Config{Now: now, ScanWarning: func(string) { scans.Add(1) }})
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				t.Cleanup(func() {
					if indexed && scans.Load() != 0 {
						t.Errorf("%d scans on a table with the event index, want 0", scans.Load())
					}
				})
				return l
			})
		})
	}
}

// TestByEventScanWarning checks that ByEvent warns before it scans a table
// without the event index, and only then.
func TestByEventScanWarning(t *testing.T) {
	t.Parallel()
	c := dynamo(t)
	for _, indexed := range []bool{false, true} {
		var warned []string
		l, err := dynamoledger.New(c, testenv.NewTable(t, c, tableschema.WithEventIndex(indexed)), dynamoledger.Config{ScanWarning: func(op string) { warned = append(warned, op) }})
		if err != nil {
			t.Fatal(err)
		}
		e := ledgertest.NewEntry(ledgertest.Key("scan-warning"))
		e.Tenant, e.EventID = "acme", "evt-1"
		if _, err := l.Claim(t.Context(), e, time.Minute); err != nil {
			t.Fatal(err)
		}
		recs, err := l.ByEvent(t.Context(), "acme", "evt-1")
		if err != nil || len(recs) != 1 || recs[0].Key != e.Key {
			t.Fatalf("EventIndex=%v: ByEvent = %v, %v; want the one row", indexed, recs, err)
		}
		if want := map[bool]int{false: 1, true: 0}[indexed]; len(warned) != want {
			t.Errorf("EventIndex=%v: scan warnings %v, want %d", indexed, warned, want)
		}
	}
}

// TestFailedPagesPastOtherItems: the table holds more than ledger rows
// (templates, API keys, callback and idempotency records), and a Failed
// scan page may end on one of them; its cursor must carry the scan on.
// With a page of one item every item ends a page once.
func TestFailedPagesPastOtherItems(t *testing.T) {
	t.Parallel()
	c := dynamo(t)
	table := testenv.NewTable(t, c)
	l, err := dynamoledger.New(c, table, dynamoledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range 3 {
		e := ledgertest.NewEntry(ledgertest.Key(fmt.Sprint("failed-", i)))
		claim, err := l.Claim(t.Context(), e, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Mark(t.Context(), claim, ledger.Outcome{State: ledger.StateFailed, Reason: "rejected"}); err != nil {
			t.Fatal(err)
		}
		want = append(want, e.Key)
	}
	for _, pk := range []string{"tpl#acme#greet#sms#", "apikey#0123456789abcdef", "cb#http#evt-1", "idem#acme#k1"} {
		_, err := c.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String(table),
			Item: map[string]types.AttributeValue{tableschema.PartitionKey: &types.AttributeValueMemberS{Value: pk}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 20 {
			t.Fatal("Failed never ends")
		}
		p, err := l.Failed(t.Context(), ledger.ScanQuery{Limit: 1, Cursor: cursor})
		if err != nil {
			t.Fatalf("page %d: %v", pages, err)
		}
		for _, r := range p.Records {
			got = append(got, r.Key)
		}
		if cursor = p.Cursor; cursor == "" {
			break
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("Failed = %v, want %v", got, want)
	}
	if _, err := l.Failed(t.Context(), ledger.ScanQuery{Cursor: "bm90LWEtY3Vyc29y"}); err == nil {
		t.Error("Failed accepted a cursor it did not make")
	}
}
