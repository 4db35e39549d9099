package infra

import (
	"bytes"
	"errors"
	"os"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/decide"
)

const templatePath = "../template.yaml"

// setup loads a fresh copy of the real template (tests may mutate it) and
// its default parameter values.
func setup(t *testing.T) (*Template, Values) {
	t.Helper()
	tpl, err := Load(templatePath)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return tpl, tpl.Defaults()
}

func TestParseShortForms(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		yaml string
		want any
	}{
		{"Ref", "v: !Ref Param", map[string]any{"Ref": "Param"}},
		{"GetAttDotted", "v: !GetAtt Queue.Arn", map[string]any{"Fn::GetAtt": []any{"Queue", "Arn"}}},
		{"GetAttNestedAttr", "v: !GetAtt Fn.Url.FunctionUrl", map[string]any{"Fn::GetAtt": []any{"Fn", "Url.FunctionUrl"}}},
		{"GetAttList", "v: !GetAtt [Queue, Arn]", map[string]any{"Fn::GetAtt": []any{"Queue", "Arn"}}},
		{"SubString", "v: !Sub ${A}s", map[string]any{"Fn::Sub": "${A}s"}},
		{"SubList", "v: !Sub [\"${X}\", {X: !Ref A}]", map[string]any{"Fn::Sub": []any{"${X}", map[string]any{"X": map[string]any{"Ref": "A"}}}}},
		{"NestedIfEquals", "v: !If [C, !Equals [a, !Ref B], 3]", map[string]any{"Fn::If": []any{"C", map[string]any{"Fn::Equals": []any{"a", map[string]any{"Ref": "B"}}}, 3}}},
		{"Condition", "v: !Condition C", map[string]any{"Condition": "C"}},
		{"LongFormUntouched", "v: {\"Fn::Join\": [\",\", [a, b]]}", map[string]any{"Fn::Join": []any{",", []any{"a", "b"}}}},
		{"PlainScalars", "v: [1, \"1\", true, x]", []any{1, "1", true, "x"}},
		{"Alias", "a: &x {k: 1}\nv: *x", map[string]any{"k": 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tpl, err := Parse([]byte("Outputs:\n  " + indent(tc.yaml)))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if got := tpl.Outputs["v"]; !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %#v, want %#v", got, tc.want)
			}
		})
	}
}

func indent(s string) string {
	out := ""
	for i, line := range splitLines(s) {
		if i > 0 {
			out += "\n  "
		}
		out += line
	}
	return out
}

func splitLines(s string) []string {
	var out []string
	start := 0
	for i := range len(s) {
		if s[i] == '\n' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, yaml string }{
		{"NotYAML", "a: [1, 2"},
		{"Empty", ""},
		{"TopLevelList", "- a\n- b"},
		{"UnknownTag", "Outputs: {v: !Frobnicate x}"},
		{"GetAttWithoutDot", "Outputs: {v: !GetAtt Queue}"},
		{"IfOnScalar", "Outputs: {v: !If x}"},
		{"ResourceWithoutType", "Resources: {Q: {Properties: {}}}"},
		{"ResourceNotMapping", "Resources: {Q: 3}"},
		{"ComplexKey", "Outputs: {[a]: 1}"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tc.yaml))
			if !errors.Is(err, ErrTemplate) {
				t.Errorf("Parse(%q) error = %v, want ErrTemplate", tc.yaml, err)
			}
		})
	}
}

