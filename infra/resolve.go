package infra

import (
	"fmt"
	"maps"
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
// function (Fn::Select, ...) stays as it is. v itself is not changed. Its error wraps ErrUnresolved: a condition it cannot
// evaluate, or an Fn::If of another shape.
func (t *Template) Resolve(v any, p Values, pseudo Pseudo) (any, error) {
	r := &resolver{eval: eval{t: t, p: p}, pseudo: pseudo}
	out, err := r.value(v)
	if err != nil || isNoValue(out) {
		return nil, err
	}
	return out, nil
}

type resolver struct {
	eval
	pseudo Pseudo
}

func isNoValue(v any) bool { return refName(v) == "AWS::NoValue" }

// param returns the value of a pseudo parameter or a parameter.
func (r *resolver) param(name string) (string, bool) {
	if s, ok := r.pseudo[name]; ok {
		return s, true
	}
	s, ok := r.p[name]
	return s, ok && r.t.Parameters[name] != nil
}

func (r *resolver) value(v any) (any, error) {
	switch x := v.(type) {
	case []any:
		out := make([]any, 0, len(x))
		for _, e := range x {
			rv, err := r.value(e)
			if err != nil {
				return nil, err
			}
			if !isNoValue(rv) {
				out = append(out, rv)
			}
		}
		return out, nil
	case map[string]any:
		if len(x) == 1 {
			for fn, arg := range x {
				switch fn {
				case "Fn::If":
					args, _ := arg.([]any)
					if len(args) != 3 {
						return nil, fmt.Errorf("%w: Fn::If %v", ErrUnresolved, arg)
					}
					name, _ := args[0].(string)
					b, err := r.cond(map[string]any{"Condition": name})
					if err != nil {
						return nil, err
					}
					if b {
						return r.value(args[1])
					}
					return r.value(args[2])
				case "Ref":
					name, _ := arg.(string)
					if s, ok := r.param(name); ok {
						return s, nil
					}
					return maps.Clone(x), nil // a resource, or AWS::NoValue
				case "Fn::Sub":
					return r.sub(arg)
				}
			}
		}
		out := make(map[string]any, len(x))
		for k, e := range x {
			rv, err := r.value(e)
			if err != nil {
				return nil, err
			}
			if !isNoValue(rv) {
				out[k] = rv
			}
		}
		return out, nil
	}
	return v, nil
}

func (r *resolver) sub(arg any) (any, error) {
	text, ok := arg.(string)
	vars := map[string]any{}
	if !ok {
		args, _ := arg.([]any)
		if len(args) != 2 {
			return nil, fmt.Errorf("%w: Fn::Sub %v", ErrUnresolved, arg)
		}
		text, _ = args[0].(string)
		rv, err := r.value(args[1])
		if err != nil {
			return nil, err
		}
		vars = mapOf(rv)
	}
	return subVar.ReplaceAllStringFunc(text, func(m string) string {
		name := m[2 : len(m)-1]
		if v, ok := vars[name]; ok {
			if s, ok := scalar(v); ok {
				return s
			}
			return m
		}
		if s, ok := r.param(name); ok {
			return s
		}
		return m
	}), nil
}
