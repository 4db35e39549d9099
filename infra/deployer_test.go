package infra

import (
	"os"
	"strings"
	"testing"
)

const (
	deployerBegin = "<!-- BEGIN deployer permissions: made by infra's TestDeployerPermissions from the templates' resource types (make template) -->\n"
	deployerEnd   = "<!-- END deployer permissions -->"
)

// TestDeployerPermissions: docs/deploy.md lists what a person or pipeline
// needs to deploy the stack (DeployerTable), made from every resource type
// template.yaml, template.sar.yaml and template.full.yaml declare or
// translate to, so the list cannot go stale: a type with no entry in
// DeployerPermissions fails, and so does a table that differs from the
// one the types make (-update, make template, rewrites it).
func TestDeployerPermissions(t *testing.T) {
	t.Parallel()
	var all []map[string]any
	for _, name := range []string{"template.yaml", "template.sar.yaml", "template.full.yaml"} {
		all = append(all, samResources(t, "../"+name), translate(t, name))
	}
	types := Types(all...)
	if len(types) < 20 {
		t.Fatalf("%d types: the scan is broken", len(types))
	}
	table, err := DeployerTable(types)
	if err != nil {
		t.Fatal(err)
	}
	for ty := range DeployerPermissions {
		if !strings.Contains(table, "`"+ty+"`") {
			t.Errorf("DeployerPermissions has %s, which no template uses: drop it", ty)
		}
	}
	block := deployerBegin + table + deployerEnd
	path := "../docs/deploy.md"
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	i, j := strings.Index(text, deployerBegin), strings.Index(text, deployerEnd)
	if i < 0 || j < i {
		t.Fatalf("%s has no deployer permissions block", path)
	}
	if *update {
		if err := os.WriteFile(path, []byte(text[:i]+block+text[j+len(deployerEnd):]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if text[i:j+len(deployerEnd)] != block {
		t.Errorf("%s's deployer permissions are not the templates': run make template", path)
	}
}

// TestDeployerTableRefusesUnknownType: a resource type with no entry is an
// error naming it, not a table without it.
func TestDeployerTableRefusesUnknownType(t *testing.T) {
	t.Parallel()
	if _, err := DeployerTable([]string{"AWS::SQS::Queue", "AWS::Kinesis::Stream"}); err == nil || !strings.Contains(err.Error(), "AWS::Kinesis::Stream") {
		t.Errorf("err = %v, want AWS::Kinesis::Stream named", err)
	}
}
