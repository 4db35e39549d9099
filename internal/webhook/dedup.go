package webhook

import (
	"context"
	"time"
)

// DefaultDedupTTL is how long a callback's dedup record is kept: longer
// than any provider retries a callback (Twilio and the generic protocol
// retry for hours, not days).
const DefaultDedupTTL = 7 * 24 * time.Hour

// Dedup remembers which callbacks were handled. Implementations must be
// safe for concurrent use and pass the suite of package deduptest
// (dynamodedup.Dedup in the one table, memdedup.Dedup in unit tests).
type Dedup interface {
	// Seen reports whether a live record of id exists (strongly
	// consistent; an expired record counts as absent).
	Seen(ctx context.Context, id string) (bool, error)
	// Record stores the record of cb under cb.DedupID() if no live record
	// exists. created is false when one already did (the callback is a
	// duplicate handled concurrently); that is not an error.
	Record(ctx context.Context, cb Callback) (created bool, err error)
}
