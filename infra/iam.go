package infra

import (
	"fmt"
	"slices"
	"strings"
)

// The partition-key prefixes of the one table's record types (package
// tableschema), as IAM's dynamodb:LeadingKeys patterns.
const (
	LedgerRows      = "v1_*"     // ledger rows (package sendkey's key prefix)
	CallbackRecords = "cb#*"     // callback and SES event dedup records
	IdemRecords     = "idem#*"   // API idempotency records
	RateWindows     = "rate#*"   // API rate-limit windows
	APIKeys         = "apikey#*" // API keys
	Templates       = "tpl#*"    // stored templates
	AttentionShards = "attn#*"   // the attention index's partition key
)

// Grant is what one function's role may do: DynamoDB actions per
// partition-key prefix, and every other action it holds.
type Grant struct {
	// Dynamo maps a LeadingKeys prefix to the DynamoDB actions allowed on
	// items (or, for Query, index partitions) under it.
	Dynamo map[string][]string
	// Other lists every non-DynamoDB action the role may hold, across all
	// parameter values: a role holding one more fails the check.
	Other []string
}

// Logs, tracing and the log-redaction key (a Secrets Manager secret),
// which every role may hold.
var baseActions = []string{"logs:CreateLogStream", "logs:PutLogEvents", "xray:PutTraceSegments", "xray:PutTelemetryRecords", "secretsmanager:GetSecretValue"}

// sendActions are what the sender and the reconciler need to reach the
// providers: SNS (SMS and push), SES, and provider secrets from SSM.
var sendActions = []string{"sns:Publish", "ses:SendEmail", "ssm:GetParameter", "kms:Decrypt"}

// FunctionGrants is the least privilege of each function: exactly the
// table's record types it reads or writes, with exactly the calls its
// code makes on them (package comments of dynamoledger, webhook, api,
// apikey), and nothing else.
var FunctionGrants = map[string]Grant{
	SenderFunction: {
		Dynamo: map[string][]string{LedgerRows: {"GetItem", "PutItem", "UpdateItem"}, Templates: {"BatchGetItem"}},
		Other: slices.Concat(baseActions, sendActions, []string{
			"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility", "sqs:GetQueueAttributes",
			"sqs:SendMessage", "kms:GenerateDataKey",
		}),
	},
	ReconcilerFunction: {
		// No PutItem: the reconciler takes over and marks rows, never
		// creates one. Templates: a resend renders the row's stored
		// template version again (rows hold render inputs, not text).
		Dynamo: map[string][]string{LedgerRows: {"GetItem", "UpdateItem"}, AttentionShards: {"Query"}, Templates: {"BatchGetItem"}},
		Other:  slices.Concat(baseActions, sendActions),
	},
	"WebhookFunction": {
		Dynamo: map[string][]string{CallbackRecords: {"GetItem", "PutItem"}, LedgerRows: {"GetItem", "UpdateItem"}},
		Other:  slices.Concat(baseActions, []string{"ssm:GetParameter", "kms:Decrypt"}),
	},
	"ApiFunction": {
		Dynamo: map[string][]string{
			IdemRecords: {"PutItem", "UpdateItem", "DeleteItem"},
			RateWindows: {"UpdateItem"},
			APIKeys:     {"GetItem"},
			LedgerRows:  {"GetItem"},
		},
		Other: slices.Concat(baseActions, []string{"sqs:SendMessage", "kms:Decrypt", "kms:GenerateDataKey"}),
	},
	"SesEventsFunction": {
		Dynamo: map[string][]string{CallbackRecords: {"GetItem", "PutItem"}, LedgerRows: {"GetItem", "UpdateItem"}},
		Other:  baseActions,
	},
}

// roleStatements returns the Allow statements of function fn's role
// (both branches of every Fn::If).
func (t *Template) roleStatements(fn string) ([]map[string]any, error) {
	r, ok := t.Resources[fn]
	if !ok {
		return nil, broken("no function %s", fn)
	}
	role, ok := getAttTarget(r.Properties["Role"], "Arn")
	if !ok {
		return nil, broken("%s: Role is not !GetAtt <role>.Arn", fn)
	}
	rr, err := t.resource(role, "AWS::IAM::Role")
	if err != nil {
		return nil, err
	}
	var docs []any
	pols, _ := rr.Properties["Policies"].([]any)
	for _, p := range pols {
		docs = append(docs, mapOf(mapOf(p)["PolicyDocument"])["Statement"])
	}
	var out []map[string]any
	for _, st := range statements(docs) {
		if eff, _ := st["Effect"].(string); eff == "Allow" {
			out = append(out, st)
		}
	}
	return out, nil
}

