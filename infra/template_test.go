package infra

import (
	"errors"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/decide"
	"go.yaml.in/yaml/v3"
)

// templatePath is the template every setting is a parameter of (the
// invariants' and Rules' tests read it); quickPath is the one made from it
// with most of them fixed (QuickStart).
const (
	templatePath = "../template.full.yaml"
	quickPath    = "../template.yaml"
	sarPath      = "../template.sar.yaml"
)

// variants are the templates made from template.full.yaml, by path.
var variants = map[string]Variant{quickPath: QuickStart, sarPath: ServerlessRepo}

// setup loads a fresh copy of template.full.yaml (tests may mutate it) and
// its default parameter values.
func setup(t *testing.T) (*Template, Values) {
	t.Helper()
	return load(t, templatePath)
}

// load loads a fresh copy of the template at path and the values of a
// deployment that gives only what it must (Deployable).
func load(t *testing.T, path string) (*Template, Values) {
	t.Helper()
	tpl, err := Load(path)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return tpl, tpl.Deployable()
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

func TestParseShortForms(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, yaml string
		want       any
	}{
		{"Ref", "!Ref Param", map[string]any{"Ref": "Param"}},
		{"GetAttDotted", "!GetAtt Fn.Url.FunctionUrl", map[string]any{"Fn::GetAtt": []any{"Fn", "Url.FunctionUrl"}}},
		{"GetAttList", "!GetAtt [Queue, Arn]", map[string]any{"Fn::GetAtt": []any{"Queue", "Arn"}}},
		{"SubList", `!Sub ["${X}", {X: !Ref A}]`, map[string]any{"Fn::Sub": []any{"${X}", map[string]any{"X": map[string]any{"Ref": "A"}}}}},
		{"NestedIfEquals", "!If [C, !Equals [a, !Ref B], 3]", map[string]any{"Fn::If": []any{"C", map[string]any{"Fn::Equals": []any{"a", map[string]any{"Ref": "B"}}}, 3}}},
		{"Condition", "!Condition C", map[string]any{"Condition": "C"}},
		{"QuotedStaysString", `!Sub "5"`, map[string]any{"Fn::Sub": "5"}},
		{"PlainScalars", `[1, "1", true, x]`, []any{1, "1", true, "x"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tpl, err := Parse([]byte("Conditions:\n  v: " + tc.yaml))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if got := tpl.Conditions["v"]; !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %#v, want %#v", got, tc.want)
			}
		})
	}
}

// FuzzParse: Parse's long form is a fixed point (parsing its YAML again
// gives the same template), and no check panics or returns an
// unclassified error on whatever parses.
func FuzzParse(f *testing.F) {
	f.Add([]byte("Resources: {Q: {Type: AWS::SQS::Queue, Properties: {VisibilityTimeout: !Ref V}}}"))
	f.Add([]byte("Parameters: {V: {Type: Number, Default: 3}}\nRules: {R: {Assertions: [{Assert: !Equals [!Ref V, 3]}]}}"))
	f.Add([]byte("Conditions: {C: !Not [!Condition C]}\nRules: {R: {RuleCondition: !Condition C, Assertions: []}}"))
	f.Add([]byte("Resources: {SenderFunction: {Type: AWS::Serverless::Function, Properties: {Role: !GetAtt R.Arn, Events: {E: {Type: SQS, Properties: {Queue: !GetAtt Q.Arn}}}}}, Q: {Type: AWS::SQS::Queue}}"))
	// A property set to AWS::NoValue where a duration is wanted.
	f.Add([]byte("Resources: {SenderFunction: {Type: AWS::Serverless::Function, Properties: {Environment: {Variables: {SENDONCE_CLAIM_TIMEOUT: !Ref AWS::NoValue, SENDONCE_PROVIDER_TIMEOUT: 5s}}}}}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		tpl, err := Parse(data)
		if err != nil {
			return
		}
		again, err := yaml.Marshal(tpl)
		if err != nil {
			t.Fatalf("Marshal: %v", err)
		}
		tpl2, err := Parse(again)
		if err != nil {
			t.Fatalf("Parse of its own long form: %v\n%s", err, again)
		}
		if twice, _ := yaml.Marshal(tpl2); string(twice) != string(again) {
			t.Fatalf("long form is not a fixed point:\n%s\nthen\n%s", again, twice)
		}
		classified := func(err error) bool {
			return err == nil || errors.Is(err, ErrInvariant) || errors.Is(err, ErrUnresolved)
		}
		for _, inv := range Invariants {
			if err := inv.Check(tpl.Defaults()); !classified(err) {
				t.Fatalf("%s: unclassified error %v", inv.Name, err)
			}
		}
		if _, err := tpl.Violations(tpl.Defaults()); !classified(err) {
			t.Fatalf("Violations: unclassified error %v", err)
		}
		if err := tpl.CheckTableSchema(); !classified(err) {
			t.Fatalf("CheckTableSchema: unclassified error %v", err)
		}
	})
}