func TestParseAliasBomb(t *testing.T) {
	t.Parallel()
	doc := "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
	prev := "a"
	for i := range 8 {
		name := "l" + strconv.Itoa(i)
		doc += name + ": &" + name + " [*" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + "]\n"
		prev = name
	}
	if _, err := Parse([]byte(doc)); !errors.Is(err, ErrTemplate) {
		t.Errorf("Parse(alias bomb) error = %v, want ErrTemplate", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("Resources: {Q: {Type: AWS::SQS::Queue, Properties: {VisibilityTimeout: !Ref V}}}"))
	f.Add([]byte("Outputs: {v: !Sub [\"${X}\", {X: !GetAtt A.B}]}"))
	f.Add([]byte("Conditions: {C: !Not [!Equals [!Ref P, \"\"]]}"))
	f.Add([]byte("a: &x [1]\nb: *x\n"))
	f.Add([]byte("!Ref x"))
	f.Fuzz(func(t *testing.T, data []byte) {
		tpl, err := Parse(data)
		if err != nil {
			if !errors.Is(err, ErrTemplate) {
				t.Fatalf("Parse error %v does not match ErrTemplate", err)
			}
			return
		}
		for name, r := range tpl.Resources {
			if r == nil || r.Type == "" {
				t.Fatalf("resource %s parsed without a type", name)
			}
		}
		// Evaluating anything parsed must not panic.
		p := tpl.Defaults()
		for _, v := range tpl.Outputs {
			_, _ = tpl.Eval(v, p)
		}
		for name := range tpl.Conditions {
			_, _ = tpl.Condition(name, p)
		}
		_, _ = tpl.CheckRules(p)
		for _, inv := range Invariants {
			_ = inv.Check(tpl, p)
		}
	})
}

func TestEval(t *testing.T) {
	t.Parallel()
	tpl, err := Parse([]byte(`
Parameters:
  A: {Type: Number, Default: 30}
  Mode: {Type: String, Default: fifo}
Conditions:
  IsFifo: !Equals [!Ref Mode, fifo]
  NotFifo: !Not [!Condition IsFifo]
Resources:
  Q: {Type: AWS::SQS::Queue}
`))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	p := tpl.Defaults()
	tests := []struct {
		name string
		in   any
		want any
	}{
		{"RefParam", map[string]any{"Ref": "A"}, "30"},
		{"SubParam", map[string]any{"Fn::Sub": "${A}s"}, "30s"},
		{"SubPseudo", map[string]any{"Fn::Sub": "${AWS::Region}/${A}"}, "us-east-1/30"},
		{"SubVars", map[string]any{"Fn::Sub": []any{"x${B}", map[string]any{"B": map[string]any{"Ref": "Mode"}}}}, "xfifo"},
		{"IfTrue", map[string]any{"Fn::If": []any{"IsFifo", 1, 2}}, 1},
		{"IfNotCondition", map[string]any{"Fn::If": []any{"NotFifo", 1, 2}}, 2},
		{"NoValueDropped", map[string]any{"X": map[string]any{"Fn::If": []any{"IsFifo", map[string]any{"Ref": "AWS::NoValue"}, 2}}, "Y": 1}, map[string]any{"Y": 1}},
		{"Join", map[string]any{"Fn::Join": []any{"-", []any{"a", map[string]any{"Ref": "A"}}}}, "a-30"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := tpl.Eval(tc.in, p)
			if err != nil {
				t.Fatalf("Eval: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %#v, want %#v", got, tc.want)
			}
		})
	}
	for name, in := range map[string]any{
		"RefResource": map[string]any{"Ref": "Q"},
		"GetAtt":      map[string]any{"Fn::GetAtt": []any{"Q", "Arn"}},
		"SubResource": map[string]any{"Fn::Sub": "${Q}"},
		"UnknownIf":   map[string]any{"Fn::If": []any{"Nope", 1, 2}},
	} {
		t.Run("Unresolved"+name, func(t *testing.T) {
			t.Parallel()
			if _, err := tpl.Eval(in, p); !errors.Is(err, ErrUnresolved) {
				t.Errorf("Eval(%v) error = %v, want ErrUnresolved", in, err)
			}
		})
	}
}

