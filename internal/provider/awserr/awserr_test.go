package awserr_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/aws/smithy-go"

	"github.com/sendonce/sendonce/internal/provider/awserr"
	"github.com/sendonce/sendonce/internal/testsupport"
	"github.com/sendonce/sendonce/provider"
)

func respErr(status int, code string) error {
	return testsupport.AWSError(status, code, "address ana@example.com is bad")
}

// TestClassify checks the rules every AWS adapter shares and the two
// switches that tell them apart (DetailKnown, Maybe5xx).
func TestClassify(t *testing.T) {
	t.Parallel()
	codes := map[string]awserr.Code{"Rejected": {Kind: provider.Permanent, Reason: "rejected"}}
	plain := awserr.Service{Provider: "x", Service: "X", Codes: codes, Maybe: "it may have been taken"}
	detail := plain
	detail.DetailKnown, detail.Maybe5xx = true, "it may have been processed"
	tests := []struct {
		name       string
		s          awserr.Service
		err        error
		kind       provider.Kind
		reason     string // the whole reason
		wantCode   string
		wantPrefix bool
	}{
		{"known code", plain, respErr(400, "Rejected"), provider.Permanent, "rejected", "Rejected", false},
		{"known code with detail", detail, respErr(400, "Rejected"), provider.Permanent, "rejected: address ", "Rejected", true},
		{"unknown 4xx", plain, respErr(400, "Odd"), provider.Permanent, "rejected by X: address ", "Odd", true},
		{"429", plain, respErr(429, "Odd"), provider.Transient, "throttled", "Odd", false},
		{"403", plain, respErr(403, "Odd"), provider.Config, "X answered HTTP 403", "Odd", false},
		{"5xx", plain, respErr(503, "Odd"), provider.Ambiguous, "X answered HTTP 503: it may have been taken", "Odd", false},
		{"5xx own words", detail, respErr(503, "Odd"), provider.Ambiguous, "X answered HTTP 503: it may have been processed", "Odd", false},
		{"no status", plain, &smithy.GenericAPIError{Code: "Odd"}, provider.Ambiguous, "unrecognised X error", "Odd", false},
		{"dial", plain, &net.OpError{Op: "dial", Err: errors.New("refused")}, provider.Transient, "could not connect to X: nothing was sent", "", false},
		{"timeout", plain, context.DeadlineExceeded, provider.Ambiguous, "timed out waiting for X: it may have been taken", "", false},
		{"reset", plain, &net.OpError{Op: "read", Err: errors.New("reset")}, provider.Ambiguous, "connection to X failed mid-request: it may have been taken", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := tc.s.Classify(tc.err, "ana@example.com")
			if got.Kind != tc.kind || got.Code != tc.wantCode || got.Provider != "x" || got.Op != "send" {
				t.Errorf("Classify = %+v, want kind %v code %q provider x op send", got, tc.kind, tc.wantCode)
			}
			if ok := got.Reason == tc.reason || tc.wantPrefix && strings.HasPrefix(got.Reason, tc.reason); !ok {
				t.Errorf("reason = %q, want %q", got.Reason, tc.reason)
			}
			if strings.Contains(got.Reason, "ana@example.com") || strings.Contains(got.Error(), "ana@example.com") {
				t.Errorf("the address is kept: %q / %q", got.Reason, got.Error())
			}
		})
	}
}
