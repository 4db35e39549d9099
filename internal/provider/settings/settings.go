// Package settings checks the settings every public adapter
// (provider/...provider) takes alike, in one way: the call timeout and
// the redaction key.
package settings

import (
	"cmp"
	"fmt"
	"time"

	"github.com/sendonce/sendonce/internal/decide"
	"github.com/sendonce/sendonce/internal/redact"
)

// Common returns the adapter pkg's call timeout (zero:
// decide.DefaultProviderTimeout) and its redactor (nil, the process's,
// when key is empty). It refuses a negative timeout and a key shorter
// than redact.MinKeyLen, with an error that names pkg and the setting.
func Common(pkg string, timeout time.Duration, key []byte) (time.Duration, *redact.Redactor, error) {
	if timeout < 0 {
		return 0, nil, fmt.Errorf("%s: new: Timeout %s is negative", pkg, timeout)
	}
	r, err := redact.Optional(key)
	if err != nil {
		return 0, nil, fmt.Errorf("%s: new: RedactionKey: %w", pkg, err)
	}
	return cmp.Or(timeout, decide.DefaultProviderTimeout), r, nil
}
