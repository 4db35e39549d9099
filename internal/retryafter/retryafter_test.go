package retryafter_test

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/retryafter"
	"github.com/sendonce/sendonce/provider"
)

func TestParse(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 6, 7, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"1", time.Second, true},
		{" 120 ", 2 * time.Minute, true},
		{"86400", retryafter.Max, true},
		{"0", 0, false},
		{"-3", 0, false},
		{"", 0, false},
		{"soon", 0, false},
		{now.Add(30 * time.Second).Format(http.TimeFormat), 30 * time.Second, true},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0, false},
	} {
		got, ok := retryafter.Parse(c.in, now)
		if got != c.want || ok != c.ok {
			t.Errorf("Parse(%q) = %v, %t; want %v, %t", c.in, got, ok, c.want, c.ok)
		}
	}
}

func TestFromIsFoundInAProviderError(t *testing.T) {
	t.Parallel()
	h := http.Header{}
	if retryafter.From(h, time.Now()) != nil {
		t.Error("From without a header is not nil")
	}
	h.Set("Retry-After", "3")
	err := error(&provider.Error{Kind: provider.Transient, Code: "429", Err: retryafter.From(h, time.Now())})
	var ra interface{ RetryAfter() time.Duration }
	if !errors.As(err, &ra) || ra.RetryAfter() != 3*time.Second {
		t.Errorf("the provider error's chain holds no 3 s Retry-After: %v", err)
	}
}

func ExampleParse() {
	d, ok := retryafter.Parse("2", time.Now())
	fmt.Println(d, ok)
	// Output: 2s true
}
