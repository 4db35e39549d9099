package ttlcache_test

import (
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/testsupport"
	"github.com/sendonce/sendonce/internal/ttlcache"
)

// TestCache: an entry lives its TTL and not an instant more; a full cache
// is emptied before the next put; Clear drops everything; a TTL of zero
// keeps nothing.
func TestCache(t *testing.T) {
	t.Parallel()
	now := testsupport.Start
	c := ttlcache.New[string, int](time.Minute, 2)
	c.Put("a", 1, now)
	if v, ok := c.Get("a", now.Add(time.Minute-time.Nanosecond)); !ok || v != 1 {
		t.Errorf("Get before the TTL = %d, %v; want 1, true", v, ok)
	}
	if _, ok := c.Get("a", now.Add(time.Minute)); ok {
		t.Error("Get at the TTL found the entry")
	}
	if _, ok := c.Get("b", now); ok {
		t.Error("Get found a key never put")
	}
	c.Put("b", 2, now)
	c.Put("c", 3, now) // full: emptied, then c
	if _, ok := c.Get("a", now); ok {
		t.Error("a survived the cache filling up")
	}
	if v, ok := c.Get("c", now); !ok || v != 3 {
		t.Errorf("Get(c) = %d, %v; want 3, true", v, ok)
	}
	c.Clear()
	if _, ok := c.Get("c", now); ok {
		t.Error("c survived Clear")
	}
	off := ttlcache.New[string, int](0, 2)
	off.Put("a", 1, now)
	if _, ok := off.Get("a", now); ok {
		t.Error("a cache with TTL 0 kept an entry")
	}
}

// TestConcurrent runs puts, gets and clears at once (for -race).
func TestConcurrent(t *testing.T) {
	t.Parallel()
	c := ttlcache.New[int, int](time.Minute, 8)
	testsupport.AtOnce(16, func(i int) {
		c.Put(i, i, testsupport.Start)
		if v, ok := c.Get(i, testsupport.Start); ok && v != i {
			t.Errorf("Get(%d) = %d", i, v)
		}
		if i%5 == 0 {
			c.Clear()
		}
	})
}
