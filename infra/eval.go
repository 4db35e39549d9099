package infra

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ErrUnresolved is matched (errors.Is) by an evaluation error: a value
// that is not a literal, a parameter, or Fn::Sub and Fn::If over
// parameters, or a condition or rule that uses another function than
// Fn::Equals, Fn::Not, Fn::And, Fn::Or, Fn::Contains and Condition.
var ErrUnresolved = errors.New("infra: cannot resolve")

// errNoValue is what a value evaluates to that is {"Ref": "AWS::NoValue"}
// (num takes it as the property's default; elsewhere it is unresolved).
var errNoValue = fmt.Errorf("%w: AWS::NoValue", ErrUnresolved)

// eval evaluates template values with parameter values p, recording each
// parameter it reads.
type eval struct {
	t     *Template
	p     Values
	read  map[string]bool
	depth int
}

// maxDepth bounds how deeply values and conditions nest (a condition
// naming itself).
const maxDepth = 64

// enter counts one level of nesting; leave it with e.depth--.
func (e *eval) enter() error {
	if e.depth++; e.depth > maxDepth {
		return fmt.Errorf("%w: nested more than %d deep", ErrUnresolved, maxDepth)
	}
	return nil
}

func (e *eval) ref(name string) (string, error) {
	if name == "AWS::NoValue" {
		return "", errNoValue
	}
	s, ok := e.p[name]
	if _, param := e.t.Parameters[name]; !param || !ok {
		return "", fmt.Errorf("%w: %s is not a parameter with a value", ErrUnresolved, name)
	}
	e.read[name] = true
	return s, nil
}

var subVar = regexp.MustCompile(`\$\{([^}]*)\}`)

// str resolves v to a string.
func (e *eval) str(v any) (string, error) {
	defer func() { e.depth-- }()
	if err := e.enter(); err != nil {
		return "", err
	}
	if s, ok := scalar(v); ok {
		return s, nil
	}
	m := mapOf(v)
	if name, ok := m["Ref"].(string); ok && len(m) == 1 {
		return e.ref(name)
	}
	if format, ok := m["Fn::Sub"].(string); ok && len(m) == 1 {
		var err error
		out := subVar.ReplaceAllStringFunc(format, func(x string) string {
			s, rerr := e.ref(x[2 : len(x)-1])
			err = cmp.Or(err, rerr)
			return s
		})
		return out, err
	}
	if args, ok := m["Fn::If"].([]any); ok && len(m) == 1 && len(args) == 3 {
		name, _ := args[0].(string)
		b, err := e.cond(map[string]any{"Condition": name})
		if err != nil {
			return "", err
		}
		if b {
			return e.str(args[1])
		}
		return e.str(args[2])
	}
	return "", fmt.Errorf("%w: %v", ErrUnresolved, v)
}

// num resolves v to an integer; def when it is AWS::NoValue or v is nil.
func (e *eval) num(v any, def int) (int, error) {
	if v == nil {
		return def, nil
	}
	s, err := e.str(v)
	if errors.Is(err, errNoValue) {
		return def, nil
	}
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%w: %q is not an integer", ErrUnresolved, s)
	}
	return n, nil
}

// dur resolves v to a Go duration.
func (e *eval) dur(v any) (time.Duration, error) {
	s, err := e.str(v)
	if err != nil {
		return 0, err
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%w: %q is not a Go duration", ErrUnresolved, s)
	}
	return d, nil
}

// cond evaluates a condition or rule assertion.
func (e *eval) cond(v any) (bool, error) {
	defer func() { e.depth-- }()
	if err := e.enter(); err != nil {
		return false, err
	}
	m := mapOf(v)
	if len(m) != 1 {
		return false, fmt.Errorf("%w: %v is not a condition", ErrUnresolved, v)
	}
	for fn, arg := range m {
		args, _ := arg.([]any)
		switch {
		case fn == "Condition":
			name, _ := arg.(string)
			c, ok := e.t.Conditions[name]
			if !ok {
				return false, fmt.Errorf("%w: no condition %v", ErrUnresolved, arg)
			}
			return e.cond(c)
		case fn == "Fn::Not" && len(args) == 1:
			b, err := e.cond(args[0])
			return !b, err
		case (fn == "Fn::And" || fn == "Fn::Or") && len(args) > 0:
			for _, a := range args {
				b, err := e.cond(a)
				if err != nil || b == (fn == "Fn::Or") {
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
		return false, fmt.Errorf("%w: %s %v", ErrUnresolved, fn, arg)
	}
	panic("unreachable")
}

// Violations returns the template Rules that reject parameter values p,
// sorted: none when CloudFormation would accept them.
func (t *Template) Violations(p Values) ([]string, error) {
	e := &eval{t: t, p: p, read: map[string]bool{}}
	return e.violations()
}

func (e *eval) violations() ([]string, error) {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(e.t.Rules)) {
		rule := e.t.Rules[name]
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

// String renders p's values of the parameters e read, for messages.
func (e *eval) String() string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(e.read)) {
		parts = append(parts, k+"="+e.p[k])
	}
	return strings.Join(parts, " ")
}