func TestRealTemplateHoldsInvariants(t *testing.T) {
	t.Parallel()
	tpl, p := setup(t)
	for _, inv := range Invariants {
		t.Run(inv.Name, func(t *testing.T) {
			t.Parallel()
			if err := inv.Check(tpl, p); err != nil {
				t.Errorf("%s: %v", inv.Name, err)
			}
		})
	}
	// The event index and its attribute definition exist exactly when
	// EventIndex is true, in both tables (DynamoDB rejects an attribute
	// definition no key schema uses).
	for _, mode := range []string{"single-region", "global-strong"} {
		for _, ev := range []string{"true", "false"} {
			t.Run("TableMatchesSchema/"+mode+"/EventIndex="+ev, func(t *testing.T) {
				t.Parallel()
				if err := checkTableSchema(tpl, p.With("LedgerMode", mode).With("EventIndex", ev)); err != nil {
					t.Error(err)
				}
			})
		}
	}
	t.Run("TableMatchesSchema/UnconditionalEventAttribute", func(t *testing.T) {
		t.Parallel()
		b, err := os.ReadFile(templatePath)
		if err != nil {
			t.Fatal(err)
		}
		cond := "!If [HasEventIndex, { AttributeName: evt_pk, AttributeType: S }, !Ref AWS::NoValue]"
		if !bytes.Contains(b, []byte(cond)) {
			t.Fatalf("template.yaml has no %q", cond)
		}
		broken, err := Parse(bytes.ReplaceAll(b, []byte(cond), []byte("{ AttributeName: evt_pk, AttributeType: S }")))
		if err != nil {
			t.Fatal(err)
		}
		if err := checkTableSchema(broken, p); !errors.Is(err, ErrInvariant) {
			t.Errorf("an evt_pk definition without the event index: %v, want ErrInvariant", err)
		}
	})
	t.Run("RulesAcceptDefaults", func(t *testing.T) {
		t.Parallel()
		v, err := tpl.CheckRules(p)
		if err != nil {
			t.Fatalf("CheckRules: %v", err)
		}
		if len(v) != 0 {
			t.Errorf("default parameters violate rules: %v", v)
		}
	})
}

