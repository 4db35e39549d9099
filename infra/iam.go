package infra

import (
	"maps"
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

// roles maps each function to its role: every function names, with
// !GetAtt <role>.Arn, an AWS::IAM::Role of its own (SAM would generate one
// with managed policies on Resource "*") and sets no SAM Policies, which
// SAM ignores beside an explicit Role.
func (t *Template) roles() (map[string]string, error) {
	out := map[string]string{}
	owner := map[string]string{}
	for _, fn := range t.functionNames() {
		role, ok := getAttTarget(props(t.Resources[fn])["Role"], "Arn")
		if !ok || t.Resources[role]["Type"] != "AWS::IAM::Role" {
			return nil, broken("%s: Role is not !GetAtt <a role of this template>.Arn", fn)
		}
		if other, dup := owner[role]; dup {
			return nil, broken("%s and %s share role %s", other, fn, role)
		}
		if _, ok := props(t.Resources[fn])["Policies"]; ok {
			return nil, broken("%s: SAM ignores Policies beside an explicit Role; put them on %s", fn, role)
		}
		owner[role], out[fn] = fn, role
	}
	return out, nil
}

// statements returns every policy statement in v, from both branches of any
// Fn::If, so a statement that only some parameter values enable is checked.
func statements(v any) []map[string]any {
	switch x := v.(type) {
	case []any:
		var out []map[string]any
		for _, e := range x {
			out = append(out, statements(e)...)
		}
		return out
	case map[string]any:
		if args, ok := x["Fn::If"].([]any); ok && len(args) == 3 {
			return append(statements(args[1]), statements(args[2])...)
		}
		if _, ok := x["Effect"]; ok {
			return []map[string]any{x}
		}
	}
	return nil
}

// leaves returns the literal strings of v (a string or a list of them,
// through Fn::If branches).
func leaves(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		var out []string
		for _, e := range x {
			out = append(out, leaves(e)...)
		}
		return out
	case map[string]any:
		if args, ok := x["Fn::If"].([]any); ok && len(args) == 3 {
			return append(leaves(args[1]), leaves(args[2])...)
		}
	}
	return nil
}

// leadingKeys returns the dynamodb:LeadingKeys patterns a statement's
// condition restricts it to, and whether the condition is the
// ForAllValues:StringLike form (every key of the request must match).
func leadingKeys(st map[string]any) ([]string, bool) {
	ks := leaves(mapOf(mapOf(st["Condition"])["ForAllValues:StringLike"])["dynamodb:LeadingKeys"])
	return ks, len(ks) > 0
}

// CheckGrants returns an error matching ErrInvariant unless each function
// has a role of its own (see roles) whose Allow statements, across all
// parameter values, hold exactly its FunctionGrants entry: the DynamoDB
// actions on each partition-key prefix (a ForAllValues:StringLike
// dynamodb:LeadingKeys condition on every DynamoDB statement), and no
// other action beyond Other.
func (t *Template) CheckGrants() error {
	roles, err := t.roles()
	if err != nil {
		return err
	}
	for _, fn := range t.functionNames() {
		want, ok := FunctionGrants[fn]
		if !ok {
			return broken("%s: no entry in infra.FunctionGrants (declare what it may do)", fn)
		}
		var docs []any
		pols, _ := props(t.Resources[roles[fn]])["Policies"].([]any)
		for _, p := range pols {
			docs = append(docs, mapOf(mapOf(p)["PolicyDocument"])["Statement"])
		}
		gotDynamo := map[string][]string{}
		var gotOther []string
		for _, st := range statements(docs) {
			if st["Effect"] != "Allow" {
				continue
			}
			var dyn []string
			for _, a := range leaves(st["Action"]) {
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
				gotDynamo[p] = append(gotDynamo[p], difference(dyn, gotDynamo[p])...)
			}
		}
		for _, p := range slices.Sorted(maps.Keys(gotDynamo)) {
			if extra := difference(gotDynamo[p], want.Dynamo[p]); len(extra) > 0 {
				return broken("%s: may %v on %q, beyond its grant %v", fn, extra, p, want.Dynamo[p])
			}
		}
		for _, p := range slices.Sorted(maps.Keys(want.Dynamo)) {
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
