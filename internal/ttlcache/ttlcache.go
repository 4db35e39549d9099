// Package ttlcache is the per-process cache of lookups that may be a
// little stale (a Lambda container's API keys, its resolved templates):
// an entry is served until its TTL has passed, and the cache, bounded,
// is emptied when full rather than evicting one entry at a time.
package ttlcache

import (
	"sync"
	"time"
)

// Cache maps keys to values that expire ttl after they were put. It is
// safe for concurrent use. A ttl of zero or less turns it off: Get finds
// nothing and Put keeps nothing.
type Cache[K comparable, V any] struct {
	ttl time.Duration
	max int

	mu sync.Mutex
	m  map[K]entry[V]
}

type entry[V any] struct {
	v     V
	until time.Time
}

// New returns an empty cache whose entries live ttl and that holds at
// most max of them.
func New[K comparable, V any](ttl time.Duration, max int) *Cache[K, V] {
	return &Cache[K, V]{ttl: ttl, max: max, m: map[K]entry[V]{}}
}

// Get returns the value put under k if it is still live at now.
func (c *Cache[K, V]) Get(k K, now time.Time) (v V, ok bool) {
	c.mu.Lock()
	e, ok := c.m[k]
	c.mu.Unlock()
	if !ok || !now.Before(e.until) {
		return v, false
	}
	return e.v, true
}

// Put keeps v under k until ttl after now. A full cache is emptied first.
func (c *Cache[K, V]) Put(k K, v V, now time.Time) {
	if c.ttl <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= c.max {
		clear(c.m)
	}
	c.m[k] = entry[V]{v: v, until: now.Add(c.ttl)}
}

// Clear drops every entry.
func (c *Cache[K, V]) Clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.m)
}