// leadingKeys returns the dynamodb:LeadingKeys patterns a statement's
// condition restricts it to, and whether the condition is the
// ForAllValues:StringLike form (every key of the request must match).
func leadingKeys(st map[string]any) ([]string, bool) {
	cond := mapOf(st["Condition"])
	for op, v := range cond {
		if op != "ForAllValues:StringLike" {
			continue
		}
		if ks := leaves(mapOf(v)["dynamodb:LeadingKeys"]); len(ks) > 0 {
			return ks, true
		}
	}
	return nil, false
}

func checkGrants(t *Template, _ Values) error {
	for _, fn := range t.functionNames() {
		want, ok := FunctionGrants[fn]
		if !ok {
			return broken("%s: no entry in infra.FunctionGrants (declare what it may do)", fn)
		}
		sts, err := t.roleStatements(fn)
		if err != nil {
			return err
		}
		gotDynamo := map[string][]string{}
		var gotOther []string
		for _, st := range sts {
			actions := leaves(st["Action"])
			var dyn []string
			for _, a := range actions {
				if name, ok := strings.CutPrefix(a, "dynamodb:"); ok {
					dyn = append(dyn, name)
				} else if !slices.Contains(gotOther, a) {
					gotOther = append(gotOther, a)
				}
			}
			if len(dyn) == 0 {
				continue
			}
			prefixes, ok := leadingKeys(st)
			if !ok {
				return broken("%s: DynamoDB actions %v without a ForAllValues:StringLike dynamodb:LeadingKeys condition", fn, dyn)
			}
			for _, p := range prefixes {
				for _, a := range dyn {
					if !slices.Contains(gotDynamo[p], a) {
						gotDynamo[p] = append(gotDynamo[p], a)
					}
				}
			}
		}
		for _, p := range sortedKeys(gotDynamo) {
			extra := difference(gotDynamo[p], want.Dynamo[p])
			if len(extra) > 0 {
				return broken("%s: may %v on %q, beyond its grant %v", fn, extra, p, want.Dynamo[p])
			}
		}
		for _, p := range sortedKeys(want.Dynamo) {
			if missing := difference(want.Dynamo[p], gotDynamo[p]); len(missing) > 0 {
				return broken("%s: lacks %v on %q, which its code calls", fn, missing, p)
			}
		}
		if extra := difference(gotOther, want.Other); len(extra) > 0 {
			return broken("%s: holds %v, which it never calls", fn, extra)
		}
	}
	return nil
}

// checkSNSPublish: no role may publish to every topic and endpoint. SMS
// (a phone number has no ARN) is authorised against "*", so its grant
// must exclude every SNS ARN with NotResource.
func checkSNSPublish(t *Template, _ Values) error {
	for _, fn := range t.functionNames() {
		sts, err := t.roleStatements(fn)
		if err != nil {
			return err
		}
		for _, st := range sts {
			if !slices.Contains(leaves(st["Action"]), "sns:Publish") {
				continue
			}
			if slices.Contains(leaves(st["Resource"]), "*") {
				return broken("%s: sns:Publish on Resource \"*\" reaches every topic and endpoint", fn)
			}
			if nr, ok := st["NotResource"]; ok {
				sub, _ := Scalar(mapOf(nr)["Fn::Sub"])
				if sub != "arn:${AWS::Partition}:sns:*:*:*" {
					return broken("%s: sns:Publish NotResource %v does not exclude every SNS ARN", fn, nr)
				}
			} else if _, ok := st["Resource"]; !ok {
				return broken("%s: sns:Publish without Resource", fn)
			}
		}
	}
	return nil
}

// checkBoundary: every role of the stack takes the PermissionsBoundary
// parameter, so an organisation's boundary applies to all of them.
func checkBoundary(t *Template, _ Values) error {
	want := fmt.Sprint(map[string]any{"Fn::If": []any{"HasPermissionsBoundary", map[string]any{"Ref": "PermissionsBoundary"}, map[string]any{"Ref": "AWS::NoValue"}}})
	n := 0
	for _, name := range sortedKeys(t.Resources) {
		r := t.Resources[name]
		if r.Type != "AWS::IAM::Role" {
			continue
		}
		n++
		if got := fmt.Sprint(r.Properties["PermissionsBoundary"]); got != want {
			return broken("%s: PermissionsBoundary is %s, want the PermissionsBoundary parameter when set", name, got)
		}
	}
	if n == 0 {
		return broken("no roles")
	}
	return nil
}

// difference returns the elements of a not in b.
func difference(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}
