package dynamoratelimit_test

import (
	"testing"

	"github.com/sendonce/sendonce/internal/api/ratelimit"
	"github.com/sendonce/sendonce/internal/api/ratelimit/dynamoratelimit"
	"github.com/sendonce/sendonce/internal/api/ratelimit/ratelimittest"
	"github.com/sendonce/sendonce/internal/testenv"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	db := testenv.DynamoDB(t)
	ratelimittest.Run(t, func(t *testing.T) ratelimit.Windows { return dynamoratelimit.New(db, testenv.NewTable(t, db)) })
}
