package iamfront

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
)

// Call is one authorization AWS makes for a request: an action on a
// resource with the request's condition keys. One API request may take
// several (a TransactWriteItems one per item; SSM's GetParameter of a
// SecureString a kms:Decrypt too).
type Call struct {
	Action   string
	Resource string
	// Context holds the request's condition keys and their values
	// (dynamodb:LeadingKeys: the partition key values it touches).
	Context map[string][]string
}

// Decision is the evaluator's answer for one Call.
type Decision struct {
	// Result is "Allowed", "ImplicitlyDenied" or "ExplicitlyDenied"
	// (IAM's policy evaluation logic).
	Result string
	// Allow names the Sids of the statements that allowed it.
	Allow []string
}

// Allowed reports whether the call is allowed.
func (d Decision) Allowed() bool { return d.Result == "Allowed" }

// Evaluator asks @cloud-copilot/iam-simulate (scripts/iam-eval.mjs, one
// long-running Node process) whether a policy allows a Call, and caches
// the answers: a test run asks the same question thousands of times (each
// ledger row's claim differs only in its key, but every key of a prefix
// matches alike), so only distinct questions cross the pipe.
type Evaluator struct {
	mu    sync.Mutex // the pipe: one question at a time
	cmd   *exec.Cmd
	in    io.WriteCloser
	out   *bufio.Scanner
	next  int
	cache sync.Map // question → Decision
	pats  sync.Map // policy → its LeadingKeys patterns
}

// patterns returns every value policy's conditions test
// dynamodb:LeadingKeys against.
func (e *Evaluator) patterns(policy string) []string {
	if p, ok := e.pats.Load(policy); ok {
		return p.([]string)
	}
	var doc struct {
		Statement []struct{ Condition map[string]map[string]any }
	}
	_ = json.Unmarshal([]byte(policy), &doc)
	var out []string
	for _, st := range doc.Statement {
		for _, kv := range st.Condition {
			out = append(out, strs(kv["dynamodb:LeadingKeys"])...)
		}
	}
	slices.Sort(out)
	out = slices.Compact(out)
	e.pats.Store(policy, out)
	return out
}

// globMatch reports whether s matches IAM's StringLike pattern p (* any
// run, ? one character); a pattern without either is an exact value.
func globMatch(p, s string) bool {
	if p == "" {
		return s == ""
	}
	switch p[0] {
	case '*':
		for i := 0; i <= len(s); i++ {
			if globMatch(p[1:], s[i:]) {
				return true
			}
		}
		return false
	case '?':
		return s != "" && globMatch(p[1:], s[1:])
	}
	return s != "" && s[0] == p[0] && globMatch(p[1:], s[1:])
}

// NewEvaluator starts the evaluator process from root (the module root,
// whose node_modules holds @cloud-copilot/iam-simulate: make deps).
func NewEvaluator(root string) (*Evaluator, error) {
	script := filepath.Join(root, "scripts", "iam-eval.mjs")
	if _, err := os.Stat(filepath.Join(root, "node_modules", "@cloud-copilot", "iam-simulate")); err != nil {
		return nil, fmt.Errorf("iamfront: the IAM evaluator is not installed (run make deps, or set %s=0 to run without IAM enforcement): %w", EnvEnforce, err)
	}
	cmd := exec.Command("node", script)
	cmd.Dir = root
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("iamfront: evaluator: %w", err)
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("iamfront: evaluator: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("iamfront: start the evaluator (node %s): %w", script, err)
	}
	sc := bufio.NewScanner(outPipe)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	return &Evaluator{cmd: cmd, in: in, out: sc}, nil
}

// Close stops the evaluator process.
func (e *Evaluator) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	_ = e.in.Close()
	return e.cmd.Wait()
}

// Evaluate returns whether policy allows c for principal (a role
// session's ARN).
func (e *Evaluator) Evaluate(principal, policy string, c Call) (Decision, error) {
	ctx := map[string]any{}
	for k, v := range c.Context {
		if k == "dynamodb:LeadingKeys" {
			ctx[k] = v // multi-valued: ForAllValues / ForAnyValue
		} else if len(v) == 1 {
			ctx[k] = v[0]
		} else {
			ctx[k] = v
		}
	}
	// The cache's key: the question, each LeadingKeys value replaced by
	// the policy's LeadingKeys patterns it matches. The template tests
	// that key only by string patterns (ForAllValues:StringLike), so two
	// values that match the same patterns get the same answer: the
	// simulator is asked once per role, action, resource and record
	// type, not once per ledger row.
	kctx := map[string]any{}
	for k, v := range ctx {
		kctx[k] = v
	}
	if lk, ok := c.Context["dynamodb:LeadingKeys"]; ok {
		pats := e.patterns(policy)
		sig := make([]string, len(lk))
		for i, v := range lk {
			for _, p := range pats {
				if globMatch(p, v) {
					sig[i] += p + "\x00"
				}
			}
		}
		slices.Sort(sig)
		kctx["dynamodb:LeadingKeys"] = slices.Compact(sig)
	}
	q, _ := json.Marshal(map[string]any{"principal": principal, "policy": json.RawMessage(policy),
		"action": c.Action, "resource": c.Resource, "context": kctx})
	if d, ok := e.cache.Load(string(q)); ok {
		return d.(Decision), nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.next++
	id := e.next
	line, _ := json.Marshal(map[string]any{"id": id, "principal": principal, "account": Account, "policy": json.RawMessage(policy),
		"action": c.Action, "resource": c.Resource, "context": ctx})
	if _, err := e.in.Write(append(line, '\n')); err != nil {
		return Decision{}, fmt.Errorf("iamfront: evaluator: %w", err)
	}
	if !e.out.Scan() {
		return Decision{}, fmt.Errorf("iamfront: evaluator exited: %v", e.out.Err())
	}
	var a struct {
		ID     int
		Result string
		Allow  []string
		Error  string
	}
	if err := json.Unmarshal(e.out.Bytes(), &a); err != nil {
		return Decision{}, fmt.Errorf("iamfront: evaluator answer %q: %w", e.out.Text(), err)
	}
	if a.ID != id {
		return Decision{}, fmt.Errorf("iamfront: evaluator answered %d to question %d: %s", a.ID, id, a.Error)
	}
	if a.Error != "" {
		return Decision{}, errors.New("iamfront: evaluator refused " + c.Action + " on " + c.Resource + ": " + a.Error)
	}
	d := Decision{Result: a.Result, Allow: a.Allow}
	e.cache.Store(string(q), d)
	return d, nil
}
