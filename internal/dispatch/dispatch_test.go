package dispatch_test

import (
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/dispatch"
	"github.com/sendonce/sendonce/internal/ledger/memledger"
)

// TestNew: New refuses a Dispatcher with no ledger or a lease that cannot
// cover a takeover, and fills the defaults the sender and the reconciler
// rely on.
func TestNew(t *testing.T) {
	t.Parallel()
	if _, err := dispatch.New(dispatch.Dispatcher{ProviderTimeout: time.Second, ClaimTimeout: time.Minute}); err == nil {
		t.Error("New without a ledger: no error")
	}
	if _, err := dispatch.New(dispatch.Dispatcher{Ledger: memledger.New(memledger.Config{}), ProviderTimeout: 5 * time.Second, ClaimTimeout: 14 * time.Second}); err == nil {
		t.Error("New with a lease shorter than a takeover's worst path: no error")
	}
	d, err := dispatch.New(dispatch.Dispatcher{Ledger: memledger.New(memledger.Config{}), ProviderTimeout: 5 * time.Second, ClaimTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if d.Metrics == nil || d.Logger == nil || d.Now == nil {
		t.Errorf("New left a default unset: metrics %v, logger %v, clock set %t", d.Metrics, d.Logger, d.Now != nil)
	}
}
