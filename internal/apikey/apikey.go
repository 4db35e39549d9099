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
// Each key is one item of the one sendonce table (package tableschema),
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
// WithCacheTTL(0) turns the cache off. Failures are never cached.
package apikey

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sendonce/sendonce/internal/tableschema"
)

// Prefix starts every API key.
const Prefix = "so_"

// Key item attributes.
const (
	attrTenant    = "tenant"
	attrHash      = "key_hash"
	attrRevoked   = "revoked"
	attrCreatedAt = "created_at"
	attrRevokedAt = "revoked_at"
	pkPrefix      = "apikey#"
	idHexLen      = 16
	secretHexLen  = 64
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
	// ErrNotFound: Revoke was given an id that names no key.
	ErrNotFound = errors.New("apikey: no such key")
	// ErrInvalidTenant: Create was given a tenant that is not 1 to 64 of
	// A-Z a-z 0-9 . _ - (the tenant_id rule of docs/request.md).
	ErrInvalidTenant = errors.New("apikey: invalid tenant")
	// ErrInvalidID: Revoke was given a string that is not a key id.
	ErrInvalidID = errors.New("apikey: invalid key id")
)

var (
	tenantRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)
	keyRE    = regexp.MustCompile(`^so_([0-9a-f]{16})_([0-9a-f]{64})$`)
	idRE     = regexp.MustCompile(`^[0-9a-f]{16}$`)
)

// DynamoDB is the part of the DynamoDB client the store uses.
type DynamoDB interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
}

// Store keeps API keys in the sendonce table. It is safe for concurrent
// use.
type Store struct {
	db       DynamoDB
	table    string
	now      func() time.Time
	rand     func([]byte) error
	cacheTTL time.Duration

	mu    sync.Mutex
	cache map[[sha256.Size]byte]cached
}

type cached struct {
	tenant string
	until  time.Time
}

// Option configures a Store.
type Option func(*Store)

// WithClock sets the clock (default time.Now).
func WithClock(now func() time.Time) Option { return func(s *Store) { s.now = now } }

// WithCacheTTL sets how long successful lookups are cached per process
// (default DefaultCacheTTL); 0 disables the cache.
func WithCacheTTL(d time.Duration) Option { return func(s *Store) { s.cacheTTL = d } }

// WithRandom sets the source of key material (default crypto/rand). It
// must fill the whole slice or fail.
func WithRandom(read func([]byte) error) Option { return func(s *Store) { s.rand = read } }

// New returns a Store on table through db.
func New(db DynamoDB, table string, opts ...Option) *Store {
	s := &Store{
		db:       db,
		table:    table,
		now:      time.Now,
		rand:     func(b []byte) error { _, err := rand.Read(b); return err },
		cacheTTL: DefaultCacheTTL,
		cache:    map[[sha256.Size]byte]cached{},
	}
	for _, o := range opts {
		o(s)
	}
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
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.table),
		Item: map[string]types.AttributeValue{
			tableschema.PartitionKey: &types.AttributeValueMemberS{Value: pkPrefix + id},
			attrTenant:               &types.AttributeValueMemberS{Value: tenant},
			attrHash:                 &types.AttributeValueMemberS{Value: hex.EncodeToString(sum[:])},
			attrRevoked:              &types.AttributeValueMemberBOOL{Value: false},
			attrCreatedAt:            &types.AttributeValueMemberS{Value: s.now().UTC().Format(time.RFC3339)},
			tableschema.EventPK:      &types.AttributeValueMemberS{Value: listPK(tenant)}, // for List
		},
		ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
		ExpressionAttributeNames: map[string]string{"#pk": tableschema.PartitionKey},
	})
	if err != nil {
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
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                aws.String(s.table),
		Key:                      map[string]types.AttributeValue{tableschema.PartitionKey: &types.AttributeValueMemberS{Value: pkPrefix + id}},
		UpdateExpression:         aws.String("SET #rev = :t, #revAt = if_not_exists(#revAt, :now)"),
		ConditionExpression:      aws.String("attribute_exists(#pk)"),
		ExpressionAttributeNames: map[string]string{"#pk": tableschema.PartitionKey, "#rev": attrRevoked, "#revAt": attrRevokedAt},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":t":   &types.AttributeValueMemberBOOL{Value: true},
			":now": &types.AttributeValueMemberS{Value: s.now().UTC().Format(time.RFC3339)},
		},
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return fmt.Errorf("apikey: revoke %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("apikey: revoke %s: %w", id, err)
	}
	s.mu.Lock()
	clear(s.cache) // this process at least stops accepting it at once
	s.mu.Unlock()
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
	if s.cacheTTL > 0 {
		s.mu.Lock()
		c, ok := s.cache[sum]
		s.mu.Unlock()
		if ok && now.Before(c.until) {
			return c.tenant, nil
		}
	}
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.table),
		Key:            map[string]types.AttributeValue{tableschema.PartitionKey: &types.AttributeValueMemberS{Value: pkPrefix + m[1]}},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return "", fmt.Errorf("apikey: authenticate %s: %w", m[1], err)
	}
	tenant, ok := match(out.Item, sum)
	if !ok {
		return "", ErrUnauthorized
	}
	if s.cacheTTL > 0 {
		s.mu.Lock()
		if len(s.cache) >= maxCached {
			clear(s.cache)
		}
		s.cache[sum] = cached{tenant: tenant, until: now.Add(s.cacheTTL)}
		s.mu.Unlock()
	}
	return tenant, nil
}

// match reports whether item is a live key whose hash is sum, comparing in
// constant time, and returns its tenant.
func match(item map[string]types.AttributeValue, sum [sha256.Size]byte) (string, bool) {
	if item == nil {
		return "", false
	}
	h, _ := item[attrHash].(*types.AttributeValueMemberS)
	t, _ := item[attrTenant].(*types.AttributeValueMemberS)
	if h == nil || t == nil || t.Value == "" {
		return "", false
	}
	stored, err := hex.DecodeString(h.Value)
	if err != nil || subtle.ConstantTimeCompare(stored, sum[:]) != 1 {
		return "", false
	}
	if r, ok := item[attrRevoked].(*types.AttributeValueMemberBOOL); !ok || r.Value {
		return "", false
	}
	return t.Value, true
}

// ID returns the id part of a well-formed key, for logs; "" otherwise.
func ID(key string) string {
	if m := keyRE.FindStringSubmatch(key); m != nil {
		return m[1]
	}
	return ""
}
