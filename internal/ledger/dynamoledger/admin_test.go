package dynamoledger_test

import (
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/ledger/dynamoledger"
	"github.com/sendonce/sendonce/internal/ledger/ledgertest"
	"github.com/sendonce/sendonce/internal/testenv"
)

func TestAdminConformance(t *testing.T) {
	t.Parallel()
	ledgertest.RunAdmin(t, func(t *testing.T, now func() time.Time) ledgertest.AdminLedger {
		c := dynamo(t)
		l, err := dynamoledger.New(c, testenv.NewTable(t, c), dynamoledger.WithNow(now))
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		return l
	})
}
