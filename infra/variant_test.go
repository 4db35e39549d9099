package infra

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestVariantTemplates: template.yaml is QuickStart and template.sar.yaml
// ServerlessRepo made from template.full.yaml (make template rewrites them
// after a change).
func TestVariantTemplates(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile(templatePath)
	if err != nil {
		t.Fatal(err)
	}
	for path, v := range variants {
		want, err := v.Generate(src)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if *update {
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("%s is not what infra makes of %s: run make template (edit %s, not %s)", path, templatePath, templatePath, path)
		}
	}
}

// TestQuickStartDecides: what a variant (template.yaml, template.sar.yaml)
// fixes is decided in it: it asks for the kept parameters only, at most
// eight, keeps the Rules that still depend on them, and holds no resource
// of a choice it cannot make (the global table of LedgerMode
// global-strong).
func TestQuickStartDecides(t *testing.T) {
	t.Parallel()
	full, _ := setup(t)
	for path, v := range variants {
		quick, _ := load(t, path)
		var kept []string
		for _, k := range v.Keep {
			kept = append(kept, k.Name)
		}
		got := make([]string, 0, len(quick.Parameters))
		for name := range quick.Parameters {
			got = append(got, name)
		}
		slices.Sort(got)
		slices.Sort(kept)
		if !slices.Equal(got, kept) {
			t.Errorf("%s: parameters %v, want %v", path, got, kept)
		}
		if len(got) > 8 {
			t.Errorf("%s: %d parameters: a first deployment answers at most 8 questions", path, len(got))
		}
		if _, ok := quick.Resources["GlobalLedgerTable"]; ok {
			t.Errorf("%s declares the global table", path)
		}
		for _, rule := range []string{"SesConfigured", "AlarmEmailOnOwnTopic", "AlarmDestination"} {
			if quick.Rules[rule] == nil {
				t.Errorf("%s lost Rule %s", path, rule)
			}
		}
		// Every resource of a variant is one of template.full.yaml's.
		for name, r := range quick.Resources {
			if f := full.Resources[name]; f == nil || f["Type"] != r["Type"] {
				t.Errorf("%s: resource %s (%v) is not template.full.yaml's", path, name, r["Type"])
			}
		}
	}
}

// TestVariantRefusesWhatItCannotDeploy: keeping a value of a parameter
// whose settings the variant fixes (SMS through Twilio, without its
// account) is an error naming the Rule, not a template CloudFormation
// would refuse.
func TestVariantRefusesWhatItCannotDeploy(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile(templatePath)
	if err != nil {
		t.Fatal(err)
	}
	v := QuickStart
	v.Keep = slices.Clone(v.Keep)
	for i, k := range v.Keep {
		if k.Name == "SmsProvider" {
			v.Keep[i].Values = []string{"sns", "twilio"}
		}
	}
	if _, err := v.Generate(src); err == nil || !strings.Contains(err.Error(), "TwilioConfigured") {
		t.Errorf("Generate = %v, want an error naming TwilioConfigured", err)
	}
	v.Keep = append(slices.Clone(QuickStart.Keep), Kept{Name: "NoSuchParameter"})
	if _, err := v.Generate(src); err == nil {
		t.Error("Generate keeps a parameter that does not exist")
	}
}

// TestQuickStartRules: template.yaml's Rules still reject its bad
// combinations.
func TestQuickStartRules(t *testing.T) {
	t.Parallel()
	tpl, p := load(t, quickPath)
	for _, tc := range []struct {
		name string
		set  map[string]string
		rule string
	}{
		{"Defaults", nil, ""},
		{"SesWithoutFrom", map[string]string{"EmailProvider": "ses"}, "SesConfigured"},
		{"Ses", map[string]string{"EmailProvider": "ses", "SesFrom": "notify@shop.example"}, ""},
		{"AlarmEmailWithOwnTopic", map[string]string{"AlarmEmail": "a@b.example", "AlarmTopicArn": "arn:aws:sns:us-east-1:123456789012:t"}, "AlarmEmailOnOwnTopic"},
		{"AlarmsReachNobody", map[string]string{"AlarmEmail": ""}, "AlarmDestination"},
		{"OwnAlarmTopic", map[string]string{"AlarmEmail": "", "AlarmTopicArn": "arn:aws:sns:us-east-1:123456789012:t"}, ""},
	} {
		q := p
		for k, v := range tc.set {
			q = q.With(k, v)
		}
		vs, err := tpl.Violations(q)
		if err != nil {
			t.Fatal(err)
		}
		want := slices.DeleteFunc([]string{tc.rule}, func(s string) bool { return s == "" })
		if !slices.Equal(vs, want) {
			t.Errorf("%s: rules reject %v, want %v", tc.name, vs, want)
		}
	}
}

