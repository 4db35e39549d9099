package memapikey_test

import (
	"testing"

	"github.com/sendonce/sendonce/internal/apikey"
	"github.com/sendonce/sendonce/internal/apikey/apikeytest"
	"github.com/sendonce/sendonce/internal/apikey/memapikey"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	apikeytest.Run(t, func(t *testing.T) apikey.Records { return memapikey.New() })
}
