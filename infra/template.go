// Package infra checks the properties of the project's AWS SAM templates
// that no tool checks, and makes the parts of them that are worked out
// rather than written. template.full.yaml has every setting as a
// parameter; template.yaml, what a first deployment and the Serverless
// Application Repository take, is made from it (Variant, QuickStart) with
// all but a handful of parameters fixed at their defaults.
//
// For template.full.yaml it checks the arithmetic invariants between its
// parameters (queue visibility, function and provider timeouts, claim
// lease, redelivery, retention and the reconciler's maximum age),
// evaluated at the extremes of each parameter's allowed range against the
// template's Rules, since CloudFormation Rules cannot do arithmetic; and
// the ledger table against package tableschema, with and without the
// event index; the Rule that enforces the redelivery invariant is worked
// out from the parameters' values (RedeliveryRule). For both templates it
// checks, in the CloudFormation they translate to, that every alarm
// reaches a person (CheckAlarms), and that the sender and the reconciler
// agree on every setting both read.
//
// Everything else about the template is checked by cfn-lint with this
// repository's rules in scripts/cfnlint_rules (make lint): which property
// each of these parameters sets (E9110), each function's IAM grants
// (E9111, and cfn-lint's own W3037 for nonexistent actions), partial
// batch failures, platform, wildcards, permissions boundaries, parameter
// documentation, gradual deployment, the redaction key and the one table.
//
// Load reads the template with CloudFormation's short-form tags (!Ref,
// !Sub, ...) in their long form ({"Ref": ...}, {"Fn::Sub": ...}).
package infra

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Template is template.yaml, intrinsic functions in long form.
type Template struct {
	Metadata   map[string]any            `yaml:"Metadata"`
	Parameters map[string]map[string]any `yaml:"Parameters"`
	Conditions map[string]any            `yaml:"Conditions"`
	Rules      map[string]map[string]any `yaml:"Rules"`
	Resources  map[string]map[string]any `yaml:"Resources"`
	// Globals holds SAM's sections of properties every resource of a
	// type takes (Function, Api, ...).
	Globals map[string]map[string]any `yaml:"Globals"`
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
	var t Template
	if err := longForm(&doc).Decode(&t); err != nil {
		return nil, err
	}
	return &t, nil
}

// longForm returns a copy of n with every node tagged !X rewritten into
// the mapping {"Fn::X": node} ({"Ref": ...} and {"Condition": ...} for
// !Ref and !Condition, and !GetAtt A.B into {"Fn::GetAtt": [A, B]}).
func longForm(n *yaml.Node) *yaml.Node {
	arg := *n
	arg.Content = make([]*yaml.Node, len(n.Content))
	for i, c := range n.Content {
		arg.Content[i] = longForm(c)
	}
	if !intrinsic(n) {
		return &arg
	}
	key := "Fn::" + n.Tag[1:]
	if n.Tag == "!Ref" || n.Tag == "!Condition" {
		key = n.Tag[1:]
	}
	arg.Tag = ""
	if res, attr, ok := strings.Cut(n.Value, "."); ok && n.Tag == "!GetAtt" && n.Kind == yaml.ScalarNode {
		arg = yaml.Node{Kind: yaml.SequenceNode, Content: []*yaml.Node{
			{Kind: yaml.ScalarNode, Value: res}, {Kind: yaml.ScalarNode, Value: attr}}}
	}
	return &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{{Kind: yaml.ScalarNode, Value: key}, &arg}}
}

// intrinsic reports whether n is an intrinsic function in short form
// (tagged !Ref, !Sub, ...; not a YAML tag such as !!str).
func intrinsic(n *yaml.Node) bool {
	return strings.HasPrefix(n.Tag, "!") && !strings.HasPrefix(n.Tag, "!!")
}

