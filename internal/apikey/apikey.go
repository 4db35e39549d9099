// Package apikey issues, revokes and authenticates the API keys that
// callers of the HTTP API (package api) present as bearer tokens.
//
// # Format
//
// A key is "so_<id>_<secret>": id is 16 lowercase hex digits (8 random
// bytes) that name the key, secret is 64 lowercase hex digits (32 random
// bytes). The whole key is shown once, by Create; it cannot be recovered.
//
// # Storage
//
// A Store keeps its records in Records: package dynamoapikey in the one
// table, package memapikey in unit tests; both pass package apikeytest's
// suite. Each key is one item of the one sendonce table (package tableschema),
// pk "apikey#<id>", holding the tenant, the lowercase hex SHA-256 of the
// whole key (never the key itself), a revoked flag and the creation time.
// Keying by id, not by hash, lets Revoke work from the id alone (what the
// operator CLI has) with one conditional write. Authenticate reads the item
// by the id parsed from the presented key and compares hashes in constant
// time. Keys do not expire: the item has no TTL attribute.
//
// List finds a tenant's keys through the table's KEYS_ONLY "event" index:
// each key item carries the index key "#apikey#<tenant>" (no ledger event
// key starts with '#', a tenant id cannot hold one). Keys created before
// List existed lack it and are not listed (they still authenticate and
// revoke).
//
// # Cache
//
// Authenticate caches successful lookups per process (per Lambda
// container) for CacheTTL (default 30s), so a busy tenant costs one read
// per container per 30s rather than one per request. The price: a revoked
// key keeps working in containers that cached it for up to CacheTTL.
// A negative Config.CacheTTL turns the cache off. Failures are never
// cached.
package apikey

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"time"

	"github.com/sendonce/sendonce/internal/ttlcache"
)

// Prefix starts every API key.
const Prefix = "so_"

const (
	idHexLen     = 16
	secretHexLen = 64
)

// DefaultCacheTTL is how long a successful Authenticate is cached.
const DefaultCacheTTL = 30 * time.Second

// maxCached bounds the cache; when full it is emptied (keys are few).
const maxCached = 4096

// Errors returned by Store methods, to be matched with errors.Is.
var (
	// ErrUnauthorized: the presented key is malformed, unknown, revoked or
	// does not match. It never says which, so a caller learns nothing about
	// which keys or tenants exist.
	ErrUnauthorized = errors.New("apikey: unauthorized")
	// ErrNotFound: Revoke was given an id that names no key (Records
	// return it for an absent record).
	ErrNotFound = errors.New("apikey: no such key")
	// ErrInvalidTenant: Create was given a tenant that is not 1 to 64 of
	// A-Z a-z 0-9 . _ - (the tenant_id rule of docs/request.md).
	ErrInvalidTenant = errors.New("apikey: invalid tenant")
	// ErrInvalidID: Revoke was given a string that is not a key id.
	ErrInvalidID = errors.New("apikey: invalid key id")
	// ErrExists: Records.Put found the id taken.
	ErrExists = errors.New("apikey: key id taken")
)

var (
	tenantRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)
	keyRE    = regexp.MustCompile(`^so_([0-9a-f]{16})_([0-9a-f]{64})$`)
	idRE     = regexp.MustCompile(`^[0-9a-f]{16}$`)
)

// Record is one API key as stored: never the key itself.
type Record struct {
	ID     string
	Tenant string
	// Hash is the lowercase hex SHA-256 of the whole key.
	Hash      string
	CreatedAt time.Time // whole seconds
	Revoked   bool
	// RevokedAt is when the key was first revoked (whole seconds), zero
	// unless Revoked.
	RevokedAt time.Time
}

// Records stores API key records. Implementations are safe for concurrent
// use and pass package apikeytest's suite.
type Records interface {
	// Put stores r under r.ID. It returns an error matching ErrExists when
	// the id is taken.
	Put(ctx context.Context, r Record) error
	// Get returns the record of id (strongly consistent), or an error
	// matching ErrNotFound.
	Get(ctx context.Context, id string) (Record, error)
	// Revoke marks record id revoked; the first revocation's time at is
	// kept. It returns an error matching ErrNotFound when there is none.
	Revoke(ctx context.Context, id string, at time.Time) error
	// List returns the records of tenant, in any order.
	List(ctx context.Context, tenant string) ([]Record, error)
}

// Store issues, revokes and authenticates API keys kept in Records. It is
// safe for concurrent use.
type Store struct {
	records  Records
	now      func() time.Time
	rand     func([]byte) error
	cacheTTL time.Duration
	cache    *ttlcache.Cache[[sha256.Size]byte, string] // key hash → tenant
}

// Config configures a Store. The zero value is the production setting.
type Config struct {
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// CacheTTL is how long a successful Authenticate is cached per
	// process: zero means DefaultCacheTTL, a negative value disables the
	// cache.
	CacheTTL time.Duration
	// Random is the source of key material; nil means crypto/rand. It
	// must fill the whole slice or fail.
	Random func([]byte) error
}