// TestInvariantsCatchBreakage breaks each invariant of the real template in
// memory (a parameter default, or the template itself) and checks that the
// invariant's check reports it, so no check passes vacuously.
func TestInvariantsCatchBreakage(t *testing.T) {
	t.Parallel()
	param := func(name, value string) breakFunc {
		return func(_ *testing.T, _ *Template, p Values) Values { return p.With(name, value) }
	}
	tests := []breakage{
		{"VisibilityCoversSender", "VisibilityBelow6xTimeout", param("QueueVisibilityTimeoutSeconds", "179")},
		{"VisibilityCoversSender", "SenderTimeoutRaised", param("SenderTimeoutSeconds", "60")},
		{"VisibilityCoversSender", "BatchingWindowAddsUp", param("MaximumBatchingWindowInSeconds", "1")},
		{"ClaimOutlivesProviderCall", "ClaimWithinMargin", param("ClaimTimeoutSeconds", "14")},
		{"ClaimOutlivesProviderCall", "ProviderRaised", param("ProviderTimeoutSeconds", "55")},
		{"RedeliveryOutlivesClaim", "LongClaim", param("ClaimTimeoutSeconds", "600")},
		{"RedeliveryOutlivesClaim", "OneReceive", func(_ *testing.T, _ *Template, p Values) Values {
			return p.With("MaxReceiveCount", "1").With("ClaimTimeoutSeconds", "120")
		}},
		{"LedgerOutlivesMessages", "ShortRetention", param("RetentionHours", "455")},
		{"LedgerOutlivesMessages", "LongQueueRetention", func(_ *testing.T, _ *Template, p Values) Values {
			return p.With("QueueRetentionSeconds", "1209600").With("RetentionHours", "690")
		}},
		{"DLQOutlivesQueue", "ShortDLQ", param("DLQRetentionSeconds", "60")},
		{"SenderReportsBatchItemFailures", "NoResponseTypes", func(t *testing.T, tpl *Template, p Values) Values {
			ev, _, err := tpl.senderEvent()
			if err != nil {
				t.Fatal(err)
			}
			delete(ev, "FunctionResponseTypes")
			return p
		}},
		{"TableMatchesSchema", "WrongTTLAttribute", func(_ *testing.T, tpl *Template, p Values) Values {
			mapOf(tpl.Resources["LedgerTable"].Properties["TimeToLiveSpecification"])["AttributeName"] = "ttl"
			return p
		}},
		{"TableMatchesSchema", "GlobalTableProjection", func(_ *testing.T, tpl *Template, p Values) Values {
			gsi := mapOf(tpl.Resources["GlobalLedgerTable"].Properties["GlobalSecondaryIndexes"].([]any)[0])
			gsi["Projection"] = map[string]any{"ProjectionType": "KEYS_ONLY"}
			return p
		}},
		{"TableMatchesSchema", "ExtraAttribute", func(_ *testing.T, tpl *Template, p Values) Values {
			props := tpl.Resources["LedgerTable"].Properties
			props["AttributeDefinitions"] = append(props["AttributeDefinitions"].([]any), map[string]any{"AttributeName": "x", "AttributeType": "S"})
			return p
		}},
		{"TableMatchesSchema", "SortKeyAdded", func(_ *testing.T, tpl *Template, p Values) Values {
			props := tpl.Resources["LedgerTable"].Properties
			props["KeySchema"] = append(props["KeySchema"].([]any), map[string]any{"AttributeName": "attn_sk", "KeyType": "RANGE"})
			return p
		}},
		{"FunctionsArm64AL2023", "X86Function", func(_ *testing.T, tpl *Template, p Values) Values {
			tpl.Resources["ApiFunction"].Properties["Architectures"] = []any{"x86_64"}
			return p
		}},
		{"FunctionsArm64AL2023", "GlobalRuntime", func(_ *testing.T, tpl *Template, p Values) Values {
			mapOf(tpl.Globals["Function"])["Runtime"] = "provided.al2"
			return p
		}},
		{"OwnRolePerFunction", "SharedRole", func(_ *testing.T, tpl *Template, p Values) Values {
			tpl.Resources["WebhookFunction"].Properties["Role"] = map[string]any{"Fn::GetAtt": []any{"ApiRole", "Arn"}}
			return p
		}},
		{"OwnRolePerFunction", "SAMGeneratedRole", func(_ *testing.T, tpl *Template, p Values) Values {
			delete(tpl.Resources["ReconcilerFunction"].Properties, "Role")
			return p
		}},
		{"NoWildcardPolicies", "ActionStar", addStatement(map[string]any{"Effect": "Allow", "Action": "*", "Resource": "arn:aws:sqs:us-east-1:1:q"})},
		{"NoWildcardPolicies", "ServiceStar", addStatement(map[string]any{"Effect": "Allow", "Action": []any{"dynamodb:*"}, "Resource": "arn:aws:dynamodb:us-east-1:1:table/t"})},
		{"NoWildcardPolicies", "DynamoOnEveryTable", addStatement(map[string]any{"Effect": "Allow", "Action": []any{"dynamodb:GetItem"}, "Resource": "*"})},
		{"NoWildcardPolicies", "InsideIfBranch", addStatement(map[string]any{"Fn::If": []any{"Tracing", map[string]any{"Ref": "AWS::NoValue"}, map[string]any{"Effect": "Allow", "Action": "dynamodb:Query", "Resource": []any{"*"}}}})},
	}
	tests = append(tests, grantBreakages()...)
	for _, tc := range tests {
		t.Run(tc.invariant+"/"+tc.name, func(t *testing.T) {
			t.Parallel()
			tpl, p := setup(t)
			inv := invariant(t, tc.invariant)
			if err := inv.Check(tpl, p); err != nil {
				t.Fatalf("before breaking: %v", err)
			}
			p = tc.breakIt(t, tpl, p)
			if err := inv.Check(tpl, p); !errors.Is(err, ErrInvariant) {
				t.Errorf("after breaking: error = %v, want ErrInvariant", err)
			}
		})
	}
}

func addStatement(st map[string]any) func(*testing.T, *Template, Values) Values {
	return func(t *testing.T, tpl *Template, p Values) Values {
		pols := tpl.Resources["SenderRole"].Properties["Policies"].([]any)
		doc := mapOf(mapOf(pols[0])["PolicyDocument"])
		doc["Statement"] = append(doc["Statement"].([]any), st)
		return p
	}
}

func invariant(t *testing.T, name string) Invariant {
	t.Helper()
	for _, inv := range Invariants {
		if inv.Name == name {
			return inv
		}
	}
	t.Fatalf("no invariant %s", name)
	return Invariant{}
}

