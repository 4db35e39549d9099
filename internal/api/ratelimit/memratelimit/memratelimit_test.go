package memratelimit_test

import (
	"testing"

	"github.com/sendonce/sendonce/internal/api/ratelimit"
	"github.com/sendonce/sendonce/internal/api/ratelimit/memratelimit"
	"github.com/sendonce/sendonce/internal/api/ratelimit/ratelimittest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	ratelimittest.Run(t, func(t *testing.T) ratelimit.Windows { return memratelimit.New() })
}