// TestInvariantsAtExtremes checks each invariant at every combination of
// its parameters' extremes that the template's Rules accept: an invariant
// enforced at deploy time must hold at all of them. For the others the
// test records what a deployer can still choose (the template's comment
// and docs/deploy.md say so) and fails once the template closes the gap,
// so DeployTime is set and the invariant stays enforced.
func TestInvariantsAtExtremes(t *testing.T) {
	t.Parallel()
	tpl, p := setup(t)
	for _, inv := range Invariants {
		t.Run(inv.Name, func(t *testing.T) {
			t.Parallel()
			if err := inv.Check(p); err != nil {
				t.Fatalf("defaults: %v (%s)", err, inv.Why)
			}
			bad, err := tpl.Counterexamples(inv)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case inv.DeployTime && len(bad) > 0:
				t.Errorf("the template accepts %d combinations that break it (%s), e.g. %v", len(bad), inv.Why, inv.Check(bad[0]))
			case !inv.DeployTime && len(bad) == 0:
				t.Errorf("no accepted combination breaks it any more: set DeployTime")
			case !inv.DeployTime:
				t.Logf("not enforced at deploy time: %d accepted combinations break it, e.g. %v", len(bad), inv.Check(bad[0]))
			}
		})
	}
}

// TestRulesMatchArithmetic: for each invariant enforced at deploy time,
// its Rule (named as the invariant) accepts a combination of its
// parameters' extremes exactly when the arithmetic holds (none rejected
// that would work), among the combinations the other Rules accept.
func TestRulesMatchArithmetic(t *testing.T) {
	t.Parallel()
	tpl, p := setup(t)
	for _, inv := range Invariants {
		if !inv.DeployTime {
			continue
		}
		t.Run(inv.Name, func(t *testing.T) {
			t.Parallel()
			if err := inv.Check(p); err != nil {
				t.Fatal(err)
			}
			for _, q := range tpl.combinations(inv.Params) {
				vs, err := tpl.Violations(q)
				if err != nil {
					t.Fatal(err)
				}
				own := slices.Contains(vs, inv.Name)
				if len(vs) > 0 && !own {
					continue // another Rule rejects it
				}
				if holds := inv.Check(q) == nil; holds == own {
					t.Errorf("%v: holds = %v, but rules reject %v", q, holds, vs)
				}
			}
		})
	}
}

