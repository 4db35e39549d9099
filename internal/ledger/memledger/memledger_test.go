package memledger_test

import (
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/ledger/ledgertest"
	"github.com/sendonce/sendonce/internal/ledger/memledger"
)

// TestConformance runs both suites, the ledger's and the operator's
// (ledgertest.RunAdmin), against memledger.
func TestConformance(t *testing.T) {
	t.Parallel()
	ledgertest.Run(t, func(t *testing.T, now func() time.Time) ledger.Ledger {
		return memledger.New(memledger.Config{Now: now})
	})
	ledgertest.RunAdmin(t, func(t *testing.T, now func() time.Time) ledgertest.AdminLedger {
		return memledger.New(memledger.Config{Now: now})
	})
}
