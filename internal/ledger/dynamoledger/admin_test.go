package dynamoledger_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

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
				l, err := dynamoledger.New(c, testenv.NewTable(t, c, tableschema.WithEventIndex(indexed)), dynamoledger.WithNow(now),
					dynamoledger.WithScanWarning(func(string) { scans.Add(1) }))
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
		l, err := dynamoledger.New(c, testenv.NewTable(t, c, tableschema.WithEventIndex(indexed)),
			dynamoledger.WithScanWarning(func(op string) { warned = append(warned, op) }))
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