// TestInvariantsCatchBreakage breaks each invariant through parameter
// values and checks that it is reported, so no check passes vacuously.
// (That each parameter sets its property, and the reconciler's maximum age
// is the default, is cfn-lint rule E9110's, with its own negative tests.)
func TestInvariantsCatchBreakage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		invariant, name string
		set             []string // parameter, value, ...
	}{
		{"VisibilityCoversSenderTimeout", "VisibilityBelow6xTimeout", []string{"QueueVisibilityTimeoutSeconds", "179"}},
		{"VisibilityCoversSenderTimeout", "SenderTimeoutRaised", []string{"SenderTimeoutSeconds", "60"}},
		{"VisibilityCoversBatchingWindow", "BatchingWindowAddsUp", []string{"MaximumBatchingWindowInSeconds", "1"}},
		{"ClaimOutlivesProviderCall", "ClaimWithinMargin", []string{"ClaimTimeoutSeconds", "14"}},
		{"ClaimOutlivesProviderCall", "ProviderRaised", []string{"ProviderTimeoutSeconds", "30"}},
		{"RedeliveryOutlivesClaim", "LongClaim", []string{"MaxReceiveCount", "3", "ClaimTimeoutSeconds", "600"}},
		{"RedeliveryOutlivesClaim", "BatchingWindow", []string{"MaxReceiveCount", "2", "QueueVisibilityTimeoutSeconds", "360", "MaximumBatchingWindowInSeconds", "300"}},
		{"RedeliveryOutlivesClaim", "TwoReceives", []string{"MaxReceiveCount", "2", "ClaimTimeoutSeconds", "300"}},
		{"LedgerOutlivesMessages", "ShortRetention", []string{"RetentionHours", "455"}},
		{"LedgerOutlivesMessages", "LongQueueRetention", []string{"QueueRetentionSeconds", "1209600", "RetentionHours", "690"}},
		{"DLQOutlivesQueue", "ShortDLQ", []string{"DLQRetentionSeconds", "60"}},
		{"MaxAgeCoversRedelivery", "LongQueueRetention", []string{"QueueRetentionSeconds", "1209600"}},
		{"RetentionOutlivesMaxAge", "ShortRetention", []string{"RetentionHours", "455"}},
	}
	for _, tc := range tests {
		t.Run(tc.invariant+"/"+tc.name, func(t *testing.T) {
			t.Parallel()
			_, p := setup(t)
			inv := invariant(t, tc.invariant)
			if err := inv.Check(p); err != nil {
				t.Fatalf("before breaking: %v", err)
			}
			for i := 0; i < len(tc.set); i += 2 {
				p = p.With(tc.set[i], tc.set[i+1])
			}
			if err := inv.Check(p); !errors.Is(err, ErrInvariant) {
				t.Errorf("after breaking: error = %v, want ErrInvariant", err)
			}
		})
	}
}

// TestCheckUnresolved: an invariant whose parameter has no integer value
// is reported as unreadable, not as holding or broken.
func TestCheckUnresolved(t *testing.T) {
	t.Parallel()
	_, p := setup(t)
	for _, inv := range Invariants {
		if err := inv.Check(p.With(inv.Params[0], "")); !errors.Is(err, ErrUnresolved) {
			t.Errorf("%s with %s empty: error = %v, want ErrUnresolved", inv.Name, inv.Params[0], err)
		}
	}
}

// TestExtremesCatchLooseRules: an invariant enforced at deploy time gets
// counterexamples as soon as a Rule assertion is dropped or a parameter's
// range is widened.
func TestExtremesCatchLooseRules(t *testing.T) {
	t.Parallel()
	tests := []struct {
		invariant, name string
		breakIt         func(*Template)
	}{
		{"VisibilityCoversSenderTimeout", "AssertionDropped", func(tpl *Template) {
			r := tpl.Rules["VisibilityCoversSenderTimeout"]
			r["Assertions"] = r["Assertions"].([]any)[1:]
		}},
		{"VisibilityCoversSenderTimeout", "RangeWidened", func(tpl *Template) {
			p := tpl.Parameters["QueueVisibilityTimeoutSeconds"]
			p["AllowedValues"] = append(p["AllowedValues"].([]any), 60)
		}},
		{"ClaimOutlivesProviderCall", "AssertionDropped", func(tpl *Template) {
			delete(tpl.Rules, "ClaimOutlivesProviderCall")
		}},
		{"ClaimOutlivesProviderCall", "RangeWidened", func(tpl *Template) {
			p := tpl.Parameters["ClaimTimeoutSeconds"]
			p["AllowedValues"] = append(p["AllowedValues"].([]any), 10)
		}},
		{"RedeliveryOutlivesClaim", "AssertionDropped", func(tpl *Template) {
			r := tpl.Rules["RedeliveryOutlivesClaim"]
			r["Assertions"] = r["Assertions"].([]any)[1:]
		}},
		{"RedeliveryOutlivesClaim", "ClaimWidened", func(tpl *Template) {
			p := tpl.Parameters["ClaimTimeoutSeconds"]
			p["AllowedValues"] = append(p["AllowedValues"].([]any), 900)
		}},
		{"RedeliveryOutlivesClaim", "ReceivesLowered", func(tpl *Template) {
			tpl.Parameters["MaxReceiveCount"]["MinValue"] = 1
		}},
	}
	for _, tc := range tests {
		t.Run(tc.invariant+"/"+tc.name, func(t *testing.T) {
			t.Parallel()
			tpl, _ := setup(t)
			tc.breakIt(tpl)
			if bad, err := tpl.Counterexamples(invariant(t, tc.invariant)); err != nil || len(bad) == 0 {
				t.Errorf("Counterexamples = %d, %v; want some", len(bad), err)
			}
		})
	}
}

