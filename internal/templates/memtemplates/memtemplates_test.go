package memtemplates_test

import (
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/templates"
	"github.com/sendonce/sendonce/internal/templates/memtemplates"
	"github.com/sendonce/sendonce/internal/templates/templatestest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	templatestest.Run(t, func(t *testing.T, now func() time.Time) templates.Store {
		return memtemplates.New(memtemplates.Config{Now: now})
	})
}
