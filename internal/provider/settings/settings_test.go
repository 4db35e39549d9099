package settings

import (
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/decide"
)

func TestCommon(t *testing.T) {
	t.Parallel()
	if d, r, err := Common("x", 0, nil); err != nil || d != decide.DefaultProviderTimeout || r != nil {
		t.Errorf("Common(0, nil) = %s, %v, %v; want the default timeout and the process's redactor", d, r, err)
	}
	if d, r, err := Common("x", time.Second, []byte(strings.Repeat("k", 32))); err != nil || d != time.Second || r == nil {
		t.Errorf("Common(1s, key) = %s, %v, %v; want 1s and a redactor of the key", d, r, err)
	}
	for name, tt := range map[string]struct {
		timeout time.Duration
		key     []byte
		want    string
	}{
		"NegativeTimeout": {-time.Second, nil, "snsprovider: new: Timeout -1s is negative"},
		"ShortKey":        {0, []byte("short"), "snsprovider: new: RedactionKey"},
	} {
		if _, _, err := Common("snsprovider", tt.timeout, tt.key); err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("%s: %v, want an error starting %q", name, err, tt.want)
		}
	}
}