func TestRulesRejectBadConfiguration(t *testing.T) {
	t.Parallel()
	tpl, p := setup(t)
	tests := []struct {
		name  string
		set   map[string]string
		rules string // the Rules that reject, space-separated; "" when the rules must accept
	}{
		{"Defaults", nil, ""},
		{"KmsKeyWithGlobalTable", map[string]string{"KmsKeyArn": "arn:aws:kms:us-east-1:123456789012:key/abc", "LedgerMode": "global-strong", "GlobalReplicaRegion": "us-east-2", "GlobalThirdRegion": "us-west-2"}, "CustomerKeyOnlyForSingleRegion"},
		{"KmsKeySingleRegion", map[string]string{"KmsKeyArn": "arn:aws:kms:us-east-1:123456789012:key/abc"}, ""},
		{"GlobalWithoutRegions", map[string]string{"LedgerMode": "global-strong"}, "GlobalTableRegions"},
		{"GlobalSameRegionTwice", map[string]string{"LedgerMode": "global-strong", "GlobalReplicaRegion": "us-east-2", "GlobalThirdRegion": "us-east-2"}, "GlobalTableRegions"},
		{"GlobalOK", map[string]string{"LedgerMode": "global-strong", "GlobalReplicaRegion": "us-east-2", "GlobalThirdRegion": "us-west-2"}, ""},
		{"ExistingWithoutName", map[string]string{"LedgerMode": "existing"}, "ExistingTableNamed"},
		{"HttpWithoutURLOrToken", map[string]string{"EmailProvider": "http"}, "EmailHttpConfigured HttpProviderConfigured"},
		{"HttpWithoutToken", map[string]string{"SmsProvider": "sns,http", "HttpProviderUrl": "https://gw.example"}, "HttpProviderConfigured"},
		{"HttpURLOfAnotherChannel", map[string]string{"SmsProvider": "http", "HttpProviderUrlEmail": "https://gw.example", "HttpProviderTokenParam": "/t"}, "SmsHttpConfigured"},
		{"HttpURLOfItsOwn", map[string]string{"EmailProvider": "http,ses", "SesFrom": "a@b.example", "HttpProviderUrlEmail": "https://gw.example", "HttpProviderTokenParam": "/t"}, ""},
		{"TwilioWithoutSid", map[string]string{"SmsProvider": "twilio", "TwilioAuthTokenParam": "/t", "TwilioFrom": "+1"}, "TwilioConfigured"},
		{"TwilioSecondInRoute", map[string]string{"SmsProvider": "sns,twilio"}, "TwilioConfigured"},
		{"TwilioFirstInRoute", map[string]string{"SmsProvider": "twilio,sns", "TwilioAccountSid": "AC0123456789abcdef0123456789abcdef", "TwilioAuthTokenParam": "/t", "TwilioFrom": "+1"}, ""},
		{"SmtpWithoutHost", map[string]string{"EmailProvider": "smtp", "SmtpFrom": "a@b"}, "SmtpConfigured"},
		{"SmtpUserWithoutPassword", map[string]string{"EmailProvider": "ses,smtp", "SesFrom": "a@b.example", "SmtpHost": "h", "SmtpFrom": "a@b.example", "SmtpUsername": "u"}, "SmtpConfigured"},
		{"SesWithoutFrom", map[string]string{"EmailProvider": "ses"}, "SesConfigured"},
		{"SesSecondInRoute", map[string]string{"EmailProvider": "smtp,ses", "SmtpHost": "h", "SmtpFrom": "a@b.example"}, "SesConfigured"},
		{"LambdaWithoutArn", map[string]string{"PushProvider": "lambda,sns"}, "PushLambdaConfigured"},
		{"LambdaArnOfAnotherChannel", map[string]string{"PushProvider": "lambda", "SmsLambdaArn": "arn:aws:lambda:us-east-1:123456789012:function:f"}, "PushLambdaConfigured"},
		{"Lambda", map[string]string{"SmsProvider": "lambda,sns", "SmsLambdaArn": "arn:aws:lambda:us-east-1:123456789012:function:f:live"}, ""},
		{"AlarmEmailWithOwnTopic", map[string]string{"AlarmEmail": "oncall@example.com", "AlarmTopicArn": "arn:aws:sns:us-east-1:123456789012:pager"}, "AlarmEmailOnOwnTopic"},
		{"AlarmEmail", map[string]string{"AlarmEmail": "oncall@example.com"}, ""},
		{"AlarmsReachNobody", map[string]string{"AlarmEmail": ""}, "AlarmDestination"},
		{"OwnAlarmTopic", map[string]string{"AlarmEmail": "", "AlarmTopicArn": "arn:aws:sns:us-east-1:123456789012:pager"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q := p
			for k, v := range tc.set {
				q = q.With(k, v)
			}
			vs, err := tpl.Violations(q)
			if err != nil {
				t.Fatalf("Violations: %v", err)
			}
			if want := strings.Fields(tc.rules); !slices.Equal(vs, want) {
				t.Errorf("rules reject %v, want %v", vs, want)
			}
		})
	}
}

