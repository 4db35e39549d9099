package api_test

import (
	"testing"

	"github.com/sendonce/sendonce/internal/api"
	"github.com/sendonce/sendonce/internal/api/ratelimittest"
	"github.com/sendonce/sendonce/internal/testenv"
)

func TestDynamoWindowsConformance(t *testing.T) {
	t.Parallel()
	db := testenv.DynamoDB(t)
	ratelimittest.Run(t, func(t *testing.T) api.RateWindows { return api.NewDynamoWindows(db, testenv.NewTable(t, db)) })
}

func TestMemWindowsConformance(t *testing.T) {
	t.Parallel()
	ratelimittest.Run(t, func(t *testing.T) api.RateWindows { return ratelimittest.NewMem() })
}
