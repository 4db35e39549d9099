package infra

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// TestQuickStartTemplate: template.yaml is QuickStart made from
// template.full.yaml (make template, or go test ./infra -run
// TestQuickStartTemplate -update, rewrites it after a change).
func TestQuickStartTemplate(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile(templatePath)
	if err != nil {
		t.Fatal(err)
	}
	want, err := QuickStart.Generate(src)
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(quickPath, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(quickPath)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("%s is not what QuickStart makes of %s: run make template (edit %s, not %s)", quickPath, templatePath, templatePath, quickPath)
	}
}

// TestQuickStartDecides: what template.yaml fixes is decided in it: it
// asks for the kept parameters only, keeps the conditions and Rules that
// still depend on them, and holds no resource of a choice it cannot make
// (the global table of LedgerMode global-strong).
func TestQuickStartDecides(t *testing.T) {
	t.Parallel()
	quick, _ := load(t, quickPath)
	full, _ := setup(t)
	var kept []string
	for _, k := range QuickStart.Keep {
		kept = append(kept, k.Name)
	}
	got := make([]string, 0, len(quick.Parameters))
	for name := range quick.Parameters {
		got = append(got, name)
	}
	slices.Sort(got)
	slices.Sort(kept)
	if !slices.Equal(got, kept) {
		t.Errorf("parameters %v, want %v", got, kept)
	}
	if len(got) > 8 {
		t.Errorf("%d parameters: a first deployment answers at most 8 questions", len(got))
	}
	if _, ok := quick.Resources["GlobalLedgerTable"]; ok {
		t.Error("template.yaml declares the global table")
	}
	for _, rule := range []string{"SesConfigured", "AlarmEmailOnOwnTopic"} {
		if quick.Rules[rule] == nil {
			t.Errorf("template.yaml lost Rule %s", rule)
		}
	}
	// Every resource of template.yaml is one of template.full.yaml's.
	for name, r := range quick.Resources {
		if f := full.Resources[name]; f == nil || f["Type"] != r["Type"] {
			t.Errorf("resource %s (%v) is not template.full.yaml's", name, r["Type"])
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
