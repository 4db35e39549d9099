package memidempotency_test

import (
	"testing"

	"github.com/sendonce/sendonce/internal/api/idempotency"
	"github.com/sendonce/sendonce/internal/api/idempotency/idempotencytest"
	"github.com/sendonce/sendonce/internal/api/idempotency/memidempotency"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	idempotencytest.Run(t, func(t *testing.T) idempotency.Records { return memidempotency.New() })
}
