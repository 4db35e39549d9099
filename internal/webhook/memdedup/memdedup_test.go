package memdedup_test

import (
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/webhook"
	"github.com/sendonce/sendonce/internal/webhook/deduptest"
	"github.com/sendonce/sendonce/internal/webhook/memdedup"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	deduptest.Run(t, func(t *testing.T, ttl time.Duration, now func() time.Time) webhook.Dedup {
		return memdedup.New(memdedup.Config{TTL: ttl, Now: now})
	})
}
