package provider_test

import (
	"testing"

	"github.com/sendonce/sendonce/internal/provider"
)

// TestNames: logs, metrics dimensions and reports print these names.
func TestNames(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		got  interface{ String() string }
		want string
	}{
		{provider.Ambiguous, "ambiguous"},
		{provider.Transient, "transient"},
		{provider.Permanent, "permanent"},
		{provider.Config, "config"},
		{provider.Kind(9), "Kind(9)"},
		{provider.Kind(-1), "Kind(-1)"},
		{provider.LookupNotFound, "not_found"},
		{provider.LookupAccepted, "accepted"},
		{provider.LookupRejected, "rejected"},
		{provider.LookupStatus(3), "LookupStatus(3)"},
	} {
		if got := tc.got.String(); got != tc.want {
			t.Errorf("String() = %q, want %q", got, tc.want)
		}
	}
}
