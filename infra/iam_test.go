package infra

import (
	"errors"
	"testing"
)

// statementBySid returns role's statement sid (outside any Fn::If).
func statementBySid(t *testing.T, tpl *Template, role, sid string) map[string]any {
	t.Helper()
	for _, st := range policyOf(t, tpl, role)["Statement"].([]any) {
		if m := mapOf(st); m["Sid"] == sid {
			return m
		}
	}
	t.Fatalf("%s has no statement %s", role, sid)
	return nil
}

// policyOf returns the document of role's first inline policy.
func policyOf(t *testing.T, tpl *Template, role string) map[string]any {
	t.Helper()
	pols, ok := props(tpl.Resources[role])["Policies"].([]any)
	if !ok || len(pols) == 0 {
		t.Fatalf("%s has no inline policy", role)
	}
	return mapOf(mapOf(pols[0])["PolicyDocument"])
}

func leadingKeysOf(st map[string]any) map[string]any {
	return mapOf(mapOf(st["Condition"])["ForAllValues:StringLike"])
}

// TestGrants: each function's role holds exactly its FunctionGrants entry
// (the real template), and each way of widening or narrowing one is
// reported.
func TestGrants(t *testing.T) {
	t.Parallel()
	tpl, _ := setup(t)
	if err := tpl.CheckGrants(); err != nil {
		t.Fatal(err)
	}
	tests := map[string]func(t *testing.T, tpl *Template){
		"ReconcilerPutItem": func(t *testing.T, tpl *Template) {
			st := statementBySid(t, tpl, "ReconcilerRole", "Ledger")
			st["Action"] = append(st["Action"].([]any), "dynamodb:PutItem")
		},
		"ApiDeletesLedgerRows": func(t *testing.T, tpl *Template) {
			doc := policyOf(t, tpl, "ApiRole")
			doc["Statement"] = append(doc["Statement"].([]any), map[string]any{
				"Effect": "Allow", "Action": []any{"dynamodb:DeleteItem"}, "Resource": "arn:aws:dynamodb:us-east-1:1:table/t",
				"Condition": map[string]any{"ForAllValues:StringLike": map[string]any{"dynamodb:LeadingKeys": []any{"v1_*"}}},
			})
		},
		"WebhookEveryPrefix": func(t *testing.T, tpl *Template) {
			leadingKeysOf(statementBySid(t, tpl, "WebhookRole", "Callbacks"))["dynamodb:LeadingKeys"] = []any{"*"}
		},
		"SenderWritesApiKeys": func(t *testing.T, tpl *Template) {
			leadingKeysOf(statementBySid(t, tpl, "SenderRole", "Ledger"))["dynamodb:LeadingKeys"] = []any{"v1_*", "apikey#*"}
		},
		"ReconcilerLacksTemplates": func(t *testing.T, tpl *Template) {
			leadingKeysOf(statementBySid(t, tpl, "ReconcilerRole", "Templates"))["dynamodb:LeadingKeys"] = []any{"v1_*"}
		},
		"NoLeadingKeysCondition": func(t *testing.T, tpl *Template) {
			delete(statementBySid(t, tpl, "SesEventsRole", "Ledger"), "Condition")
		},
		"ForAnyValue": func(t *testing.T, tpl *Template) {
			c := mapOf(statementBySid(t, tpl, "ApiRole", "RateWindows")["Condition"])
			c["ForAnyValue:StringLike"] = c["ForAllValues:StringLike"]
			delete(c, "ForAllValues:StringLike")
		},
		"ApiLacksIdempotency": func(t *testing.T, tpl *Template) {
			statementBySid(t, tpl, "ApiRole", "Idempotency")["Action"] = []any{"dynamodb:PutItem"}
		},
		"NonexistentBatchAction": func(t *testing.T, tpl *Template) {
			st := statementBySid(t, tpl, "SenderRole", "PollQueue")
			st["Action"] = append(st["Action"].([]any), "sqs:DeleteMessageBatch")
		},
		"ExtraActionInIfBranch": func(t *testing.T, tpl *Template) {
			doc := policyOf(t, tpl, "WebhookRole")
			doc["Statement"] = append(doc["Statement"].([]any), map[string]any{"Fn::If": []any{"Tracing",
				map[string]any{"Effect": "Allow", "Action": "sns:Publish", "Resource": "arn:aws:sns:us-east-1:1:t"},
				map[string]any{"Ref": "AWS::NoValue"}}})
		},
		"UnknownFunction": func(_ *testing.T, tpl *Template) {
			tpl.Resources["ExtraFunction"] = map[string]any{"Type": functionType, "Properties": map[string]any{
				"Role": map[string]any{"Fn::GetAtt": []any{"CodeDeployRole", "Arn"}}}}
		},
		"SharedRole": func(_ *testing.T, tpl *Template) {
			props(tpl.Resources["WebhookFunction"])["Role"] = map[string]any{"Fn::GetAtt": []any{"ApiRole", "Arn"}}
		},
		"SAMGeneratedRole": func(_ *testing.T, tpl *Template) {
			delete(props(tpl.Resources[ReconcilerFunction]), "Role")
		},
		"PoliciesBesideRole": func(_ *testing.T, tpl *Template) {
			props(tpl.Resources["ApiFunction"])["Policies"] = []any{"AWSLambdaBasicExecutionRole"}
		},
	}
	for name, breakIt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tpl, _ := setup(t)
			breakIt(t, tpl)
			if err := tpl.CheckGrants(); !errors.Is(err, ErrInvariant) {
				t.Errorf("error = %v, want ErrInvariant", err)
			}
		})
	}
}
