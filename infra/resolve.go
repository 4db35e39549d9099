package infra

import (
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Pseudo holds values of CloudFormation's pseudo parameters (AWS::Region,
// AWS::AccountId, ...) for Resolve.
type Pseudo map[string]string

// Resolve returns v (a part of the template: a resource's properties, a
// policy) as CloudFormation makes it for the parameter values p: each
// Fn::If becomes the branch its condition chooses, a Ref to a parameter
// or a pseudo parameter its value, an Fn::Sub the text with the
// parameters, pseudo parameters and its own variables it names filled in,
// and what becomes AWS::NoValue leaves its mapping or list. What names a
// resource (a Ref to it, Fn::GetAtt, ${Name} in an Fn::Sub) or is another
// function (Fn::Select, ...) stays as it is. v itself is not changed. Its
// error wraps ErrUnresolved: a condition it cannot evaluate, or an Fn::If
// or Fn::Sub of another shape.
func (t *Template) Resolve(v any, p Values, pseudo Pseudo) (any, error) {
	// Variant's walk, with every parameter fixed at its value.
	g := &gen{src: t, fixed: map[string]*yaml.Node{}, base: p, conds: map[string]tri{}, alias: map[string]string{}, resolve: true}
	for name, s := range p {
		if t.Parameters[name] != nil {
			g.fixed[name] = &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
		}
	}
	for name, s := range pseudo {
		g.fixed[name] = &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
	}
	out, err := g.walk(shortForm(v), map[string]bool{})
	if err != nil || noValue(out) {
		return nil, err
	}
	var r any
	err = longForm(out).Decode(&r)
	return r, err
}

// shortForm returns v, a part of a template in long form, as YAML nodes
// with short-form tags (the inverse of longForm).
func shortForm(v any) *yaml.Node {
	n := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null"}
	switch x := v.(type) {
	case map[string]any:
		for k, arg := range x {
			if name, fn := strings.CutPrefix(k, "Fn::"); len(x) == 1 && (fn || k == "Ref" || k == "Condition") {
				n = shortForm(arg)
				n.Tag = "!" + name
				return n
			}
		}
		n = &yaml.Node{Kind: yaml.MappingNode}
		for k, e := range x {
			n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: k}, shortForm(e))
		}
	case []any:
		n = &yaml.Node{Kind: yaml.SequenceNode}
		for _, e := range x {
			n.Content = append(n.Content, shortForm(e))
		}
	case string:
		n.Tag, n.Value = "!!str", x
	case float64:
		n.Tag, n.Value = "!!float", strconv.FormatFloat(x, 'g', -1, 64)
	case int, bool:
		n.Tag = "" // plain: read back as the number or boolean it is
		n.Value, _ = scalar(x)
	}
	return n
}
