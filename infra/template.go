// Package infra reads template.yaml, the project's AWS SAM template, and
// checks the invariants between its parameters that CloudFormation itself
// cannot (Rules have no arithmetic): queue visibility against the sender
// timeout, claim lease against the provider timeout, redelivery against the
// claim, ledger retention against message lifetimes, and the structural
// promises (partial batch failures, the table schema of package
// tableschema, arm64/provided.al2023 functions, one least-privilege role per
// function).
//
// Parse turns CloudFormation's short-form tags (!Ref, !GetAtt, !Sub, ...)
// into their long form ({"Ref": ...}, {"Fn::GetAtt": [...]}), so every check
// reads one representation. Eval resolves the small subset of intrinsics the
// checks need (Ref to a parameter, Fn::Sub, Fn::If) against parameter values.
package infra

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// maxNodes bounds the nodes Parse visits (aliases included), so a template
// built to expand exponentially through aliases fails instead of exhausting
// memory.
const maxNodes = 1 << 20

// ErrTemplate is matched (errors.Is) by every error Parse returns for a
// document that is not a usable CloudFormation template.
var ErrTemplate = errors.New("infra: invalid template")

// Template is a parsed CloudFormation/SAM template. Intrinsic functions are
// in long form: {"Ref": name}, {"Fn::GetAtt": [resource, attribute]},
// {"Fn::X": args}, {"Condition": name}.
type Template struct {
	Parameters map[string]map[string]any
	Conditions map[string]any
	Rules      map[string]map[string]any
	Globals    map[string]any
	Resources  map[string]*Resource
	Outputs    map[string]any
	// Metadata is the template's top-level Metadata section
	// (AWS::CloudFormation::Interface).
	Metadata map[string]any
}

// Resource is one entry of the template's Resources section.
type Resource struct {
	Type       string
	Condition  string
	Properties map[string]any
	Metadata   map[string]any
}

// Load reads and parses the template at path; see Parse for the errors.
func Load(path string) (*Template, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("infra: load %s: %w", path, err)
	}
	t, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("infra: load %s: %w", path, err)
	}
	return t, nil
}

// Parse parses a YAML (or JSON) CloudFormation template. It returns an
// error matching ErrTemplate when the document is not YAML, is not a
// mapping, has a non-string mapping key, an unknown or malformed short-form
// tag, a resource without a Type, or more than maxNodes nodes.
func Parse(data []byte) (*Template, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrTemplate, err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil, fmt.Errorf("%w: empty document", ErrTemplate)
	}
	c := &converter{}
	v, err := c.value(doc.Content[0])
	if err != nil {
		return nil, err
	}
	root, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: top level is not a mapping", ErrTemplate)
	}
	t := &Template{
		Parameters: map[string]map[string]any{},
		Conditions: mapOf(root["Conditions"]),
		Rules:      map[string]map[string]any{},
		Globals:    mapOf(root["Globals"]),
		Resources:  map[string]*Resource{},
		Outputs:    mapOf(root["Outputs"]),
		Metadata:   mapOf(root["Metadata"]),
	}
	for name, p := range mapOf(root["Parameters"]) {
		m, ok := p.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%w: parameter %s is not a mapping", ErrTemplate, name)
		}
		t.Parameters[name] = m
	}
	for name, r := range mapOf(root["Rules"]) {
		m, ok := r.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%w: rule %s is not a mapping", ErrTemplate, name)
		}
		t.Rules[name] = m
	}
	for name, r := range mapOf(root["Resources"]) {
		m, ok := r.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%w: resource %s is not a mapping", ErrTemplate, name)
		}
		typ, _ := m["Type"].(string)
		if typ == "" {
			return nil, fmt.Errorf("%w: resource %s has no Type", ErrTemplate, name)
		}
		cond, _ := m["Condition"].(string)
		t.Resources[name] = &Resource{
			Type:       typ,
			Condition:  cond,
			Properties: mapOf(m["Properties"]),
			Metadata:   mapOf(m["Metadata"]),
		}
	}
	return t, nil
}

// mapOf returns v as a mapping, or an empty mapping when it is not one.
func mapOf(v any) map[string]any {
	if m, ok := v.(map[string]any); ok {
		return m
	}
	return map[string]any{}
}

type converter struct{ nodes int }

