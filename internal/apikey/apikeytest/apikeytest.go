// Package apikeytest is the conformance suite every apikey.Records must
// pass (package dynamoapikey against DynamoDB Local, package memapikey in
// memory), driven through apikey.Store, so the fake cannot drift from the
// real store.
//
//	func TestConformance(t *testing.T) {
//		apikeytest.Run(t, func(t *testing.T) apikey.Records { return memapikey.New() })
//	}
package apikeytest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/apikey"
	"github.com/sendonce/sendonce/internal/testsupport"
)

// NewRecordsFunc builds fresh, empty records.
type NewRecordsFunc func(t *testing.T) apikey.Records

// Run runs the suite against the records newRecords builds. Every subtest
// builds its own records and runs in parallel.
func Run(t *testing.T, newRecords NewRecordsFunc) {
	type bundle struct {
		ctx     context.Context
		clock   *testsupport.Clock
		records apikey.Records
		store   *apikey.Store // caching, as the API runs it
	}
	setup := func(t *testing.T) bundle {
		t.Parallel()
		c := testsupport.NewClock(testsupport.Start)
		r := newRecords(t)
		return bundle{t.Context(), c, r, apikey.New(r, apikey.Config{Now: c.Now})}
	}
	create := func(t *testing.T, b bundle, tenant string) (string, string) {
		t.Helper()
		id, key, err := b.store.Create(b.ctx, tenant)
		if err != nil {
			t.Fatalf("Create(%s): %v", tenant, err)
		}
		return id, key
	}
	authenticates := func(t *testing.T, s *apikey.Store, ctx context.Context, key, want string) {
		t.Helper()
		got, err := s.Authenticate(ctx, key)
		switch {
		case want == "" && !errors.Is(err, apikey.ErrUnauthorized):
			t.Errorf("Authenticate = %q, %v; want ErrUnauthorized", got, err)
		case want != "" && (err != nil || got != want):
			t.Errorf("Authenticate = %q, %v; want %s", got, err, want)
		}
	}

	t.Run("CreateAuthenticate", func(t *testing.T) {
		b := setup(t)
		id, key := create(t, b, "acme")
		if !strings.HasPrefix(key, apikey.Prefix+id+"_") || len(key) != len(apikey.Prefix)+16+1+64 || apikey.ID(key) != id {
			t.Errorf("key %q, id %q: want so_<id>_<64 hex>", key, id)
		}
		authenticates(t, b.store, b.ctx, key, "acme")
		r, err := b.records.Get(b.ctx, id)
		if err != nil || r.Tenant != "acme" || r.Revoked || !r.CreatedAt.Equal(testsupport.Start) || strings.Contains(r.Hash, key[len(key)-64:]) {
			t.Errorf("stored %+v, %v: want tenant acme created %v, holding no part of the secret", r, err, testsupport.Start)
		}
		id2, key2 := create(t, b, "acme")
		if id2 == id || key2 == key {
			t.Errorf("two Creates gave the same id or key")
		}
	})
	t.Run("AuthenticateRejects", func(t *testing.T) {
		b := setup(t)
		_, key := create(t, b, "acme")
		last := strings.IndexByte("0123456789abcdef", key[len(key)-1])
		for name, k := range map[string]string{
			"Empty":       "",
			"Malformed":   "so_nothex_" + strings.Repeat("a", 64),
			"Uppercase":   strings.ToUpper(key),
			"Truncated":   key[:len(key)-2],
			"WrongSecret": key[:len(key)-1] + string("0123456789abcdef"[(last+1)%16]),
			"UnknownID":   apikey.Prefix + strings.Repeat("0", 16) + key[len(apikey.Prefix)+16:],
			"Bearer":      "Bearer " + key,
		} {
			t.Run(name, func(t *testing.T) { authenticates(t, b.store, b.ctx, k, "") })
		}
	})
	t.Run("Revocation", func(t *testing.T) {
		b := setup(t)
		other := apikey.New(b.records, apikey.Config{Now: b.clock.Now}) // another container
		id, key := create(t, b, "acme")
		_, kept := create(t, b, "acme")
		authenticates(t, other, b.ctx, key, "acme")
		b.clock.Advance(time.Second)
		if err := b.store.Revoke(b.ctx, id); err != nil {
			t.Fatalf("Revoke: %v", err)
		}
		b.clock.Advance(time.Second)
		if err := b.store.Revoke(b.ctx, id); err != nil {
			t.Errorf("second Revoke: %v, want nil", err)
		}
		authenticates(t, b.store, b.ctx, key, "")
		authenticates(t, b.store, b.ctx, kept, "acme")
		// The other container's cache holds the key until its TTL passes.
		authenticates(t, other, b.ctx, key, "acme")
		b.clock.Advance(apikey.DefaultCacheTTL)
		authenticates(t, other, b.ctx, key, "")
		r, err := b.records.Get(b.ctx, id)
		if want := testsupport.Start.Add(time.Second); err != nil || !r.Revoked || !r.RevokedAt.Equal(want) {
			t.Errorf("stored %+v, %v: want revoked at %v (the first revocation)", r, err, want)
		}
	})
	t.Run("Errors", func(t *testing.T) {
		b := setup(t)
		if err := b.store.Revoke(b.ctx, "0123456789abcdef"); !errors.Is(err, apikey.ErrNotFound) {
			t.Errorf("Revoke(unknown) = %v, want ErrNotFound", err)
		}
		if err := b.store.Revoke(b.ctx, "apikey#x"); !errors.Is(err, apikey.ErrInvalidID) {
			t.Errorf("Revoke(malformed) = %v, want ErrInvalidID", err)
		}
		for _, tenant := range []string{"", "a b", strings.Repeat("x", 65), "acme#1"} {
			if _, _, err := b.store.Create(b.ctx, tenant); !errors.Is(err, apikey.ErrInvalidTenant) {
				t.Errorf("Create(%q) = %v, want ErrInvalidTenant", tenant, err)
			}
		}
		failing := apikey.New(b.records, apikey.Config{Random: func([]byte) error { return errors.New("no entropy") }})
		if _, _, err := failing.Create(b.ctx, "acme"); err == nil {
			t.Errorf("Create with a failing random source succeeded")
		}
		if _, err := b.records.Get(b.ctx, "0123456789abcdef"); !errors.Is(err, apikey.ErrNotFound) {
			t.Errorf("Get(unknown) = %v, want ErrNotFound", err)
		}
		r := apikey.Record{ID: "00000000000000aa", Tenant: "acme", Hash: "00", CreatedAt: testsupport.Start}
		if err := b.records.Put(b.ctx, r); err != nil {
			t.Fatal(err)
		}
		if err := b.records.Put(b.ctx, r); !errors.Is(err, apikey.ErrExists) {
			t.Errorf("Put of a taken id = %v, want ErrExists", err)
		}
		if got, err := b.store.List(b.ctx, "acme"); err != nil || len(got) != 1 {
			t.Errorf("List after refused Creates = %+v, %v; want the one record put", got, err)
		}
	})
	t.Run("List", func(t *testing.T) {
		b := setup(t)
		var ids []string
		for i := range 3 {
			id, _ := create(t, b, "acme")
			ids = append(ids, id)
			if i == 1 {
				create(t, b, "acme-2") // a tenant whose name extends acme's
			}
			b.clock.Advance(time.Second)
		}
		if err := b.store.Revoke(b.ctx, ids[1]); err != nil {
			t.Fatal(err)
		}
		got, err := b.store.List(b.ctx, "acme")
		if err != nil || len(got) != 3 {
			t.Fatalf("List = %+v, %v; want 3 keys", got, err)
		}
		for i, info := range got {
			created := testsupport.Start.Add(time.Duration(i) * time.Second)
			if info.ID != ids[i] || info.Tenant != "acme" || !info.CreatedAt.Equal(created) || info.Revoked != (i == 1) || info.RevokedAt.IsZero() != (i != 1) {
				t.Errorf("List[%d] = %+v, want %s created %v, revoked only the second", i, info, ids[i], created)
			}
		}
		if got, err := b.store.List(b.ctx, "globex"); err != nil || len(got) != 0 {
			t.Errorf("List(globex) = %+v, %v; want none", got, err)
		}
		if _, err := b.store.List(b.ctx, "a#b"); !errors.Is(err, apikey.ErrInvalidTenant) {
			t.Errorf("List(a#b) = %v, want ErrInvalidTenant", err)
		}
	})
	t.Run("ConcurrentCreates", func(t *testing.T) {
		b := setup(t)
		keys := make([]string, 16)
		testsupport.AtOnce(len(keys), func(i int) { _, keys[i] = create(t, b, fmt.Sprintf("t%d", i%2)) })
		for i, k := range keys {
			authenticates(t, b.store, b.ctx, k, fmt.Sprintf("t%d", i%2))
		}
	})
}
