package lambdaprovider

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/testsupport"
	"github.com/sendonce/sendonce/provider"
)

// TestCodesDocumented: docs/lambda-provider.md's table of Lambda's error
// codes lists every code the adapter classifies, with the same kind, and
// no other.
func TestCodesDocumented(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../../docs/lambda-provider.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n### Lambda's error codes\n")
	if !ok {
		t.Fatal(`docs/lambda-provider.md has no "### Lambda's error codes" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	code := regexp.MustCompile("`([A-Za-z0-9]+)`")
	documented := map[string]string{}
	for line := range strings.Lines(section) {
		cells := strings.Split(line, "|")
		if len(cells) < 4 || strings.HasPrefix(strings.TrimSpace(cells[1]), "any other") {
			continue
		}
		for _, m := range code.FindAllStringSubmatch(cells[1], -1) {
			documented[m[1]] = strings.TrimSpace(cells[2])
		}
	}
	if len(documented) < 40 {
		t.Fatalf("found %d codes in the table: the scan is broken", len(documented))
	}
	for c, k := range codes {
		if got, ok := documented[c]; !ok || got != k.kind.String() {
			t.Errorf("%s: the adapter says %s, the docs %q", c, k.kind, got)
		}
	}
	for c := range documented {
		if _, ok := codes[c]; !ok {
			t.Errorf("the docs list %s, which the adapter does not classify", c)
		}
	}
}

// TestClassify: the rules that no code decides: an unknown code by HTTP
// status, and a failure without an answer by whether the request left.
func TestClassify(t *testing.T) {
	t.Parallel()
	const to = "+15551234567"
	tests := []struct {
		name    string
		err     error
		written bool
		want    provider.Kind
	}{
		{"Unknown429", testsupport.AWSError(429, "NewThrottle", "slow down"), true, provider.Transient},
		{"Unknown401", testsupport.AWSError(401, "NewAuth", "who"), true, provider.Config},
		{"Unknown403", testsupport.AWSError(403, "NewAuth", "no"), true, provider.Config},
		{"Unknown404", testsupport.AWSError(404, "UnknownError", "404 page not found"), true, provider.Config},
		{"Unknown413", testsupport.AWSError(413, "NewTooLarge", "big"), true, provider.Permanent},
		{"Unknown418", testsupport.AWSError(418, "Teapot", "tea"), true, provider.Config},
		{"Unknown500", testsupport.AWSError(500, "NewInternal", "oops"), true, provider.Ambiguous},
		{"Unknown502", testsupport.AWSError(502, "UnknownError", "bad gateway"), true, provider.Ambiguous},
		{"KnownCodeWinsOverStatus", testsupport.AWSError(500, "TooManyRequestsException", "Rate exceeded"), true, provider.Transient},
		{"RefusedNotWritten", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}, false, provider.Transient},
		{"DNSNotWritten", &net.DNSError{Err: "no such host", Name: "lambda.example"}, false, provider.Transient},
		{"DeadlineBeforeWriting", context.DeadlineExceeded, false, provider.Transient},
		{"NoCredentials", errors.New("failed to refresh cached credentials, no EC2 IMDS role found"), false, provider.Config},
		{"DeadlineAfterWriting", context.DeadlineExceeded, true, provider.Ambiguous},
		{"ResetAfterWriting", &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")}, true, provider.Ambiguous},
		{"EOFAfterWriting", io.ErrUnexpectedEOF, true, provider.Ambiguous},
	}
	for _, tt := range tests {
		got := Classify(tt.err, tt.written, to)
		if got.Kind != tt.want || got.Reason == "" {
			t.Errorf("%s: %s (%q), want %s", tt.name, got.Kind, got.Reason, tt.want)
		}
		if strings.Contains(got.Reason, to) || (got.Err != nil && strings.Contains(got.Err.Error(), to)) {
			t.Errorf("%s: the address is in %q", tt.name, got.Reason)
		}
		if !errors.Is(got, tt.err) && !errors.Is(got.Err, tt.err) {
			t.Errorf("%s: the cause is not wrapped", tt.name)
		}
	}
}
