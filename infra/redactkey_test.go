package infra

import (
	"reflect"
	"strings"
	"testing"
)

// TestRedactKeySecret: the template creates the address-token key as a
// generated Secrets Manager secret, passes it to every function as
// SENDONCE_REDACT_KEY_PARAM, and lets each function's role read that one
// secret and no other.
func TestRedactKeySecret(t *testing.T) {
	t.Parallel()
	tpl, _ := setup(t)
	sec, err := tpl.resource("RedactKeySecret", "AWS::SecretsManager::Secret")
	if err != nil {
		t.Fatal(err)
	}
	gen := mapOf(sec.Properties["GenerateSecretString"])
	if n, _ := Scalar(gen["PasswordLength"]); n != "64" || sec.Properties["SecretString"] != nil {
		t.Errorf("RedactKeySecret: want a generated 64-character secret, got %v", sec.Properties)
	}
	ref := map[string]any{"Ref": "RedactKeySecret"}
	fns := tpl.functionNames()
	if len(fns) < 4 {
		t.Fatalf("functions %v, want sender, reconciler, webhook and api", fns)
	}
	for _, name := range fns {
		fn := tpl.Resources[name]
		if v, ok := tpl.env(fn, "SENDONCE_REDACT_KEY_PARAM"); !ok || !reflect.DeepEqual(v, ref) {
			t.Errorf("%s: SENDONCE_REDACT_KEY_PARAM = %v, want !Ref RedactKeySecret", name, v)
		}
		role, _ := getAttTarget(fn.Properties["Role"], "Arn")
		r := tpl.Resources[role]
		if r == nil {
			t.Fatalf("%s: no role %s", name, role)
		}
		var docs []any
		for _, p := range r.Properties["Policies"].([]any) {
			docs = append(docs, mapOf(mapOf(p)["PolicyDocument"])["Statement"])
		}
		reads := 0
		for _, st := range statements(docs) {
			var sm []string
			for _, a := range leaves(st["Action"]) {
				if strings.HasPrefix(strings.ToLower(a), "secretsmanager:") {
					sm = append(sm, a)
				}
			}
			if len(sm) == 0 {
				continue
			}
			if !reflect.DeepEqual(sm, []string{"secretsmanager:GetSecretValue"}) || !reflect.DeepEqual(st["Resource"], ref) {
				t.Errorf("%s: statement %v: want secretsmanager:GetSecretValue on !Ref RedactKeySecret only", role, st)
			}
			reads++
		}
		if reads != 1 {
			t.Errorf("%s: %d statements read Secrets Manager, want 1 (the redaction key)", role, reads)
		}
	}
}