// TestVariantDecidesRoutes: a variant decides what its kept values
// decide about a parameter tested against lists (template.full.yaml's
// routes): an Fn::Or of Fn::Equals of one kept parameter is decided when
// its values are all in the union or none is, what stays undecided keeps
// only the values the parameter may take (an Fn::Contains of one becomes
// an Fn::Equals), an enumerated AllowedPattern becomes the kept
// AllowedValues, and the generated blocks' marker lines are gone.
func TestVariantDecidesRoutes(t *testing.T) {
	t.Parallel()
	src := []byte(`Parameters:
  P:
    Type: String
    Default: a
    # BEGIN generated P routes by ` + "`make template`" + `; do not edit by hand.
    AllowedPattern: ^(a|b|a,b|b,a)?$
    ConstraintDescription: a route
    # END generated P routes
  S:
    Type: String
    Default: ""
Rules:
  # BEGIN generated rules by ` + "`make template`" + `
  NeedsS:
    RuleCondition: !Contains [["a", "a,b", "b,a"], !Ref P]
    Assertions:
      - Assert: !Not [!Equals [!Ref S, ""]]
        AssertDescription: a needs S.
  # END generated rules
Conditions:
  # BEGIN generated conditions by ` + "`make template`" + `
  ViaA: !Or [!Equals [!Ref P, "a"], !Or [!Equals [!Ref P, "a,b"], !Equals [!Ref P, "b,a"]]]
  Any: !Or [!Equals [!Ref P, ""], !Equals [!Ref P, "a"], !Equals [!Ref P, "b,a"]]
  ViaB: !Or [!Equals [!Ref P, "b"], !Equals [!Ref P, "a,b"], !Equals [!Ref P, "b,a"]]
  # END generated conditions
Resources:
  A:
    Type: AWS::SNS::Topic
    Condition: ViaA
  Always:
    Type: AWS::SNS::Topic
    Condition: Any
  B:
    Type: AWS::SNS::Topic
    Condition: ViaB
`)
	v := Variant{Keep: []Kept{{Name: "P", Values: []string{"a", ""}}, {Name: "S"}}}
	out, err := v.Generate(src)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Parse(out)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "generated") {
		t.Errorf("marker lines are left:\n%s", out)
	}
	p := got.Parameters["P"]
	if _, ok := p["AllowedPattern"]; ok || fmt.Sprint(p["AllowedValues"]) != "[a ]" || p["ConstraintDescription"] != nil {
		t.Errorf("P is %v, want AllowedValues [a, \"\"] and no pattern", p)
	}
	if c := fmt.Sprint(got.Conditions["ViaA"]); c != "map[Fn::Equals:[map[Ref:P] a]]" {
		t.Errorf("ViaA is %s, want P equal to a", c)
	}
	if rc := fmt.Sprint(got.Rules["NeedsS"]["RuleCondition"]); rc != "map[Fn::Equals:[map[Ref:P] a]]" {
		t.Errorf("NeedsS's condition is %s, want P equal to a", rc)
	}
	if _, ok := got.Resources["B"]; ok {
		t.Error("B, whose condition no kept value meets, is declared")
	}
	if a, ok := got.Resources["Always"]; !ok || a["Condition"] != nil {
		t.Errorf("Always, whose condition every kept value meets, is %v", a)
	}
	if _, ok := got.Conditions["Any"]; ok {
		t.Error("the decided condition Any is left")
	}
}
