package provider_test

import (
	"testing"

	"github.com/sendonce/sendonce/provider"
)

// TestNames: logs, metrics dimensions and reports print these names.
func TestNames(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		got  interface{ String() string }
		want string
	}{
		{provider.Ambiguous, "ambiguous"},
		{provider.Transient, "transient"},
		{provider.Permanent, "permanent"},
		{provider.Config, "config"},
		{provider.Kind(9), "Kind(9)"},
		{provider.Kind(-1), "Kind(-1)"},
		{provider.LookupNotFound, "not_found"},
		{provider.LookupAccepted, "accepted"},
		{provider.LookupRejected, "rejected"},
		{provider.LookupUnproven, "unproven"},
		{provider.LookupStatus(4), "LookupStatus(4)"},
	} {
		if got := tc.got.String(); got != tc.want {
			t.Errorf("String() = %q, want %q", got, tc.want)
		}
	}
}

// TestAttribute: a content search proves a message is the key's only by
// the id a callback for the key recorded; otherwise a match is unproven
// and no match at all is "not found".
func TestAttribute(t *testing.T) {
	t.Parallel()
	sent := provider.Candidate{ID: "SM1", Status: provider.LookupAccepted}
	failed := provider.Candidate{ID: "SM2", Status: provider.LookupRejected, Reason: "undelivered"}
	for _, tc := range []struct {
		name       string
		evidence   string
		candidates []provider.Candidate
		want       provider.LookupStatus
		wantID     string
	}{
		{"NoCandidate", "", nil, provider.LookupNotFound, ""},
		{"MatchWithoutEvidence", "", []provider.Candidate{sent}, provider.LookupUnproven, ""},
		{"RejectedWithoutEvidence", "", []provider.Candidate{failed}, provider.LookupUnproven, ""},
		{"EvidenceAccepted", "SM1", []provider.Candidate{failed, sent}, provider.LookupAccepted, "SM1"},
		{"EvidenceRejected", "SM2", []provider.Candidate{sent, failed}, provider.LookupRejected, "SM2"},
		{"EvidenceNotListed", "SM9", []provider.Candidate{sent}, provider.LookupUnproven, ""},
		{"EvidenceNothingListed", "SM9", nil, provider.LookupUnproven, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := provider.Attribute(provider.Message{Key: "v1_k", ProviderMessageID: tc.evidence}, tc.candidates)
			if got.Status != tc.want || got.MessageID != tc.wantID {
				t.Errorf("Attribute = %+v, want %s %q", got, tc.want, tc.wantID)
			}
			if got.Status == provider.LookupUnproven && got.Reason == "" {
				t.Error("an unproven answer has no reason")
			}
		})
	}
}