// New returns a Store keeping its keys in records (dynamoapikey.New for
// the sendonce table).
func New(records Records, cfg Config) *Store {
	s := &Store{records: records, now: cfg.Now, rand: cfg.Random, cacheTTL: cfg.CacheTTL}
	if s.now == nil {
		s.now = time.Now
	}
	if s.rand == nil {
		s.rand = func(b []byte) error { _, err := rand.Read(b); return err }
	}
	if s.cacheTTL == 0 {
		s.cacheTTL = DefaultCacheTTL
	}
	s.cache = ttlcache.New[[sha256.Size]byte, string](s.cacheTTL, maxCached)
	return s
}

// Create issues a new key for tenant and returns its id (for Revoke) and
// the whole key ("so_<id>_<secret>"), which is shown only this once. It
// returns ErrInvalidTenant for a malformed tenant, or a wrapped storage
// error.
func (s *Store) Create(ctx context.Context, tenant string) (id, secret string, err error) {
	if !tenantRE.MatchString(tenant) {
		return "", "", fmt.Errorf("apikey: create: %w", ErrInvalidTenant)
	}
	buf := make([]byte, idHexLen/2+secretHexLen/2)
	if err := s.rand(buf); err != nil {
		return "", "", fmt.Errorf("apikey: create: random: %w", err)
	}
	id = hex.EncodeToString(buf[:idHexLen/2])
	key := Prefix + id + "_" + hex.EncodeToString(buf[idHexLen/2:])
	sum := sha256.Sum256([]byte(key))
	r := Record{ID: id, Tenant: tenant, Hash: hex.EncodeToString(sum[:]), CreatedAt: s.now().UTC().Truncate(time.Second)}
	if err := s.records.Put(ctx, r); err != nil {
		return "", "", fmt.Errorf("apikey: create key %s for tenant %s: %w", id, tenant, err)
	}
	return id, key, nil
}

// Revoke marks key id revoked. Authenticate rejects it from then on (in a
// process that cached it, after at most the cache TTL). Revoking a revoked
// key succeeds. It returns ErrInvalidID for a malformed id, ErrNotFound if
// no key has the id, or a wrapped storage error.
func (s *Store) Revoke(ctx context.Context, id string) error {
	if !idRE.MatchString(id) {
		return fmt.Errorf("apikey: revoke: %w", ErrInvalidID)
	}
	if err := s.records.Revoke(ctx, id, s.now().UTC().Truncate(time.Second)); err != nil {
		return fmt.Errorf("apikey: revoke %s: %w", id, err)
	}
	s.cache.Clear() // this process at least stops accepting it at once
	return nil
}

// Authenticate returns the tenant of key. It returns ErrUnauthorized when
// the key is malformed, unknown, revoked or does not match, and a wrapped
// storage error when the lookup itself failed (the caller should answer
// 5xx, not 401).
func (s *Store) Authenticate(ctx context.Context, key string) (tenant string, err error) {
	m := keyRE.FindStringSubmatch(key)
	if m == nil {
		return "", ErrUnauthorized
	}
	sum := sha256.Sum256([]byte(key))
	now := s.now()
	if tenant, ok := s.cache.Get(sum, now); ok {
		return tenant, nil
	}
	r, err := s.records.Get(ctx, m[1])
	if errors.Is(err, ErrNotFound) || err == nil && !matches(r, sum) {
		return "", ErrUnauthorized
	}
	if err != nil {
		return "", fmt.Errorf("apikey: authenticate %s: %w", m[1], err)
	}
	s.cache.Put(sum, r.Tenant, now)
	return r.Tenant, nil
}

// matches reports whether r is a live key whose hash is sum, comparing in
// constant time.
func matches(r Record, sum [sha256.Size]byte) bool {
	stored, err := hex.DecodeString(r.Hash)
	return err == nil && r.Tenant != "" && !r.Revoked && subtle.ConstantTimeCompare(stored, sum[:]) == 1
}

// Info is what List tells about a key: never its secret or its hash.
type Info struct {
	ID        string
	Tenant    string
	CreatedAt time.Time
	Revoked   bool
	// RevokedAt is zero unless the key was revoked.
	RevokedAt time.Time
}

// List returns tenant's keys, oldest first. It returns ErrInvalidTenant
// for a malformed tenant, or a wrapped storage error.
func (s *Store) List(ctx context.Context, tenant string) ([]Info, error) {
	if !tenantRE.MatchString(tenant) {
		return nil, fmt.Errorf("apikey: list: %w", ErrInvalidTenant)
	}
	rs, err := s.records.List(ctx, tenant)
	if err != nil {
		return nil, fmt.Errorf("apikey: list keys of tenant %s: %w", tenant, err)
	}
	infos := make([]Info, 0, len(rs))
	for _, r := range rs {
		infos = append(infos, Info{ID: r.ID, Tenant: r.Tenant, CreatedAt: r.CreatedAt, Revoked: r.Revoked, RevokedAt: r.RevokedAt})
	}
	slices.SortFunc(infos, func(a, b Info) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	return infos, nil
}

// ID returns the id part of a well-formed key, for logs; "" otherwise.
func ID(key string) string {
	if m := keyRE.FindStringSubmatch(key); m != nil {
		return m[1]
	}
	return ""
}
