package iamfront

import (
	"testing"
)

// TestEvaluatorLeadingKeys: ForAllValues:StringLike on
// dynamodb:LeadingKeys as IAM evaluates it, through the cache (values
// that match the same patterns share an answer; the others do not).
func TestEvaluatorLeadingKeys(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	e, err := NewEvaluator(root)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	pol := `{"Version":"2012-10-17","Statement":[{"Sid":"Ledger","Effect":"Allow","Action":["dynamodb:GetItem"],"Resource":"arn:aws:dynamodb:us-east-1:123456789012:table/t","Condition":{"ForAllValues:StringLike":{"dynamodb:LeadingKeys":["v1_*"]}}}]}`
	for _, c := range []struct {
		keys []string
		want bool
	}{
		{[]string{"v1_a"}, true}, {[]string{"v1_b"}, true}, {[]string{"tpl#a"}, false}, {[]string{"v1_c"}, true},
		{[]string{"v1_a", "tpl#b"}, false}, {[]string{"v1_a", "v1_z"}, true}, {[]string{"xv1_a"}, false},
	} {
		d, err := e.Evaluate("arn:aws:sts::123456789012:assumed-role/r/s", pol, Call{Action: "dynamodb:GetItem",
			Resource: "arn:aws:dynamodb:us-east-1:123456789012:table/t", Context: map[string][]string{"dynamodb:LeadingKeys": c.keys}})
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed() != c.want {
			t.Errorf("%v: %s, want allowed=%v", c.keys, d.Result, c.want)
		}
		if c.want && (len(d.Allow) != 1 || d.Allow[0] != "Ledger") {
			t.Errorf("%v: allowed by %q, want Ledger", c.keys, d.Allow)
		}
	}
	// Another table, another action: denied.
	for _, c := range []Call{
		{Action: "dynamodb:GetItem", Resource: "arn:aws:dynamodb:us-east-1:123456789012:table/other", Context: map[string][]string{"dynamodb:LeadingKeys": {"v1_a"}}},
		{Action: "dynamodb:PutItem", Resource: "arn:aws:dynamodb:us-east-1:123456789012:table/t", Context: map[string][]string{"dynamodb:LeadingKeys": {"v1_a"}}},
	} {
		if d, err := e.Evaluate("arn:aws:sts::123456789012:assumed-role/r/s", pol, c); err != nil || d.Allowed() {
			t.Errorf("%s: %v %v, want denied", c.Describe(), d, err)
		}
	}
}

// TestDeniedLineGrouping: iam-check's table counts a denial per call and
// record type, the keys themselves left out.
func TestDeniedLineGrouping(t *testing.T) {
	got := keyValues.ReplaceAllString("sender (SenderRole): PutItem denied dynamodb:PutItem on arn:t (dynamodb:LeadingKeys=v1_ab12,tpl#acme#otp#sms##v1)", "$1…")
	if want := "sender (SenderRole): PutItem denied dynamodb:PutItem on arn:t (dynamodb:LeadingKeys=v1_…,tpl#…)"; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}
