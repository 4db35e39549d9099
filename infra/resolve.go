package infra

import (
	"strings"

	"gopkg.in/yaml.v3"
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
	var n yaml.Node
	if err := n.Encode(v); err != nil {
		return nil, err
	}
	out, err := g.walk(shortForm(&n), map[string]bool{})
	if err != nil || noValue(out) {
		return nil, err
	}
	var r any
	err = longForm(out).Decode(&r)
	return r, err
}

// shortForm rewrites n, a part of a template in long form, into the short
// form (the inverse of longForm).
func shortForm(n *yaml.Node) *yaml.Node {
	for i, c := range n.Content {
		n.Content[i] = shortForm(c)
	}
	if n.Kind != yaml.MappingNode || len(n.Content) != 2 {
		return n
	}
	key, arg := n.Content[0].Value, n.Content[1]
	name, fn := strings.CutPrefix(key, "Fn::")
	if !fn && key != "Ref" && key != "Condition" {
		return n
	}
	arg.Tag = "!" + name
	return arg
}
