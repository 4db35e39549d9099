package ratelimit

import (
	"errors"
	"testing"
	"time"
)

func TestParseRate(t *testing.T) {
	t.Parallel()
	good := map[string]Rate{
		"100/1m":  {100, time.Minute},
		" 5/30s ": {5, 30 * time.Second},
		"1/1h":    {1, time.Hour},
	}
	for in, want := range good {
		got, err := ParseRate(in)
		if err != nil || got != want {
			t.Errorf("ParseRate(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "100", "0/1m", "-1/1m", "x/1m", "5/", "5/0s", "5/500ms", "5/1.5s", "5/1m/2"} {
		if _, err := ParseRate(in); !errors.Is(err, ErrInvalidRate) {
			t.Errorf("ParseRate(%q) = %v, want ErrInvalidRate", in, err)
		}
	}
}
