package redact

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
)

func TestAddress(t *testing.T) {
	t.Parallel()
	for in, prefix := range map[string]string{"+15551234567": "phone:", "ana@example.com": "email:", "arn:aws:sns:x": "push:", "token": "addr:"} {
		got := Address(in)
		if !strings.HasPrefix(got, prefix) || strings.Contains(got, in) || len(got) != len(prefix)+12 {
			t.Errorf("Address(%q) = %q", in, got)
		}
		if Address(in) != got {
			t.Errorf("Address(%q) is not stable", in)
		}
	}
	if Address("") != "" {
		t.Error("Address of empty is not empty")
	}
}

func TestText(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, to, want string }{
		{"The 'To' number +15551234567 is not valid", "+15551234567", "The 'To' number " + Address("+15551234567") + " is not valid"},
		{"rejected +44 20 7946 0958 and bob@example.org", "", "rejected [number] and [address]"},
		{"550 5.1.1 <ana@example.com>: user unknown", "ana@example.com", "550 5.1.1 <" + Address("ana@example.com") + ">: user unknown"},
		{"national 5551234567 number", "", "national [number] number"},
		{"250 2.0.0 OK queued as 12345", "", "250 2.0.0 OK queued as 12345"},
	}
	for _, tt := range tests {
		if got := Text(tt.in, tt.to); got != tt.want {
			t.Errorf("Text(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if got := Text(strings.Repeat("x", 300), ""); len(got) != maxText+len("…") {
		t.Errorf("Text did not cut a long text: %d bytes", len(got))
	}
}

func TestError(t *testing.T) {
	t.Parallel()
	base := errors.New("send to +15551234567 failed")
	err := Error(fmt.Errorf("wrapped: %w", base), "+15551234567")
	if strings.Contains(err.Error(), "+15551234567") || !errors.Is(err, base) {
		t.Errorf("Error = %q (is base: %v)", err, errors.Is(err, base))
	}
	ue := &url.Error{Op: "Get", URL: "https://api.example/Messages.json?To=%2B15551234567", Err: errors.New("timeout")}
	if got := Error(ue, "+15551234567").Error(); got != "Get timeout" {
		t.Errorf("url error = %q, want the URL dropped", got)
	}
	if Error(nil, "x") != nil {
		t.Error("Error(nil) != nil")
	}
}
