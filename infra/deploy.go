package infra

import (
	"slices"
	"strings"
)

// checkParameters: `sam deploy --guided` and the CloudFormation console
// ask for every parameter, so each one says what it is, is constrained
// (a free string takes a pattern or a list of values), and sits in
// exactly one AWS::CloudFormation::Interface group with a label.
func checkParameters(t *Template, _ Values) error {
	iface := mapOf(t.Metadata["AWS::CloudFormation::Interface"])
	group := map[string]string{}
	groups, _ := iface["ParameterGroups"].([]any)
	for _, g := range groups {
		label, _ := Scalar(mapOf(mapOf(g)["Label"])["default"])
		for _, p := range leaves(mapOf(g)["Parameters"]) {
			if other, dup := group[p]; dup {
				return broken("parameter %s is in groups %q and %q", p, other, label)
			}
			if _, ok := t.Parameters[p]; !ok {
				return broken("group %q lists %s, which is not a parameter", label, p)
			}
			group[p] = label
		}
	}
	labels := mapOf(iface["ParameterLabels"])
	for _, name := range sortedKeys(t.Parameters) {
		p := t.Parameters[name]
		if d, _ := Scalar(p["Description"]); strings.TrimSpace(d) == "" {
			return broken("parameter %s has no Description", name)
		}
		if typ, _ := Scalar(p["Type"]); typ == "String" {
			_, pattern := p["AllowedPattern"]
			_, values := p["AllowedValues"]
			if !pattern && !values {
				return broken("string parameter %s has neither AllowedPattern nor AllowedValues", name)
			}
		}
		if _, ok := group[name]; !ok {
			return broken("parameter %s is in no ParameterGroups entry", name)
		}
		if l, _ := Scalar(mapOf(labels[name])["default"]); l == "" {
			return broken("parameter %s has no ParameterLabels entry", name)
		}
	}
	return nil
}

// RollbackAlarms are the alarms every function's gradual deployment rolls
// back on (the sender adds its own errors alarm).
var RollbackAlarms = []string{"FencingLostAlarm", "UncertainAttemptsAlarm"}

// checkGradualDeployment: every function publishes an alias and shifts
// traffic to a new version through CodeDeploy, rolling back on the
// alarms that show a release is sending twice or losing track (and, for
// the sender, failing).
func checkGradualDeployment(t *Template, _ Values) error {
	for _, name := range t.functionNames() {
		fn := t.Resources[name]
		if alias, _ := Scalar(t.functionProp(fn, "AutoPublishAlias")); alias == "" {
			return broken("%s: no AutoPublishAlias", name)
		}
		global := mapOf(mapOf(t.Globals["Function"])["DeploymentPreference"])
		own := mapOf(fn.Properties["DeploymentPreference"])
		if len(global) == 0 && len(own) == 0 {
			return broken("%s: no DeploymentPreference", name)
		}
		typ := own["Type"]
		if typ == nil {
			typ = global["Type"]
		}
		if !slices.Contains(leaves(typ), "Canary10Percent5Minutes") {
			return broken("%s: DeploymentPreference Type %v offers no canary", name, typ)
		}
		// SAM appends a function's lists to the Globals' lists.
		var alarms []string
		for _, a := range append(asList(global["Alarms"]), asList(own["Alarms"])...) {
			if ref, ok := Scalar(mapOf(a)["Ref"]); ok {
				alarms = append(alarms, ref)
			}
		}
		want := RollbackAlarms
		if name == SenderFunction {
			want = append(slices.Clone(want), "SenderErrorsAlarm")
		}
		for _, a := range want {
			if !slices.Contains(alarms, a) {
				return broken("%s: deployment does not roll back on %s (has %v)", name, a, alarms)
			}
			if _, err := t.resource(a, "AWS::CloudWatch::Alarm"); err != nil {
				return err
			}
		}
	}
	return nil
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}
