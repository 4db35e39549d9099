package simtest

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sendonce/sendonce/infra"
	"github.com/sendonce/sendonce/internal/lambdaenv"
	"github.com/sendonce/sendonce/internal/sendpath"
)

// stack is template.yaml as far as the simulation reads it (infra.Template,
// its intrinsic functions resolved as CloudFormation resolves them): the
// parameters' allowed values and defaults, and each function's timeout
// and environment. A function of the simulation reads its settings the
// way its main does (sendpath.Read over its environment), from the
// variables the template gives that function, resolved with the
// deployment's parameter values; a variable the template does not give a
// function, or that names a resource or a pseudo parameter, takes
// sendpath's default there too.
type stack struct {
	t        *infra.Template
	defaults infra.Values
	mu       sync.Mutex
	configs  map[string]fnConfig
}

// stackPaths are the templates, from the package directory (where go
// test runs): the full template, which keeps every setting as a
// parameter, where there is one, else template.yaml.
var stackPaths = []string{"../../template.full.yaml", "../../template.yaml"}

var (
	stackOnce sync.Once
	stackPath string
	theStack  *stack
	stackErr  error
)

func loadStack() *stack {
	stackOnce.Do(func() {
		var t *infra.Template
		for _, stackPath = range stackPaths {
			if t, stackErr = infra.Load(stackPath); !errors.Is(stackErr, fs.ErrNotExist) {
				break
			}
		}
		if stackErr == nil {
			theStack = &stack{t: t, defaults: t.Defaults()}
		}
	})
	if stackErr != nil {
		panic(fmt.Sprintf("simtest: read %s: %v", stackPath, stackErr))
	}
	return theStack
}

// allowed returns parameter name's AllowedValues, in seconds.
func (s *stack) allowed(name string) []time.Duration {
	var out []time.Duration
	if _, ok := s.t.Parameters[name]["AllowedValues"]; ok {
		for _, v := range s.t.Extremes(name) {
			if x, err := strconv.Atoi(v); err == nil {
				out = append(out, time.Duration(x)*time.Second)
			}
		}
	}
	if len(out) == 0 {
		panic(fmt.Sprintf("simtest: template.yaml: parameter %s has no AllowedValues", name))
	}
	return out
}

// params returns every parameter's Default, to be changed by the
// caller.
func (s *stack) params() map[string]string { return maps.Clone(s.defaults) }

// resolve returns v (a part of the template) resolved with params when it
// comes to a literal value, in its string form; ok is false for what
// names a resource or a pseudo parameter, which the simulation does not
// need.
func (s *stack) resolve(v any, params map[string]string) (string, bool) {
	r, err := s.t.Resolve(v, params, nil)
	if err != nil {
		panic(fmt.Sprintf("simtest: %s: %v", stackPath, err))
	}
	switch x := r.(type) {
	case string:
		return x, !strings.Contains(x, "${")
	case int, bool, float64:
		return fmt.Sprint(x), true
	}
	return "", false
}

// props returns function fn's Properties and the Globals' Function
// section.
func (s *stack) props(fn string) (own, global map[string]any) {
	own, _ = s.t.Resources[fn]["Properties"].(map[string]any)
	return own, s.t.Globals["Function"]
}

// env is function fn's environment (the Globals' variables, then its
// own) resolved with params: what the function's process sees.
func (s *stack) env(fn string, params map[string]string) map[string]string {
	out := map[string]string{}
	own, global := s.props(fn)
	for _, p := range []map[string]any{global, own} {
		env, _ := p["Environment"].(map[string]any)
		vars, _ := env["Variables"].(map[string]any)
		for k, v := range vars {
			if x, ok := s.resolve(v, params); ok {
				out[k] = x
			}
		}
	}
	return out
}

// timeout is function fn's Timeout (its own, else the Globals').
func (s *stack) timeout(fn string, params map[string]string) time.Duration {
	own, global := s.props(fn)
	for _, p := range []map[string]any{own, global} {
		if v, ok := s.resolve(p["Timeout"], params); ok {
			if x, err := strconv.Atoi(v); err == nil {
				return time.Duration(x) * time.Second
			}
		}
	}
	panic(fmt.Sprintf("simtest: template.yaml: %s has no timeout", fn))
}

// fnConfig is what one function built from a deployment reads.
type fnConfig struct {
	sendpath.Settings
	// timeout is the function's timeout: its invocations' deadline.
	timeout time.Duration
}

// config returns function fn's settings under params, read as its main
// reads them. It panics when the environment does not parse: the
// template's own values must.
//
// set names the parameters params sets to other values than their
// defaults: the config is read once per function and values of them.
func (s *stack) config(fn string, params map[string]string, set []string) fnConfig {
	var b strings.Builder
	b.WriteString(fn)
	for _, k := range set {
		b.WriteString("\x00" + k + "=" + params[k])
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.configs[b.String()]; ok {
		return c
	}
	c := s.readConfig(fn, params)
	if s.configs == nil {
		s.configs = map[string]fnConfig{}
	}
	s.configs[b.String()] = c
	return c
}

func (s *stack) readConfig(fn string, params map[string]string) fnConfig {
	env := s.env(fn, params)
	e := lambdaenv.New(func(k string) string { return env[k] })
	st := sendpath.Read(e)
	if err := e.Err(); err != nil {
		panic(fmt.Sprintf("simtest: %s's environment from template.yaml: %v", fn, err))
	}
	return fnConfig{Settings: st, timeout: s.timeout(fn, params)}
}
