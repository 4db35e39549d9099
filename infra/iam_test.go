package infra

import (
	"testing"
)

// breakFunc breaks the template or the parameters in memory.
type breakFunc = func(t *testing.T, tpl *Template, p Values) Values

// breakage is one case of TestInvariantsCatchBreakage.
type breakage = struct {
	invariant string
	name      string
	breakIt   breakFunc
}

// policyOf returns the statements of role's first inline policy.
func policyOf(t *testing.T, tpl *Template, role string) map[string]any {
	t.Helper()
	pols, ok := tpl.Resources[role].Properties["Policies"].([]any)
	if !ok || len(pols) == 0 {
		t.Fatalf("%s has no inline policy", role)
	}
	return mapOf(mapOf(pols[0])["PolicyDocument"])
}

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

func appendTo(t *testing.T, tpl *Template, role string, st map[string]any) {
	t.Helper()
	doc := policyOf(t, tpl, role)
	doc["Statement"] = append(doc["Statement"].([]any), st)
}

func ledgerStatement(actions []any, prefixes []any) map[string]any {
	return map[string]any{
		"Effect": "Allow", "Action": actions, "Resource": "arn:aws:dynamodb:us-east-1:1:table/t",
		"Condition": map[string]any{"ForAllValues:StringLike": map[string]any{"dynamodb:LeadingKeys": prefixes}},
	}
}

// grantBreakages are the cases that widen one function's IAM policy: each
// must be caught by the invariant named.
func grantBreakages() []breakage {
	return []breakage{
		{"LeastPrivilegePerFunction", "ReconcilerPutItem", func(t *testing.T, tpl *Template, p Values) Values {
			st := statementBySid(t, tpl, "ReconcilerRole", "Ledger")
			st["Action"] = append(st["Action"].([]any), "dynamodb:PutItem")
			return p
		}},
		{"LeastPrivilegePerFunction", "ApiDeletesLedgerRows", func(t *testing.T, tpl *Template, p Values) Values {
			appendTo(t, tpl, "ApiRole", ledgerStatement([]any{"dynamodb:DeleteItem"}, []any{"v1_*"}))
			return p
		}},
		{"LeastPrivilegePerFunction", "WebhookEveryPrefix", func(t *testing.T, tpl *Template, p Values) Values {
			st := statementBySid(t, tpl, "WebhookRole", "Callbacks")
			mapOf(mapOf(st["Condition"])["ForAllValues:StringLike"])["dynamodb:LeadingKeys"] = []any{"*"}
			return p
		}},
		{"LeastPrivilegePerFunction", "SenderWritesApiKeys", func(t *testing.T, tpl *Template, p Values) Values {
			st := statementBySid(t, tpl, "SenderRole", "Ledger")
			mapOf(mapOf(st["Condition"])["ForAllValues:StringLike"])["dynamodb:LeadingKeys"] = []any{"v1_*", "apikey#*"}
			return p
		}},
		{"LeastPrivilegePerFunction", "NoLeadingKeysCondition", func(t *testing.T, tpl *Template, p Values) Values {
			delete(statementBySid(t, tpl, "SesEventsRole", "Ledger"), "Condition")
			return p
		}},
		{"LeastPrivilegePerFunction", "ForAnyValue", func(t *testing.T, tpl *Template, p Values) Values {
			st := statementBySid(t, tpl, "ApiRole", "RateWindows")
			c := mapOf(st["Condition"])
			c["ForAnyValue:StringLike"] = c["ForAllValues:StringLike"]
			delete(c, "ForAllValues:StringLike")
			return p
		}},
		{"LeastPrivilegePerFunction", "ApiLacksIdempotency", func(t *testing.T, tpl *Template, p Values) Values {
			statementBySid(t, tpl, "ApiRole", "Idempotency")["Action"] = []any{"dynamodb:PutItem"}
			return p
		}},
		{"LeastPrivilegePerFunction", "NonexistentBatchAction", func(t *testing.T, tpl *Template, p Values) Values {
			st := statementBySid(t, tpl, "SenderRole", "PollQueue")
			st["Action"] = append(st["Action"].([]any), "sqs:DeleteMessageBatch")
			return p
		}},
		{"LeastPrivilegePerFunction", "UnknownFunction", func(_ *testing.T, tpl *Template, p Values) Values {
			fn := *tpl.Resources["ApiFunction"]
			tpl.Resources["ExtraFunction"] = &fn
			return p
		}},
		{"SNSPublishScoped", "PublishEverywhere", func(t *testing.T, tpl *Template, p Values) Values {
			appendTo(t, tpl, "ReconcilerRole", map[string]any{"Effect": "Allow", "Action": "sns:Publish", "Resource": "*"})
			return p
		}},
		{"SNSPublishScoped", "NotResourceTooNarrow", func(t *testing.T, tpl *Template, p Values) Values {
			appendTo(t, tpl, "SenderRole", map[string]any{"Effect": "Allow", "Action": "sns:Publish",
				"NotResource": map[string]any{"Fn::Sub": "arn:${AWS::Partition}:sns:*:*:endpoint/*"}})
			return p
		}},
		{"PermissionsBoundaryOnEveryRole", "RoleWithoutBoundary", func(_ *testing.T, tpl *Template, p Values) Values {
			delete(tpl.Resources["CodeDeployRole"].Properties, "PermissionsBoundary")
			return p
		}},
		{"ParametersDescribedAndGrouped", "NoDescription", func(_ *testing.T, tpl *Template, p Values) Values {
			delete(tpl.Parameters["SmtpHost"], "Description")
			return p
		}},
		{"ParametersDescribedAndGrouped", "FreeString", func(_ *testing.T, tpl *Template, p Values) Values {
			delete(tpl.Parameters["SesFrom"], "AllowedPattern")
			return p
		}},
		{"ParametersDescribedAndGrouped", "Ungrouped", func(_ *testing.T, tpl *Template, p Values) Values {
			tpl.Parameters["NewSetting"] = map[string]any{"Type": "Number", "Description": "x", "Default": 1}
			return p
		}},
		{"ParametersDescribedAndGrouped", "Unlabelled", func(_ *testing.T, tpl *Template, p Values) Values {
			delete(mapOf(mapOf(tpl.Metadata["AWS::CloudFormation::Interface"])["ParameterLabels"]), "ClaimTimeoutSeconds")
			return p
		}},
		{"GradualDeployment", "NoAlias", func(_ *testing.T, tpl *Template, p Values) Values {
			delete(mapOf(tpl.Globals["Function"]), "AutoPublishAlias")
			return p
		}},
		{"GradualDeployment", "SenderIgnoresErrors", func(_ *testing.T, tpl *Template, p Values) Values {
			delete(tpl.Resources[SenderFunction].Properties, "DeploymentPreference")
			return p
		}},
		{"GradualDeployment", "NoFencingRollback", func(_ *testing.T, tpl *Template, p Values) Values {
			mapOf(mapOf(tpl.Globals["Function"])["DeploymentPreference"])["Alarms"] = []any{map[string]any{"Ref": "UncertainAttemptsAlarm"}}
			return p
		}},
		{"GradualDeployment", "AllAtOnceOnly", func(_ *testing.T, tpl *Template, p Values) Values {
			mapOf(mapOf(tpl.Globals["Function"])["DeploymentPreference"])["Type"] = "AllAtOnce"
			return p
		}},
	}
}
