// Package memtemplates is an in-memory templates.Store for unit tests. It
// passes the same suite as the DynamoDB store (package templatestest).
package memtemplates

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/sendonce/sendonce/internal/templates"
)

// Store is an in-memory templates.Store. It is safe for concurrent use.
type Store struct {
	now func() time.Time

	mu       sync.Mutex
	versions map[templates.ID][]templates.Template // index i holds version i+1
}

// Config configures a Store. The zero value is the production setting.
type Config struct {
	// Now is the clock of the versions' creation times; nil means
	// time.Now.
	Now func() time.Time
}

// New returns an empty Store.
func New(cfg Config) *Store {
	s := &Store{now: cfg.Now, versions: map[templates.ID][]templates.Template{}}
	if s.now == nil {
		s.now = time.Now
	}
	return s
}

// Put implements templates.Store.
func (s *Store) Put(_ context.Context, t templates.Template) (templates.Template, error) {
	if err := templates.Validate(t); err != nil {
		return templates.Template{}, fmt.Errorf("memtemplates: put %s: %w", t.ID, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t.Version = len(s.versions[t.ID]) + 1
	t.CreatedAt = s.now().UTC().Truncate(time.Millisecond)
	s.versions[t.ID] = append(s.versions[t.ID], t)
	return t, nil
}

// Get implements templates.Store.
func (s *Store) Get(_ context.Context, id templates.ID, version int) (templates.Template, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	vs := s.versions[id]
	switch {
	case len(vs) == 0 || version < 0 || version > len(vs):
		return templates.Template{}, fmt.Errorf("memtemplates: get %s v%d: %w", id, version, templates.ErrNotFound)
	case version == 0:
		return vs[len(vs)-1], nil
	}
	return vs[version-1], nil
}

// Resolve implements templates.Store.
func (s *Store) Resolve(_ context.Context, tenant, name, channel string, locales []string) (templates.Template, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range locales {
		if vs := s.versions[templates.ID{Tenant: tenant, Name: name, Channel: channel, Locale: l}]; len(vs) > 0 {
			return vs[len(vs)-1], nil
		}
	}
	return templates.Template{}, fmt.Errorf("memtemplates: resolve %s/%s/%s: %w", tenant, name, channel, templates.ErrNotFound)
}

// List implements templates.Store.
func (s *Store) List(_ context.Context, tenant string) ([]templates.Template, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []templates.Template{}
	for id, vs := range s.versions {
		if id.Tenant == tenant {
			out = append(out, vs[len(vs)-1])
		}
	}
	slices.SortFunc(out, func(a, b templates.Template) int {
		if templates.Less(a.ID, b.ID) {
			return -1
		}
		return 1
	})
	return out, nil
}
