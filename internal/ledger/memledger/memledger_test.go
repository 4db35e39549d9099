package memledger_test

import (
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/ledger/ledgertest"
	"github.com/sendonce/sendonce/internal/ledger/memledger"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	ledgertest.Run(t, func(t *testing.T, now func() time.Time) ledger.Ledger {
		return memledger.New(memledger.WithNow(now))
	})
}
