package ledgertest

import (
	"sync"
	"testing"
	"time"
)

func TestClock(t *testing.T) {
	t.Parallel()
	c := NewClock(Start)
	if got := c.Now(); !got.Equal(Start) {
		t.Fatalf("Now = %v, want %v", got, Start)
	}
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			c.Advance(time.Second)
			_ = c.Now()
		})
	}
	wg.Wait()
	if got, want := c.Now(), Start.Add(10*time.Second); !got.Equal(want) {
		t.Errorf("after 10 concurrent advances: Now = %v, want %v", got, want)
	}
	at := Start.Add(-time.Hour)
	c.Set(at)
	if got := c.Now(); !got.Equal(at) {
		t.Errorf("after Set: Now = %v, want %v", got, at)
	}
}