func allowed(t *testing.T, tpl *Template, name string) []int {
	t.Helper()
	vals, _ := tpl.Parameters[name]["AllowedValues"].([]any)
	if len(vals) == 0 {
		t.Fatalf("parameter %s has no AllowedValues", name)
	}
	var out []int
	for _, v := range vals {
		s, _ := Scalar(v)
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("%s AllowedValue %v: %v", name, v, err)
		}
		out = append(out, n)
	}
	return out
}

func violated(t *testing.T, tpl *Template, p Values, rule string) bool {
	t.Helper()
	vs, err := tpl.CheckRules(p)
	if err != nil {
		t.Fatalf("CheckRules: %v", err)
	}
	return slices.ContainsFunc(vs, func(v RuleViolation) bool { return v.Rule == rule })
}

// TestRulesMatchArithmetic proves that the deploy-time Rules, over every
// combination of the parameters' AllowedValues, reject exactly the
// combinations that break the arithmetic invariant they stand for.
func TestRulesMatchArithmetic(t *testing.T) {
	t.Parallel()
	tpl, p := setup(t)
	t.Run("VisibilityCoversSenderTimeout", func(t *testing.T) {
		t.Parallel()
		for _, s := range allowed(t, tpl, "SenderTimeoutSeconds") {
			for _, v := range allowed(t, tpl, "QueueVisibilityTimeoutSeconds") {
				q := p.With("SenderTimeoutSeconds", strconv.Itoa(s)).With("QueueVisibilityTimeoutSeconds", strconv.Itoa(v))
				holds := v >= VisibilityFactor*s
				if got := !violated(t, tpl, q, "VisibilityCoversSenderTimeout"); got != holds {
					t.Errorf("sender %ds, visibility %ds: rules accept = %v, want %v", s, v, got, holds)
				}
			}
		}
	})
	t.Run("ClaimOutlivesProviderCall", func(t *testing.T) {
		t.Parallel()
		for _, pt := range allowed(t, tpl, "ProviderTimeoutSeconds") {
			for _, c := range allowed(t, tpl, "ClaimTimeoutSeconds") {
				q := p.With("ProviderTimeoutSeconds", strconv.Itoa(pt)).With("ClaimTimeoutSeconds", strconv.Itoa(c))
				holds := time.Duration(c)*time.Second >= decide.TakeOverBudget(time.Duration(pt)*time.Second)
				if got := !violated(t, tpl, q, "ClaimOutlivesProviderCall"); got != holds {
					t.Errorf("provider %ds, claim %ds: rules accept = %v, want %v", pt, c, got, holds)
				}
				if err := checkClaim(tpl, q); (err == nil) != holds {
					t.Errorf("provider %ds, claim %ds: checkClaim = %v, want holds=%v", pt, c, err, holds)
				}
			}
		}
	})
}

func TestRulesRejectBadConfiguration(t *testing.T) {
	t.Parallel()
	tpl, p := setup(t)
	tests := []struct {
		name string
		set  map[string]string
		rule string // "" when the rules must accept
	}{
		{"KmsKeyWithGlobalTable", map[string]string{"KmsKeyArn": "arn:aws:kms:us-east-1:123456789012:key/abc", "LedgerMode": "global-strong", "GlobalReplicaRegion": "us-east-2", "GlobalThirdRegion": "us-west-2"}, "CustomerKeyOnlyForSingleRegion"},
		{"KmsKeySingleRegion", map[string]string{"KmsKeyArn": "arn:aws:kms:us-east-1:123456789012:key/abc"}, ""},
		{"GlobalWithoutRegions", map[string]string{"LedgerMode": "global-strong"}, "GlobalTableRegions"},
		{"GlobalSameRegionTwice", map[string]string{"LedgerMode": "global-strong", "GlobalReplicaRegion": "us-east-2", "GlobalThirdRegion": "us-east-2"}, "GlobalTableRegions"},
		{"GlobalOK", map[string]string{"LedgerMode": "global-strong", "GlobalReplicaRegion": "us-east-2", "GlobalThirdRegion": "us-west-2"}, ""},
		{"ExistingWithoutName", map[string]string{"LedgerMode": "existing"}, "ExistingTableNamed"},
		{"HttpWithoutURL", map[string]string{"EmailProvider": "http"}, "HttpProviderConfigured"},
		{"TwilioWithoutSid", map[string]string{"SmsProvider": "twilio", "TwilioAuthTokenParam": "/t", "TwilioFrom": "+1"}, "TwilioConfigured"},
		{"SmtpWithoutHost", map[string]string{"EmailProvider": "smtp", "SmtpFrom": "a@b"}, "SmtpConfigured"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q := p
			for k, v := range tc.set {
				q = q.With(k, v)
			}
			vs, err := tpl.CheckRules(q)
			if err != nil {
				t.Fatalf("CheckRules: %v", err)
			}
			if tc.rule == "" {
				if len(vs) != 0 {
					t.Errorf("got violations %v, want none", vs)
				}
				return
			}
			if !slices.ContainsFunc(vs, func(v RuleViolation) bool { return v.Rule == tc.rule }) {
				t.Errorf("got violations %v, want one of rule %s", vs, tc.rule)
			}
		})
	}
}

