package testsupport_test

import (
	"sync"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/testsupport"
)

func TestAtOnce(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	calls, inside, most := 0, 0, 0
	seen := make([]bool, 8)
	testsupport.AtOnce(8, func(i int) {
		seen[i] = true
		mu.Lock()
		calls++
		inside++
		most = max(most, inside)
		mu.Unlock()
		time.Sleep(10 * time.Millisecond)
		mu.Lock()
		inside--
		mu.Unlock()
	})
	if calls != 8 || inside != 0 {
		t.Errorf("AtOnce(8) returned after %d calls with %d still running, want 8 and 0", calls, inside)
	}
	for i, ok := range seen {
		if !ok {
			t.Errorf("f(%d) was not called", i)
		}
	}
	if most < 2 {
		t.Errorf("at most %d calls ran at once, want them concurrent", most)
	}
}
