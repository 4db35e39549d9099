package testsupport_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/testsupport"
)

func TestClock(t *testing.T) {
	t.Parallel()
	c := testsupport.NewClock(testsupport.Start)
	if got := c.Now(); !got.Equal(testsupport.Start) {
		t.Fatalf("Now = %v, want %v", got, testsupport.Start)
	}
	if got, want := c.Advance(90*time.Second), testsupport.Start.Add(90*time.Second); !got.Equal(want) || !c.Now().Equal(want) {
		t.Errorf("Advance = %v (Now %v), want %v", got, c.Now(), want)
	}
	if got, want := c.Advance(-30*time.Second), testsupport.Start.Add(time.Minute); !got.Equal(want) {
		t.Errorf("Advance(-30s) = %v, want %v", got, want)
	}
	later := testsupport.Start.Add(time.Hour)
	c.Set(later)
	if got := c.Now(); !got.Equal(later) {
		t.Errorf("after Set: Now = %v, want %v", got, later)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { c.Advance(time.Second); _ = c.Now() })
	}
	wg.Wait()
	if got, want := c.Now(), later.Add(8*time.Second); !got.Equal(want) {
		t.Errorf("after 8 concurrent Advance(1s): %v, want %v", got, want)
	}
}

func TestBuffer(t *testing.T) {
	t.Parallel()
	var b testsupport.Buffer
	log := b.Logger(-4) // slog.LevelDebug
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() { log.Debug("line", "i", i) })
	}
	wg.Wait()
	if got := strings.Count(b.String(), `"msg":"line"`); got != 16 {
		t.Errorf("buffer holds %d lines, want 16:\n%s", got, b.String())
	}
	if _, err := fmt.Fprint(&b, "tail"); err != nil || !strings.HasSuffix(b.String(), "tail") {
		t.Errorf("Write: err %v, buffer ends %q", err, b.String()[max(0, len(b.String())-10):])
	}
}
