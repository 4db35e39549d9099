package simtest

import (
	"fmt"
	"maps"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/sendonce/sendonce/internal/lambdaenv"
	"github.com/sendonce/sendonce/internal/sendpath"
)

// stack is template.yaml as far as the simulation reads it: the
// parameters' allowed values and defaults, and each function's timeout
// and environment. A function of the simulation reads its settings the
// way its main does (sendpath.Read over its environment), from the
// variables the template gives that function, resolved with the
// deployment's parameter values; a variable the template does not give a
// function takes sendpath's default there too.
type stack struct {
	root *yaml.Node

	once     sync.Once
	defaults map[string]string
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
		var data []byte
		for _, stackPath = range stackPaths {
			if data, stackErr = os.ReadFile(stackPath); stackErr == nil {
				break
			}
		}
		if stackErr != nil {
			return
		}
		var doc yaml.Node
		if err := yaml.Unmarshal(data, &doc); err != nil {
			stackErr = err
			return
		}
		if len(doc.Content) == 0 {
			stackErr = fmt.Errorf("%s is empty", stackPath)
			return
		}
		theStack = &stack{root: doc.Content[0]}
	})
	if stackErr != nil {
		panic(fmt.Sprintf("simtest: read %s: %v", stackPath, stackErr))
	}
	return theStack
}

// get walks mapping keys from the root; nil when a key is missing.
func (s *stack) get(path ...string) *yaml.Node {
	n := s.root
	for _, k := range path {
		if n == nil || n.Kind != yaml.MappingNode {
			return nil
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == k {
				next = n.Content[i+1]
				break
			}
		}
		n = next
	}
	return n
}

// allowed returns parameter name's AllowedValues, in seconds.
func (s *stack) allowed(name string) []time.Duration {
	var out []time.Duration
	if n := s.get("Parameters", name, "AllowedValues"); n != nil {
		for _, v := range n.Content {
			if x, err := strconv.Atoi(v.Value); err == nil {
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
func (s *stack) params() map[string]string {
	s.once.Do(func() { s.defaults = s.readDefaults() })
	return maps.Clone(s.defaults)
}

func (s *stack) readDefaults() map[string]string {
	out := map[string]string{}
	if n := s.get("Parameters"); n != nil {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if d := s.get("Parameters", n.Content[i].Value, "Default"); d != nil && d.Kind == yaml.ScalarNode {
				out[n.Content[i].Value] = d.Value
			}
		}
	}
	return out
}

var subRef = regexp.MustCompile(`\$\{([A-Za-z0-9:.]+)\}`)

// resolve evaluates a literal, !Ref or !Sub (short or long form) with
// params; ok is false for anything else (other intrinsics, pseudo
// parameters), which the simulation does not need.
func resolve(n *yaml.Node, params map[string]string) (string, bool) {
	if n.Kind == yaml.MappingNode && len(n.Content) == 2 && n.Content[1].Kind == yaml.ScalarNode {
		switch n.Content[0].Value {
		case "Ref":
			v, ok := params[n.Content[1].Value]
			return v, ok
		case "Fn::Sub":
			return sub(n.Content[1].Value, params)
		}
		return "", false
	}
	if n.Kind != yaml.ScalarNode {
		return "", false
	}
	switch n.Tag {
	case "!Ref":
		v, ok := params[n.Value]
		return v, ok
	case "!Sub":
		return sub(n.Value, params)
	case "", "!!str", "!!int", "!!bool", "!!float":
		return n.Value, true
	}
	return "", false
}

func sub(s string, params map[string]string) (string, bool) {
	ok := true
	out := subRef.ReplaceAllStringFunc(s, func(m string) string {
		v, found := params[m[2:len(m)-1]]
		ok = ok && found
		return v
	})
	return out, ok
}

// env is function fn's environment (the Globals' variables, then its
// own) resolved with params: what the function's process sees.
func (s *stack) env(fn string, params map[string]string) map[string]string {
	out := map[string]string{}
	for _, vars := range []*yaml.Node{s.get("Globals", "Function", "Environment", "Variables"), s.get("Resources", fn, "Properties", "Environment", "Variables")} {
		if vars == nil || vars.Kind != yaml.MappingNode {
			continue
		}
		for i := 0; i+1 < len(vars.Content); i += 2 {
			if v, ok := resolve(vars.Content[i+1], params); ok {
				out[vars.Content[i].Value] = v
			}
		}
	}
	return out
}

// timeout is function fn's Timeout (its own, else the Globals').
func (s *stack) timeout(fn string, params map[string]string) time.Duration {
	for _, n := range []*yaml.Node{s.get("Resources", fn, "Properties", "Timeout"), s.get("Globals", "Function", "Timeout")} {
		if n == nil {
			continue
		}
		if v, ok := resolve(n, params); ok {
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
	// env is the environment it reads, for the trace.
	env map[string]string
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
	return fnConfig{Settings: st, timeout: s.timeout(fn, params), env: env}
}
