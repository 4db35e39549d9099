package memledger_test

import (
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/ledger/ledgertest"
	"github.com/sendonce/sendonce/internal/ledger/memledger"
)

func TestAdminConformance(t *testing.T) {
	t.Parallel()
	ledgertest.RunAdmin(t, func(t *testing.T, now func() time.Time) ledgertest.AdminLedger {
		return memledger.New(memledger.WithNow(now))
	})
}