// TestConditionsSelectTable checks that each LedgerMode creates exactly the
// table it promises and that every function is told the same table name.
func TestConditionsSelectTable(t *testing.T) {
	t.Parallel()
	tpl, p := setup(t)
	tests := []struct {
		mode, table string
		single      bool
		global      bool
	}{
		{"single-region", "", true, false},
		{"global-strong", "", false, true},
		{"existing", "shared-ledger", false, false},
	}
	for _, tc := range tests {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			q := p.With("LedgerMode", tc.mode).With("TableName", tc.table)
			for res, want := range map[string]bool{"LedgerTable": tc.single, "GlobalLedgerTable": tc.global} {
				got, err := tpl.Condition(tpl.Resources[res].Condition, q)
				if err != nil {
					t.Fatalf("%s condition: %v", res, err)
				}
				if got != want {
					t.Errorf("%s created = %v, want %v", res, got, want)
				}
			}
			wantName := tc.table
			if wantName == "" {
				wantName = "sendonce-ledger"
			}
			for _, fn := range tpl.functionNames() {
				v, ok := tpl.env(tpl.Resources[fn], "SENDONCE_TABLE")
				if !ok {
					t.Fatalf("%s: no SENDONCE_TABLE", fn)
				}
				got, err := tpl.Eval(v, q)
				if err != nil {
					t.Fatalf("%s: SENDONCE_TABLE: %v", fn, err)
				}
				if got != wantName {
					t.Errorf("%s: SENDONCE_TABLE = %v, want %s", fn, got, wantName)
				}
			}
		})
	}
}

// TestDefaultMaxAgeDerivation: the reconciler's default maximum age
// (decide.DefaultMaxAge, SENDONCE_MAX_AGE) is the longest time SQS may
// still hand a message to a sender with the template's defaults (queue
// retention, then DLQ retention before a redrive), and the ledger retention
// outlives it by the reconcile horizon, so a late redrive finds the final
// row rather than none.
func TestDefaultMaxAgeDerivation(t *testing.T) {
	t.Parallel()
	_, p := setup(t)
	seconds := func(name string, unit time.Duration) time.Duration {
		t.Helper()
		n, err := strconv.Atoi(p[name])
		if err != nil {
			t.Fatalf("parameter %s = %q: %v", name, p[name], err)
		}
		return time.Duration(n) * unit
	}
	queue, dlq := seconds("QueueRetentionSeconds", time.Second), seconds("DLQRetentionSeconds", time.Second)
	if got, want := decide.DefaultMaxAge, queue+dlq; got != want {
		t.Errorf("decide.DefaultMaxAge = %s, want queue retention %s + DLQ retention %s = %s", got, queue, dlq, want)
	}
	retention, horizon := seconds("RetentionHours", time.Hour), ReconcileHorizon
	if decide.DefaultMaxAge+horizon > retention {
		t.Errorf("decide.DefaultMaxAge %s + horizon %s > ledger retention %s", decide.DefaultMaxAge, horizon, retention)
	}
}
