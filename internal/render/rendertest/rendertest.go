// Package rendertest builds renderers for tests of the packages that
// render (sender, bench, capability tests): an in-memory store (package
// memtemplates, which passes the store conformance suite) holding the
// example templates for the tenants a test uses.
package rendertest

import (
	"context"
	"testing"

	"github.com/sendonce/sendonce/internal/render"
	"github.com/sendonce/sendonce/internal/templates"
	"github.com/sendonce/sendonce/internal/templates/memtemplates"
)

// Examples returns an uncached renderer whose store holds the example
// templates (templates.Examples) for each of tenants, or fails tb.
func Examples(tb testing.TB, tenants ...string) *render.Renderer {
	tb.Helper()
	r, err := New(tenants...)
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

// New is Examples for code without a testing.TB (benchmarks' mains).
func New(tenants ...string) (*render.Renderer, error) {
	s := memtemplates.New(memtemplates.Config{})
	for _, tenant := range tenants {
		if _, err := templates.ImportExamples(context.Background(), s, tenant); err != nil {
			return nil, err
		}
	}
	return render.New(s, render.Config{CacheTTL: -1}), nil
}
