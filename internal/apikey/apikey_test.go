package apikey_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sendonce/sendonce/internal/apikey"
	"github.com/sendonce/sendonce/internal/tableschema"
	"github.com/sendonce/sendonce/internal/testenv"
)

type bundle struct {
	db    *dynamodb.Client
	table string
	clock *clock
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func setup(t *testing.T) bundle {
	t.Helper()
	db := testenv.DynamoDB(t)
	return bundle{db: db, table: testenv.NewTable(t, db), clock: &clock{t: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}}
}

func TestCreateAuthenticate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	s := apikey.New(b.db, b.table, apikey.WithClock(b.clock.Now))
	id, key, err := s.Create(ctx, "acme")
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if !strings.HasPrefix(key, "so_"+id+"_") || len(key) != len("so_")+16+1+64 {
		t.Errorf("key = %q, want so_%s_<64 hex>", key, id)
	}
	if got := apikey.ID(key); got != id {
		t.Errorf("ID(key) = %q, want %q", got, id)
	}
	got, err := s.Authenticate(ctx, key)
	if err != nil || got != "acme" {
		t.Fatalf("Authenticate = %q, %v; want acme, nil", got, err)
	}

	// The stored item holds the hash, never the key.
	out, err := b.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(b.table),
		Key:       map[string]types.AttributeValue{tableschema.PartitionKey: &types.AttributeValueMemberS{Value: "apikey#" + id}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range out.Item {
		if s, ok := v.(*types.AttributeValueMemberS); ok && strings.Contains(s.Value, key[len("so_")+17:]) {
			t.Errorf("attribute %s holds the secret", name)
		}
	}

	id2, key2, err := s.Create(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if id2 == id || key2 == key {
		t.Errorf("two Creates gave the same id or key")
	}
}

func TestAuthenticateRejects(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	s := apikey.New(b.db, b.table, apikey.WithCacheTTL(0))
	_, key, err := s.Create(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	wrongSecret := key[:len(key)-1] + string("0123456789abcdef"[(strings.IndexByte("0123456789abcdef", key[len(key)-1])+1)%16])
	unknownID := "so_" + strings.Repeat("0", 16) + key[len("so_")+16:]
	tests := []struct {
		name, key string
	}{
		{"Empty", ""},
		{"Malformed", "so_nothex_" + strings.Repeat("a", 64)},
		{"Uppercase", strings.ToUpper(key)},
		{"Truncated", key[:len(key)-2]},
		{"WrongSecret", wrongSecret},
		{"UnknownID", unknownID},
		{"Bearer", "Bearer " + key},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := s.Authenticate(ctx, tt.key)
			if !errors.Is(err, apikey.ErrUnauthorized) {
				t.Errorf("Authenticate(%q) = %q, %v; want ErrUnauthorized", tt.key, got, err)
			}
		})
	}
}

func TestRevoke(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	s := apikey.New(b.db, b.table, apikey.WithClock(b.clock.Now))
	other := apikey.New(b.db, b.table, apikey.WithClock(b.clock.Now)) // another container
	id, key, err := s.Create(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Authenticate(ctx, key); err != nil {
		t.Fatalf("Authenticate before revoke: %v", err)
	}
	if err := s.Revoke(ctx, id); err != nil {
		t.Fatalf("Revoke: %v", err)
	}
	if err := s.Revoke(ctx, id); err != nil {
		t.Errorf("second Revoke: %v, want nil", err)
	}
	if _, err := s.Authenticate(ctx, key); !errors.Is(err, apikey.ErrUnauthorized) {
		t.Errorf("Authenticate after revoke in the revoking process: %v, want ErrUnauthorized", err)
	}
	// The other container's cache holds it until the cache TTL passes.
	if got, err := other.Authenticate(ctx, key); err != nil || got != "acme" {
		t.Errorf("cached Authenticate = %q, %v; want acme until the TTL passes", got, err)
	}
	b.clock.Add(apikey.DefaultCacheTTL)
	if _, err := other.Authenticate(ctx, key); !errors.Is(err, apikey.ErrUnauthorized) {
		t.Errorf("Authenticate after cache TTL: %v, want ErrUnauthorized", err)
	}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	s := apikey.New(b.db, b.table)
	if err := s.Revoke(ctx, "0123456789abcdef"); !errors.Is(err, apikey.ErrNotFound) {
		t.Errorf("Revoke(unknown) = %v, want ErrNotFound", err)
	}
	if err := s.Revoke(ctx, "apikey#x"); !errors.Is(err, apikey.ErrInvalidID) {
		t.Errorf("Revoke(malformed) = %v, want ErrInvalidID", err)
	}
	for _, tenant := range []string{"", "a b", strings.Repeat("x", 65), "acme#1"} {
		if _, _, err := s.Create(ctx, tenant); !errors.Is(err, apikey.ErrInvalidTenant) {
			t.Errorf("Create(%q) = %v, want ErrInvalidTenant", tenant, err)
		}
	}
	failing := apikey.New(b.db, b.table, apikey.WithRandom(func([]byte) error { return errors.New("no entropy") }))
	if _, _, err := failing.Create(ctx, "acme"); err == nil {
		t.Errorf("Create with a failing random source succeeded")
	}
}
