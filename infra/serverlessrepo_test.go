package infra

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func repoFile(name string) bool {
	info, err := os.Stat(filepath.Join("..", name))
	return err == nil && info.Mode().IsRegular() && !strings.Contains(name, "..")
}

// samResources returns the resources of the SAM template at path.
func samResources(t *testing.T, path string) map[string]any {
	t.Helper()
	tpl, _ := load(t, path)
	res := map[string]any{}
	for name, r := range tpl.Resources {
		res[name] = map[string]any(r)
	}
	return map[string]any{"Resources": res}
}

// TestServerlessRepo: template.sar.yaml, which the Serverless Application
// Repository publishes, carries the application's metadata by the
// repository's rules, and declares, and translates to, only resource
// types the repository accepts (SARTypes; SARSources says how far that
// could be checked). The verdicts on the other templates' types are
// logged: template.full.yaml is not for the repository.
func TestServerlessRepo(t *testing.T) {
	t.Parallel()
	sar, _ := load(t, sarPath)
	meta, _ := sar.Metadata["AWS::ServerlessRepo::Application"].(map[string]any)
	for _, err := range CheckSARMetadata(meta, repoFile) {
		t.Error(err)
	}
	if license, err := os.ReadFile("../LICENSE"); err != nil || !strings.Contains(string(license), "Apache License") || !strings.Contains(string(license), "Version 2.0") || meta["SpdxLicenseId"] != "Apache-2.0" {
		t.Errorf("SpdxLicenseId %v does not match LICENSE", meta["SpdxLicenseId"])
	}
	if quick, _ := load(t, quickPath); quick.Metadata["AWS::ServerlessRepo::Application"] != nil {
		t.Error("template.yaml carries the repository's metadata: sam publish would publish the wrong template")
	}
	for _, err := range CheckSARTypes(samResources(t, sarPath), translate(t, "template.sar.yaml")) {
		t.Error(err)
	}
	for _, name := range []string{"template.yaml", "template.full.yaml"} {
		types := map[string]bool{}
		for _, r := range mapOf(translate(t, name)["Resources"]) {
			types[mapOf(r)["Type"].(string)] = true
		}
		for _, r := range mapOf(samResources(t, "../"+name)["Resources"]) {
			types[mapOf(r)["Type"].(string)] = true
		}
		var not []string
		for _, ty := range slices.Sorted(maps.Keys(types)) {
			if v := SARTypes[ty]; v != SARListed {
				not = append(not, ty+" ("+string(v)+")")
			}
		}
		t.Logf("%s: not on the repository's list: %v", name, not)
	}
}

// TestServerlessRepoCatchesBreakage: the checks report an unknown type,
// a rejected one, and metadata the repository refuses.
func TestServerlessRepoCatchesBreakage(t *testing.T) {
	t.Parallel()
	res := func(types ...string) map[string]any {
		m := map[string]any{}
		for i, ty := range types {
			m[string(rune('A'+i))] = map[string]any{"Type": ty}
		}
		return map[string]any{"Resources": m}
	}
	for name, tc := range map[string]struct{ sam, cfn map[string]any }{
		"UnknownType":        {res("AWS::Serverless::Function", "AWS::Foo::Bar"), res()},
		"FunctionUrl":        {res("AWS::Serverless::Function"), res("AWS::Lambda::Url")},
		"GlobalTable":        {res("AWS::DynamoDB::GlobalTable"), res()},
		"DeclaredCodeDeploy": {res("AWS::CodeDeploy::Application"), res()},
	} {
		if errs := CheckSARTypes(tc.sam, tc.cfn); len(errs) == 0 {
			t.Errorf("%s: CheckSARTypes reports nothing", name)
		}
	}
	if errs := CheckSARTypes(res("AWS::Serverless::Function"), res("AWS::Lambda::Function", "AWS::CodeDeploy::DeploymentGroup")); len(errs) != 1 {
		t.Errorf("a deployment group the transform makes: %v, want it reported", errs)
	}
	good := func() map[string]any {
		sar, _ := load(t, sarPath)
		return sar.Metadata["AWS::ServerlessRepo::Application"].(map[string]any)
	}
	for name, breakIt := range map[string]func(map[string]any){
		"UpperCaseAuthor": func(m map[string]any) { m["Author"] = "Sendonce" },
		"ElevenLabels":    func(m map[string]any) { m["Labels"] = slices.Repeat([]any{"x"}, 11) },
		"LabelWithSpace":  func(m map[string]any) { m["Labels"] = []any{"two words"} },
		"LongDescription": func(m map[string]any) { m["Description"] = strings.Repeat("x", 257) },
		"NotSemver":       func(m map[string]any) { m["SemanticVersion"] = "1.0" },
		"NoReadme":        func(m map[string]any) { m["ReadmeUrl"] = "READ.md" },
		"NoSourceCode":    func(m map[string]any) { delete(m, "SourceCodeUrl") },
		"NameWithDot":     func(m map[string]any) { m["Name"] = "send.once" },
	} {
		m := good()
		breakIt(m)
		if errs := CheckSARMetadata(m, repoFile); len(errs) == 0 {
			t.Errorf("%s: CheckSARMetadata reports nothing", name)
		}
	}
}

// sarList reads SARListFile: the types on the repository's list.
func sarList(t *testing.T) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", SARListFile))
	if err != nil {
		t.Fatal(err)
	}
	list := map[string]bool{}
	for line := range strings.Lines(string(data)) {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			list[line] = true
		}
	}
	if len(list) < 100 || !list["AWS::Serverless::Function"] {
		t.Fatalf("%s: %d types: not the list", SARListFile, len(list))
	}
	return list
}

// TestSARListFile: a type SARTypes calls listed is on the list the
// repository keeps (SARListFile, with its source), and one it calls not
// listed or rejected is not; and nothing template.sar.yaml declares or
// translates to is off the list.
func TestSARListFile(t *testing.T) {
	t.Parallel()
	list := sarList(t)
	for ty, v := range SARTypes {
		if (v == SARListed) != list[ty] {
			t.Errorf("SARTypes says %s is %s; %s says the opposite", ty, v, SARListFile)
		}
	}
	types := map[string]bool{}
	for _, r := range mapOf(translate(t, "template.sar.yaml")["Resources"]) {
		types[mapOf(r)["Type"].(string)] = true
	}
	for _, r := range mapOf(samResources(t, sarPath)["Resources"]) {
		types[mapOf(r)["Type"].(string)] = true
	}
	for _, ty := range slices.Sorted(maps.Keys(types)) {
		if !list[ty] {
			t.Errorf("template.sar.yaml declares or translates to %s, which is not on %s", ty, SARListFile)
		}
	}
}
