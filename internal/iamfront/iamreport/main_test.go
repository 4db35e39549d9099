package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/iamfront"
)

// TestRun: the figures of two processes add up; a denied call, or an
// unexercised grant docs/deploy.md does not account for, fails the check.
func TestRun(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, m map[string]iamfront.RoleStats) {
		b, _ := json.Marshal(m)
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	grants := map[string]bool{"Ledger dynamodb:PutItem": true, "Logs logs:PutLogEvents": true, "Pace dynamodb:UpdateItem": true}
	write("1.json", map[string]iamfront.RoleStats{"SenderRole": {Functions: []string{"sender"}, Evaluated: 3, Denied: map[string]int{},
		Grants: grants, Used: map[string]bool{"Ledger dynamodb:PutItem": true}}})
	write("2.json", map[string]iamfront.RoleStats{"SenderRole": {Functions: []string{"sender"}, Evaluated: 4, Denied: map[string]int{},
		Grants: grants, Used: map[string]bool{"Pace dynamodb:UpdateItem": true}}})
	deploy := filepath.Join(dir, "deploy.md")
	doc := "# Grants the local runs do not exercise\n\n| Role | Sid | Action | Needed when |\n|---|---|---|---|\n| every role | Logs | `logs:PutLogEvents` | always, on AWS |\n\n# Next\n| SenderRole | Ledger | `dynamodb:GetItem` | elsewhere |\n"
	if err := os.WriteFile(deploy, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if rc := run(&out, dir, deploy); rc != 0 || !strings.Contains(out.String(), "unused: Logs logs:PutLogEvents (always, on AWS)") ||
		!strings.Contains(out.String(), "SenderRole                         sender                    7       0        3        1") {
		t.Errorf("rc %d:\n%s", rc, out.String())
	}

	write("3.json", map[string]iamfront.RoleStats{"WebhookRole": {Functions: []string{"webhook"}, Evaluated: 1,
		Denied: map[string]int{"webhook (WebhookRole): PutItem denied dynamodb:PutItem on t": 1},
		Grants: map[string]bool{"Ledger dynamodb:GetItem": true}, Used: map[string]bool{}}})
	out.Reset()
	if rc := run(&out, dir, deploy); rc != 1 || !strings.Contains(out.String(), "DENIED x1: webhook (WebhookRole): PutItem denied dynamodb:PutItem on t") ||
		!strings.Contains(out.String(), "UNUSED, not accounted for in "+deploy+": Ledger dynamodb:GetItem") {
		t.Errorf("rc %d:\n%s", rc, out.String())
	}
}
