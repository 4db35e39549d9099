// Package infra checks the properties of template.yaml, the project's AWS
// SAM template, that no tool checks: the arithmetic invariants between its
// parameters (queue visibility, function and provider timeouts, claim
// lease, redelivery, retention and the reconciler's maximum age), evaluated
// at the extremes of each parameter's allowed range, since CloudFormation
// Rules cannot do arithmetic; the ledger table against package
// tableschema; and each function's IAM grants against FunctionGrants.
//
// The template's structure (partial batch failures, arm64 functions, IAM
// wildcards, permissions boundaries, parameter descriptions, gradual
// deployment, the redaction key, one table name) is checked by cfn-lint
// with this repository's rules in scripts/cfnlint_rules (make lint).
//
// Load reads the template with CloudFormation's short-form tags (!Ref,
// !Sub, ...) in their long form ({"Ref": ...}, {"Fn::Sub": ...}).
package infra

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Template is template.yaml, intrinsic functions in long form.
type Template struct {
	Parameters map[string]map[string]any `yaml:"Parameters"`
	Conditions map[string]any            `yaml:"Conditions"`
	Rules      map[string]map[string]any `yaml:"Rules"`
	Resources  map[string]map[string]any `yaml:"Resources"`
}

// Load reads and parses the template at path (see Parse).
func Load(path string) (*Template, error) {
	data, err := os.ReadFile(path)
	if err == nil {
		var t *Template
		if t, err = Parse(data); err == nil {
			return t, nil
		}
	}
	return nil, fmt.Errorf("infra: load %s: %w", path, err)
}

// Parse parses a YAML (or JSON) template. Its error is YAML's when data is
// not YAML or its sections are not mappings of the expected shape.
func Parse(data []byte) (*Template, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	longForm(&doc)
	var t Template
	if err := doc.Decode(&t); err != nil {
		return nil, err
	}
	return &t, nil
}

// longForm rewrites every node tagged !X into the mapping {"Fn::X": node}
// ({"Ref": ...} and {"Condition": ...} for !Ref and !Condition, and
// !GetAtt A.B into {"Fn::GetAtt": [A, B]}).
func longForm(n *yaml.Node) {
	for _, c := range n.Content {
		longForm(c)
	}
	if !strings.HasPrefix(n.Tag, "!") || strings.HasPrefix(n.Tag, "!!") {
		return
	}
	key := "Fn::" + n.Tag[1:]
	if n.Tag == "!Ref" || n.Tag == "!Condition" {
		key = n.Tag[1:]
	}
	arg := *n
	arg.Tag = ""
	if res, attr, ok := strings.Cut(n.Value, "."); ok && n.Tag == "!GetAtt" && n.Kind == yaml.ScalarNode {
		arg = yaml.Node{Kind: yaml.SequenceNode, Content: []*yaml.Node{
			{Kind: yaml.ScalarNode, Value: res}, {Kind: yaml.ScalarNode, Value: attr}}}
	}
	*n = yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{{Kind: yaml.ScalarNode, Value: key}, &arg}}
}

// Logical ids of the template's resources that the checks read.
const (
	SenderFunction     = "SenderFunction"
	ReconcilerFunction = "ReconcilerFunction"
	functionType       = "AWS::Serverless::Function"
)

func mapOf(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func props(r map[string]any) map[string]any { return mapOf(r["Properties"]) }

// functionNames returns the template's functions, sorted.
func (t *Template) functionNames() []string {
	var out []string
	for name, r := range t.Resources {
		if r["Type"] == functionType {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// env returns environment variable name of function fn (unevaluated).
func (t *Template) env(fn, name string) (any, bool) {
	v, ok := mapOf(mapOf(props(t.Resources[fn])["Environment"])["Variables"])[name]
	return v, ok
}

// getAttTarget returns the resource named by {"Fn::GetAtt": [name, attr]}.
func getAttTarget(v any, attr string) (string, bool) {
	args, _ := mapOf(v)["Fn::GetAtt"].([]any)
	if len(args) != 2 || args[1] != attr {
		return "", false
	}
	name, ok := args[0].(string)
	return name, ok && name != ""
}

// scalar returns the CloudFormation string form of a literal scalar.
func scalar(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case int:
		return strconv.Itoa(x), true
	case bool:
		return strconv.FormatBool(x), true
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), true
	}
	return "", false
}

// Values assigns a value to template parameters, as CloudFormation passes
// them (a Number parameter's value is its decimal string).
type Values map[string]string

// Defaults returns every parameter's Default value.
func (t *Template) Defaults() Values {
	v := Values{}
	for name, p := range t.Parameters {
		if s, ok := scalar(p["Default"]); ok {
			v[name] = s
		}
	}
	return v
}

// With returns a copy of v with name set to value.
func (v Values) With(name, value string) Values {
	c := make(Values, len(v)+1)
	for k, x := range v {
		c[k] = x
	}
	c[name] = value
	return c
}

// Extremes returns the values parameter name takes at the edges of its
// allowed range: each of its AllowedValues, or its MinValue, Default and
// MaxValue (those it declares).
func (t *Template) Extremes(name string) []string {
	p := t.Parameters[name]
	var out []string
	if vals, ok := p["AllowedValues"].([]any); ok {
		for _, v := range vals {
			s, _ := scalar(v)
			out = append(out, s)
		}
		return out
	}
	for _, k := range []string{"MinValue", "Default", "MaxValue"} {
		if s, ok := scalar(p[k]); ok && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}
