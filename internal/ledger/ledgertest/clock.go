package ledgertest

import (
	"time"

	"github.com/sendonce/sendonce/internal/testsupport"
)

// Start, Clock and NewClock are testsupport's: the suite's clocks start at
// testsupport.Start. They remain here for the tests that still name them
// through this package; new code uses testsupport directly.
var Start = testsupport.Start

// Clock is testsupport.Clock.
type Clock = testsupport.Clock

// NewClock returns testsupport.NewClock(start).
func NewClock(start time.Time) *Clock { return testsupport.NewClock(start) }