// TestDefaultMaxAgeDerivation: the reconciler's default maximum age
// (decide.DefaultMaxAge) is the longest time SQS may still hand a message
// to a sender with the template's defaults: queue retention, then DLQ
// retention before a redrive.
func TestDefaultMaxAgeDerivation(t *testing.T) {
	t.Parallel()
	_, p := setup(t)
	var sum time.Duration
	for _, name := range []string{"QueueRetentionSeconds", "DLQRetentionSeconds"} {
		n, err := strconv.Atoi(p[name])
		if err != nil {
			t.Fatalf("parameter %s = %q: %v", name, p[name], err)
		}
		sum += time.Duration(n) * time.Second
	}
	if decide.DefaultMaxAge != sum {
		t.Errorf("decide.DefaultMaxAge = %s, want queue + DLQ retention = %s", decide.DefaultMaxAge, sum)
	}
}

func TestTableSchema(t *testing.T) {
	t.Parallel()
	for _, path := range []string{templatePath, quickPath, sarPath} {
		tpl, _ := load(t, path)
		if err := tpl.CheckTableSchema(); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	table := func(tpl *Template, name string) map[string]any { return mapOf(tpl.Resources[name]["Properties"]) }
	for name, breakIt := range map[string]func(*Template){
		"WrongTTLAttribute": func(tpl *Template) {
			mapOf(table(tpl, "LedgerTable")["TimeToLiveSpecification"])["AttributeName"] = "ttl"
		},
		"GlobalTableProjection": func(tpl *Template) {
			gsi := mapOf(table(tpl, "GlobalLedgerTable")["GlobalSecondaryIndexes"].([]any)[0])
			gsi["Projection"] = map[string]any{"ProjectionType": "KEYS_ONLY"}
		},
		"ExtraAttribute": func(tpl *Template) {
			p := table(tpl, "LedgerTable")
			p["AttributeDefinitions"] = append(p["AttributeDefinitions"].([]any), map[string]any{"AttributeName": "x", "AttributeType": "S"})
		},
		"SortKeyAdded": func(tpl *Template) {
			p := table(tpl, "LedgerTable")
			p["KeySchema"] = append(p["KeySchema"].([]any), map[string]any{"AttributeName": "attn_sk", "KeyType": "RANGE"})
		},
		"LocalIndex": func(tpl *Template) {
			table(tpl, "GlobalLedgerTable")["LocalSecondaryIndexes"] = []any{}
		},
		"Provisioned": func(tpl *Template) { table(tpl, "LedgerTable")["BillingMode"] = "PROVISIONED" },
		"UnconditionalEventAttribute": func(tpl *Template) {
			p := table(tpl, "LedgerTable")
			defs := p["AttributeDefinitions"].([]any)
			for i, d := range defs {
				if args, ok := mapOf(d)["Fn::If"].([]any); ok {
					defs[i] = args[1] // evt_pk defined whether or not the index exists
				}
			}
		},
		"UnconditionalEventIndex": func(tpl *Template) {
			p := table(tpl, "GlobalLedgerTable")
			gsis := p["GlobalSecondaryIndexes"].([]any)
			for i, g := range gsis {
				if args, ok := mapOf(g)["Fn::If"].([]any); ok {
					gsis[i] = args[1]
				}
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tpl, _ := setup(t)
			breakIt(tpl)
			if err := tpl.CheckTableSchema(); !errors.Is(err, ErrInvariant) {
				t.Errorf("error = %v, want ErrInvariant", err)
			}
		})
	}
}
