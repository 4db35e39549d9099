package infra

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Values assigns a string value to template parameters, as CloudFormation
// passes them (a Number parameter's value is its decimal string).
type Values map[string]string

// ErrUnresolved is matched (errors.Is) by Eval's error when a value depends
// on something only a deployment knows (a resource attribute, an unknown
// parameter) or on an intrinsic function Eval does not implement.
var ErrUnresolved = errors.New("infra: cannot resolve")

// noValue is what Eval returns for {"Ref": "AWS::NoValue"}.
type noValue struct{}

// NoValue is the result of evaluating {"Ref": "AWS::NoValue"}: the property
// is absent.
var NoValue any = noValue{}

// pseudo holds placeholder values of the pseudo parameters, so strings
// built with them (ARNs, names) evaluate.
var pseudo = map[string]string{
	"AWS::Region": "us-east-1", "AWS::AccountId": "123456789012",
	"AWS::Partition": "aws", "AWS::StackName": "sendonce", "AWS::URLSuffix": "amazonaws.com",
	"AWS::StackId": "arn:aws:cloudformation:us-east-1:123456789012:stack/sendonce/id",
}

// Defaults returns every parameter's Default value; parameters without one
// are left out.
func (t *Template) Defaults() Values {
	v := Values{}
	for name, p := range t.Parameters {
		if s, ok := Scalar(p["Default"]); ok {
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

// Eval resolves v with parameter values p: literals stay as they are,
// {"Ref": parameter} becomes the parameter's value, pseudo parameters a
// fixed placeholder, Fn::Sub a string, Fn::If the chosen branch (conditions
// evaluated from the template's Conditions), Fn::Select/Fn::Split/Fn::Join
// their result, and mappings and lists are resolved element by element
// (NoValue elements and properties dropped). It returns an error matching
// ErrUnresolved for a resource reference, Fn::GetAtt, an unknown parameter
// or any other intrinsic.
func (t *Template) Eval(v any, p Values) (any, error) {
	return t.eval(v, p, 0)
}

const maxDepth = 64

func (t *Template) eval(v any, p Values, depth int) (any, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("%w: nested too deeply", ErrUnresolved)
	}
	switch x := v.(type) {
	case []any:
		out := make([]any, 0, len(x))
		for _, e := range x {
			r, err := t.eval(e, p, depth+1)
			if err != nil {
				return nil, err
			}
			if r != NoValue {
				out = append(out, r)
			}
		}
		return out, nil
	case map[string]any:
		if len(x) == 1 {
			for k, arg := range x {
				if k == "Ref" || strings.HasPrefix(k, "Fn::") {
					return t.intrinsic(k, arg, p, depth)
				}
			}
		}
		out := make(map[string]any, len(x))
		for k, e := range x {
			r, err := t.eval(e, p, depth+1)
			if err != nil {
				return nil, err
			}
			if r != NoValue {
				out[k] = r
			}
		}
		return out, nil
	}
	return v, nil
}

func (t *Template) intrinsic(fn string, arg any, p Values, depth int) (any, error) {
	switch fn {
	case "Ref":
		name, _ := arg.(string)
		return t.ref(name, p)
	case "Fn::Sub":
		return t.sub(arg, p, depth)
	case "Fn::If":
		args, ok := arg.([]any)
		if !ok || len(args) != 3 {
			return nil, fmt.Errorf("%w: Fn::If needs [condition, then, else]", ErrUnresolved)
		}
		name, _ := args[0].(string)
		ok, err := t.Condition(name, p)
		if err != nil {
			return nil, err
		}
		if ok {
			return t.eval(args[1], p, depth+1)
		}
		return t.eval(args[2], p, depth+1)
	case "Fn::Join":
		args, ok := arg.([]any)
		if !ok || len(args) != 2 {
			return nil, fmt.Errorf("%w: Fn::Join needs [delimiter, list]", ErrUnresolved)
		}
		sep, _ := args[0].(string)
		list, err := t.eval(args[1], p, depth+1)
		if err != nil {
			return nil, err
		}
		items, ok := list.([]any)
		if !ok {
			return nil, fmt.Errorf("%w: Fn::Join of a non-list", ErrUnresolved)
		}
		parts := make([]string, 0, len(items))
		for _, it := range items {
			s, ok := Scalar(it)
			if !ok {
				return nil, fmt.Errorf("%w: Fn::Join of a non-scalar", ErrUnresolved)
			}
			parts = append(parts, s)
		}
		return strings.Join(parts, sep), nil
	}
	return nil, fmt.Errorf("%w: %s", ErrUnresolved, fn)
}

func (t *Template) ref(name string, p Values) (any, error) {
	if name == "AWS::NoValue" {
		return NoValue, nil
	}
	if s, ok := pseudo[name]; ok {
		return s, nil
	}
	if _, ok := t.Parameters[name]; !ok {
		return nil, fmt.Errorf("%w: Ref %s is not a parameter", ErrUnresolved, name)
	}
	s, ok := p[name]
	if !ok {
		return nil, fmt.Errorf("%w: parameter %s has no value", ErrUnresolved, name)
	}
	return s, nil
}

var subVar = regexp.MustCompile(`\$\{([^}!]*)\}`)

func (t *Template) sub(arg any, p Values, depth int) (any, error) {
	var (
		format string
		vars   = map[string]any{}
	)
	switch a := arg.(type) {
	case string:
		format = a
	case []any:
		if len(a) != 2 {
			return nil, fmt.Errorf("%w: Fn::Sub needs a string or [string, variables]", ErrUnresolved)
		}
		format, _ = a[0].(string)
		vars = mapOf(a[1])
	default:
		return nil, fmt.Errorf("%w: Fn::Sub needs a string or [string, variables]", ErrUnresolved)
	}
	var firstErr error
	out := subVar.ReplaceAllStringFunc(format, func(m string) string {
		name := m[2 : len(m)-1]
		var (
			r   any
			err error
		)
		if v, ok := vars[name]; ok {
			r, err = t.eval(v, p, depth+1)
		} else {
			r, err = t.ref(name, p)
		}
		if err == nil {
			s, ok := Scalar(r)
			if ok {
				return s
			}
			err = fmt.Errorf("%w: Fn::Sub variable %s is not a scalar", ErrUnresolved, name)
		}
		if firstErr == nil {
			firstErr = err
		}
		return ""
	})
	if firstErr != nil {
		return nil, firstErr
	}
	return out, nil
}

// Condition evaluates the template condition name with parameter values p.
// It returns an error matching ErrUnresolved if the condition does not
// exist or uses something other than Fn::Equals, Fn::Not, Fn::And, Fn::Or
// and Condition over parameters and literals.
func (t *Template) Condition(name string, p Values) (bool, error) {
	c, ok := t.Conditions[name]
	if !ok {
		return false, fmt.Errorf("%w: no condition %s", ErrUnresolved, name)
	}
	return t.boolExpr(c, p, 0)
}

// boolExpr evaluates a condition or rule expression: Fn::Equals, Fn::Not,
// Fn::And, Fn::Or, Condition, and the rule functions Fn::Contains,
// Fn::EachMemberEquals and Fn::EachMemberIn.
func (t *Template) boolExpr(v any, p Values, depth int) (bool, error) {
	if depth > maxDepth {
		return false, fmt.Errorf("%w: nested too deeply", ErrUnresolved)
	}
	m, ok := v.(map[string]any)
	if !ok || len(m) != 1 {
		if b, ok := v.(bool); ok {
			return b, nil
		}
		return false, fmt.Errorf("%w: %v is not a condition", ErrUnresolved, v)
	}
	for fn, arg := range m {
		args, _ := arg.([]any)
		switch fn {
		case "Condition":
			name, _ := arg.(string)
			c, ok := t.Conditions[name]
			if !ok {
				return false, fmt.Errorf("%w: no condition %s", ErrUnresolved, name)
			}
			return t.boolExpr(c, p, depth+1)
		case "Fn::Not":
			if len(args) != 1 {
				return false, fmt.Errorf("%w: Fn::Not needs one argument", ErrUnresolved)
			}
			b, err := t.boolExpr(args[0], p, depth+1)
			return !b, err
		case "Fn::And", "Fn::Or":
			if len(args) == 0 {
				return false, fmt.Errorf("%w: %s needs arguments", ErrUnresolved, fn)
			}
			for _, a := range args {
				b, err := t.boolExpr(a, p, depth+1)
				if err != nil {
					return false, err
				}
				if fn == "Fn::Or" && b {
					return true, nil
				}
				if fn == "Fn::And" && !b {
					return false, nil
				}
			}
			return fn == "Fn::And", nil
		case "Fn::Equals":
			if len(args) != 2 {
				return false, fmt.Errorf("%w: Fn::Equals needs two arguments", ErrUnresolved)
			}
			a, err := t.scalarOf(args[0], p, depth)
			if err != nil {
				return false, err
			}
			b, err := t.scalarOf(args[1], p, depth)
			if err != nil {
				return false, err
			}
			return a == b, nil
		case "Fn::Contains", "Fn::EachMemberEquals", "Fn::EachMemberIn":
			if len(args) != 2 {
				return false, fmt.Errorf("%w: %s needs two arguments", ErrUnresolved, fn)
			}
			return t.membership(fn, args, p, depth)
		}
		return false, fmt.Errorf("%w: %s in a condition", ErrUnresolved, fn)
	}
	return false, fmt.Errorf("%w: empty condition", ErrUnresolved)
}

func (t *Template) membership(fn string, args []any, p Values, depth int) (bool, error) {
	list := func(v any) ([]string, error) {
		r, err := t.eval(v, p, depth+1)
		if err != nil {
			return nil, err
		}
		if s, ok := Scalar(r); ok { // a CommaDelimitedList parameter
			return strings.Split(s, ","), nil
		}
		items, ok := r.([]any)
		if !ok {
			return nil, fmt.Errorf("%w: %s needs a list", ErrUnresolved, fn)
		}
		out := make([]string, 0, len(items))
		for _, it := range items {
			s, ok := Scalar(it)
			if !ok {
				return nil, fmt.Errorf("%w: %s list of non-scalars", ErrUnresolved, fn)
			}
			out = append(out, s)
		}
		return out, nil
	}
	first, err := list(args[0])
	if err != nil {
		return false, err
	}
	switch fn {
	case "Fn::Contains":
		v, err := t.scalarOf(args[1], p, depth)
		if err != nil {
			return false, err
		}
		return slices.Contains(first, v), nil
	case "Fn::EachMemberEquals":
		v, err := t.scalarOf(args[1], p, depth)
		if err != nil {
			return false, err
		}
		for _, s := range first {
			if s != v {
				return false, nil
			}
		}
		return true, nil
	}
	second, err := list(args[1])
	if err != nil {
		return false, err
	}
	for _, s := range first {
		if !slices.Contains(second, s) {
			return false, nil
		}
	}
	return true, nil
}

func (t *Template) scalarOf(v any, p Values, depth int) (string, error) {
	r, err := t.eval(v, p, depth+1)
	if err != nil {
		return "", err
	}
	s, ok := Scalar(r)
	if !ok {
		return "", fmt.Errorf("%w: %v is not a scalar", ErrUnresolved, v)
	}
	return s, nil
}

// RuleViolation is one failed assertion of a template Rule.
type RuleViolation struct {
	Rule        string
	Description string
}

// CheckRules evaluates the template's Rules as CloudFormation would with
// parameter values p and returns the assertions that fail (none: the
// parameters would be accepted). It returns an error matching ErrUnresolved
// if a rule uses a function it does not implement.
func (t *Template) CheckRules(p Values) ([]RuleViolation, error) {
	var out []RuleViolation
	for _, name := range sortedKeys(t.Rules) {
		rule := t.Rules[name]
		if cond, ok := rule["RuleCondition"]; ok {
			applies, err := t.boolExpr(cond, p, 0)
			if err != nil {
				return nil, fmt.Errorf("rule %s: condition: %w", name, err)
			}
			if !applies {
				continue
			}
		}
		asserts, _ := rule["Assertions"].([]any)
		for i, a := range asserts {
			am := mapOf(a)
			ok, err := t.boolExpr(am["Assert"], p, 0)
			if err != nil {
				return nil, fmt.Errorf("rule %s: assertion %d: %w", name, i, err)
			}
			if !ok {
				d, _ := am["AssertDescription"].(string)
				out = append(out, RuleViolation{Rule: name, Description: d})
			}
		}
	}
	return out, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// evalInt resolves v to an integer.
func (t *Template) evalInt(v any, p Values) (int, error) {
	r, err := t.Eval(v, p)
	if err != nil {
		return 0, err
	}
	s, ok := Scalar(r)
	if !ok {
		return 0, fmt.Errorf("%w: %v is not a number", ErrUnresolved, v)
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%w: %q is not an integer", ErrUnresolved, s)
	}
	return n, nil
}

// evalDuration resolves v to a Go duration string and parses it.
func (t *Template) evalDuration(v any, p Values) (time.Duration, error) {
	r, err := t.Eval(v, p)
	if err != nil {
		return 0, err
	}
	s, ok := Scalar(r)
	if !ok {
		return 0, fmt.Errorf("%w: %v is not a duration", ErrUnresolved, v)
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%w: %q is not a Go duration", ErrUnresolved, s)
	}
	return d, nil
}