// shortForms maps each short-form tag to its long-form key.
var shortForms = map[string]string{
	"!Ref": "Ref", "!Condition": "Condition",
	"!GetAtt": "Fn::GetAtt", "!Sub": "Fn::Sub", "!If": "Fn::If",
	"!Equals": "Fn::Equals", "!Not": "Fn::Not", "!And": "Fn::And", "!Or": "Fn::Or",
	"!Join": "Fn::Join", "!Select": "Fn::Select", "!Split": "Fn::Split",
	"!FindInMap": "Fn::FindInMap", "!ImportValue": "Fn::ImportValue",
	"!GetAZs": "Fn::GetAZs", "!Base64": "Fn::Base64", "!Cidr": "Fn::Cidr",
	"!Contains": "Fn::Contains", "!EachMemberEquals": "Fn::EachMemberEquals",
	"!EachMemberIn": "Fn::EachMemberIn", "!RefAll": "Fn::RefAll",
	"!ValueOf": "Fn::ValueOf", "!ValueOfAll": "Fn::ValueOfAll",
	"!Transform": "Fn::Transform", "!Length": "Fn::Length", "!ToJsonString": "Fn::ToJsonString",
}

func (c *converter) value(n *yaml.Node) (any, error) {
	c.nodes++
	if c.nodes > maxNodes {
		return nil, fmt.Errorf("%w: more than %d nodes (alias expansion?)", ErrTemplate, maxNodes)
	}
	if n.Kind == yaml.AliasNode {
		if n.Alias == nil {
			return nil, fmt.Errorf("%w: line %d: dangling alias", ErrTemplate, n.Line)
		}
		return c.value(n.Alias)
	}
	if strings.HasPrefix(n.Tag, "!") && !strings.HasPrefix(n.Tag, "!!") {
		return c.tagged(n)
	}
	switch n.Kind {
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode {
				return nil, fmt.Errorf("%w: line %d: mapping key is not a scalar", ErrTemplate, k.Line)
			}
			v, err := c.value(n.Content[i+1])
			if err != nil {
				return nil, err
			}
			m[k.Value] = v
		}
		return m, nil
	case yaml.SequenceNode:
		s := make([]any, 0, len(n.Content))
		for _, e := range n.Content {
			v, err := c.value(e)
			if err != nil {
				return nil, err
			}
			s = append(s, v)
		}
		return s, nil
	case yaml.ScalarNode:
		var v any
		if err := n.Decode(&v); err != nil {
			return nil, fmt.Errorf("%w: line %d: %v", ErrTemplate, n.Line, err)
		}
		return v, nil
	}
	return nil, fmt.Errorf("%w: line %d: unexpected node kind %d", ErrTemplate, n.Line, n.Kind)
}

// tagged converts a node carrying a short-form tag to its long form.
func (c *converter) tagged(n *yaml.Node) (any, error) {
	key, ok := shortForms[n.Tag]
	if !ok {
		return nil, fmt.Errorf("%w: line %d: unknown tag %s", ErrTemplate, n.Line, n.Tag)
	}
	if n.Kind == yaml.ScalarNode {
		switch key {
		case "Ref", "Condition", "Fn::Sub", "Fn::ImportValue", "Fn::GetAZs", "Fn::Base64", "Fn::RefAll":
			return map[string]any{key: n.Value}, nil
		case "Fn::GetAtt":
			res, attr, ok := strings.Cut(n.Value, ".")
			if !ok || res == "" || attr == "" {
				return nil, fmt.Errorf("%w: line %d: !GetAtt %q is not Resource.Attribute", ErrTemplate, n.Line, n.Value)
			}
			return map[string]any{key: []any{res, attr}}, nil
		}
		return nil, fmt.Errorf("%w: line %d: %s needs a list, got scalar %q", ErrTemplate, n.Line, n.Tag, n.Value)
	}
	plain := *n
	plain.Tag = ""
	if n.Kind == yaml.MappingNode {
		plain.Tag = "!!map"
	} else if n.Kind == yaml.SequenceNode {
		plain.Tag = "!!seq"
	}
	v, err := c.value(&plain)
	if err != nil {
		return nil, err
	}
	return map[string]any{key: v}, nil
}

// Scalar returns the CloudFormation string form of a literal scalar (a
// string, number or boolean) and whether v is one.
func Scalar(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case int:
		return strconv.Itoa(x), true
	case int64:
		return strconv.FormatInt(x, 10), true
	case uint64:
		return strconv.FormatUint(x, 10), true
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), true
	case bool:
		return strconv.FormatBool(x), true
	}
	return "", false
}
