package simtest

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sendonce/sendonce/infra"
	"github.com/sendonce/sendonce/internal/lambdaenv"
	"github.com/sendonce/sendonce/internal/sendpath"
)

// stackPath is the template the simulation reads, from the package
// directory (where go test runs): the full template, which keeps every
// setting as a parameter.
const stackPath = "../../template.full.yaml"

// stack is the template as far as the simulation reads it (infra.Template,
// its intrinsic functions resolved as CloudFormation resolves them): the
// parameters' allowed values and defaults, and each function's timeout
// and environment. A function of the simulation reads its settings the
// way its main does (sendpath.Read over its environment), from the
// variables the template gives that function, resolved with the
// deployment's parameter values; a variable the template does not give a
// function, or that names a resource or a pseudo parameter, takes
// sendpath's default there too.
type stack struct {
	t       *infra.Template
	mu      sync.Mutex
	configs map[string]fnConfig
}

// loadStack reads the template once for every run.
var loadStack = sync.OnceValue(func() *stack {
	t, err := infra.Load(stackPath)
	if err != nil {
		panic(fmt.Sprintf("simtest: read %s: %v", stackPath, err))
	}
	return &stack{t: t, configs: map[string]fnConfig{}}
})

// allowed returns parameter name's AllowedValues, in seconds, that keep
// holds for.
func (s *stack) allowed(name string, keep func(time.Duration) bool) []time.Duration {
	vals, _ := s.t.Parameters[name]["AllowedValues"].([]any)
	if len(vals) == 0 {
		panic(fmt.Sprintf("simtest: %s: parameter %s has no AllowedValues", stackPath, name))
	}
	var out []time.Duration
	for _, v := range s.t.Extremes(name) {
		if x, err := strconv.Atoi(v); err == nil && keep(time.Duration(x)*time.Second) {
			out = append(out, time.Duration(x)*time.Second)
		}
	}
	return out
}

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

// fnConfig is what one function built from a deployment reads.
type fnConfig struct {
	sendpath.Settings
	// timeout is the function's timeout: its invocations' deadline.
	timeout time.Duration
}

// config returns function fn's settings under params, read as its main
// reads them: from its environment (the Globals' variables, then its
// own) and its timeout (its own, else the Globals'), resolved with
// params. It panics when the environment does not parse: the template's
// own values must. Each function's config is read once per parameter
// values.
func (s *stack) config(fn string, params map[string]string) fnConfig {
	k := fmt.Sprint(fn, params) // fmt prints a map sorted by key
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.configs[k]; ok {
		return c
	}
	own, _ := s.t.Resources[fn]["Properties"].(map[string]any)
	global := s.t.Globals["Function"]
	env := map[string]string{}
	for _, p := range []map[string]any{global, own} {
		vars, _ := p["Environment"].(map[string]any)
		vars, _ = vars["Variables"].(map[string]any)
		for name, v := range vars {
			if x, ok := s.resolve(v, params); ok {
				env[name] = x
			}
		}
	}
	e := lambdaenv.New(func(k string) string { return env[k] })
	c := fnConfig{Settings: sendpath.Read(e)}
	if err := e.Err(); err != nil {
		panic(fmt.Sprintf("simtest: %s's environment from %s: %v", fn, stackPath, err))
	}
	for _, p := range []map[string]any{own, global} {
		if v, ok := s.resolve(p["Timeout"], params); ok {
			n, _ := strconv.Atoi(v)
			c.timeout = time.Duration(n) * time.Second
			break
		}
	}
	if c.timeout <= 0 {
		panic(fmt.Sprintf("simtest: %s: %s has no timeout", stackPath, fn))
	}
	s.configs[k] = c
	return c
}