func mapOf(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
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

// Given holds the values a deployment must give because a parameter's
// default is refused: an alarm destination (Rule AlarmDestination refuses
// a stack with neither AlarmEmail nor AlarmTopicArn), here an address.
var Given = Values{"AlarmEmail": "oncall@example.com"}

// Deployable returns the defaults with Given's values for the parameters
// t declares: the values of a deployment that sets only what it must,
// where the invariants are checked from (combinations).
func (t *Template) Deployable() Values {
	v := t.Defaults()
	for name, s := range Given {
		if t.Parameters[name] != nil {
			v[name] = s
		}
	}
	return v
}

// With returns a copy of v with name set to value.
func (v Values) With(name, value string) Values {
	c := maps.Clone(v)
	if c == nil {
		c = Values{}
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

// combinations returns the deployable values (Deployable) with names set
// to each combination of their extremes.
func (t *Template) combinations(names []string) []Values {
	out := []Values{t.Deployable()}
	for _, name := range names {
		out = expand(out, name, t.Extremes(name))
	}
	return out
}

// expand returns each of ps with name set to each of vals.
func expand(ps []Values, name string, vals []string) []Values {
	var out []Values
	for _, p := range ps {
		for _, v := range vals {
			out = append(out, p.With(name, v))
		}
	}
	return out
}

// ErrUnresolved is matched (errors.Is) by an evaluation error: a value
// that is neither a literal nor a parameter with a value, a condition or
// rule that uses another function than Fn::Equals, Fn::Not, Fn::And,
// Fn::Or, Fn::Contains and Condition, or a parameter an invariant reads
// that is not an integer.
var ErrUnresolved = errors.New("infra: cannot resolve")

// maxDepth bounds how deeply conditions nest (a condition naming itself).
const maxDepth = 64

// eval evaluates the template's conditions and Rules with parameter
// values p.
type eval struct {
	t     *Template
	p     Values
	depth int
}

// str resolves v, a literal or a {"Ref": parameter}, to a string.
func (e *eval) str(v any) (string, error) {
	if s, ok := scalar(v); ok {
		return s, nil
	}
	m := mapOf(v)
	name, _ := m["Ref"].(string)
	if s, ok := e.p[name]; ok && len(m) == 1 && e.t.Parameters[name] != nil {
		return s, nil
	}
	return "", fmt.Errorf("%w: %v", ErrUnresolved, v)
}

// cond evaluates a condition or rule assertion.
func (e *eval) cond(v any) (bool, error) {
	defer func() { e.depth-- }()
	if e.depth++; e.depth > maxDepth {
		return false, fmt.Errorf("%w: nested more than %d deep", ErrUnresolved, maxDepth)
	}
	m := mapOf(v)
	for fn, arg := range m {
		args, _ := arg.([]any)
		switch {
		case len(m) != 1:
		case fn == "Condition":
			name, _ := arg.(string)
			if c, ok := e.t.Conditions[name]; ok {
				return e.cond(c)
			}
		case fn == "Fn::Not" && len(args) == 1:
			b, err := e.cond(args[0])
			return !b, err
		case (fn == "Fn::And" || fn == "Fn::Or") && len(args) > 0:
			for _, a := range args {
				if b, err := e.cond(a); err != nil || b == (fn == "Fn::Or") {
					return b, err
				}
			}
			return fn == "Fn::And", nil
		case fn == "Fn::Equals" && len(args) == 2:
			a, err := e.str(args[0])
			if err != nil {
				return false, err
			}
			b, err := e.str(args[1])
			return a == b, err
		case fn == "Fn::Contains" && len(args) == 2:
			list, _ := args[0].([]any)
			b, err := e.str(args[1])
			return slices.Contains(list, any(b)), err
		}
	}
	return false, fmt.Errorf("%w: %v is not a condition", ErrUnresolved, v)
}

// Violations returns the template Rules that reject parameter values p,
// sorted: none when CloudFormation would accept them.
func (t *Template) Violations(p Values) ([]string, error) {
	e := &eval{t: t, p: p}
	var out []string
	for _, name := range slices.Sorted(maps.Keys(t.Rules)) {
		rule := t.Rules[name]
		if c, ok := rule["RuleCondition"]; ok {
			applies, err := e.cond(c)
			if err != nil {
				return nil, fmt.Errorf("rule %s: %w", name, err)
			}
			if !applies {
				continue
			}
		}
		asserts, _ := rule["Assertions"].([]any)
		for _, a := range asserts {
			ok, err := e.cond(mapOf(a)["Assert"])
			if err != nil {
				return nil, fmt.Errorf("rule %s: %w", name, err)
			}
			if !ok && !slices.Contains(out, name) {
				out = append(out, name)
			}
		}
	}
	return out, nil
}
