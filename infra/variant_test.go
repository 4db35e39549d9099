package infra

import (
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
		for _, rule := range []string{"SesConfigured", "AlarmEmailOnOwnTopic"} {
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
