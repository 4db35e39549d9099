package webhook

import "testing"

func TestRoute(t *testing.T) {
	t.Parallel()
	tests := []struct {
		path string
		want Provider
		ok   bool
	}{
		{"/callbacks/http", ProviderHTTP, true},
		{"/callbacks/twilio/", ProviderTwilio, true},
		{"/prod/callbacks/twilio", ProviderTwilio, true}, // API Gateway stage prefix
		{"/callbacks/", "", false},
		{"/callbacks/smtp", "", false},
		{"/callbacks/http/extra", "", false},
		{"", "", false},
	}
	for _, tt := range tests {
		got, ok := route(tt.path)
		if got != tt.want || ok != tt.ok {
			t.Errorf("route(%q) = %q, %v; want %q, %v", tt.path, got, ok, tt.want, tt.ok)
		}
	}
}
