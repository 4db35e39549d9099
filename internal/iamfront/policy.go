package iamfront

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/sendonce/sendonce/infra"
)

// Account is the account of the local test stack: moto_server's default
// account, which the queue URLs and ARNs it makes carry.
const Account = "123456789012"

// StackName is the local test stack's name (AWS::StackName).
const StackName = "sendonce-test"

// Stack is what a role's policy is resolved against: the template's
// parameter values and the physical names of the resources its policies
// name.
type Stack struct {
	// Region and Account are AWS::Region and AWS::AccountId.
	Region, Account string
	// Params are the parameter values; every other parameter takes its
	// Default.
	Params infra.Values
	// Refs maps a resource's logical ID to what !Ref returns for it (a
	// queue's URL, a secret's ARN); Arns to what !GetAtt X.Arn returns.
	Refs, Arns map[string]string
}

// Roles is template.full.yaml's functions and their roles.
type Roles struct {
	tpl *infra.Template
}

var (
	loadOnce  sync.Once
	loadRoles *Roles
	loadErr   error
)

// Load reads template.full.yaml (once a process) from the module root
// above the working directory. template.yaml, what deploys by default, is
// made from it with every other parameter at its default, so its roles
// are these roles at those values; the local runs need the others too
// (the HTTP provider, SNS, SES, an SSM redaction key).
func Load() (*Roles, error) {
	loadOnce.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			loadErr = err
			return
		}
		tpl, err := infra.Load(filepath.Join(root, "template.full.yaml"))
		if err != nil {
			loadErr = fmt.Errorf("iamfront: %w", err)
			return
		}
		loadRoles = &Roles{tpl: tpl}
	})
	return loadRoles, loadErr
}

// moduleRoot is the nearest directory above the working directory that
// holds go.mod and template.full.yaml.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("iamfront: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "template.full.yaml")); err == nil {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				return dir, nil
			}
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", errors.New("iamfront: no template.full.yaml above the working directory")
		}
		dir = up
	}
}

// FunctionResource returns the logical ID of the function named fn
// ("sender", "reconcileworker", "sesevents"): the AWS::Serverless::Function
// whose ID is fn and "Function", case aside.
func (r *Roles) FunctionResource(fn string) (string, bool) {
	for id, res := range r.tpl.Resources {
		if res["Type"] == "AWS::Serverless::Function" && strings.EqualFold(id, fn+"Function") {
			return id, true
		}
	}
	return "", false
}

// IsFunction reports whether fn names a function of the template
// (false too when the template cannot be read: Shared says why).
func IsFunction(fn string) bool {
	if fn == "" || strings.ContainsAny(fn, "/-.") {
		return false
	}
	r, err := Load()
	if err != nil {
		return true // Shared reports the error
	}
	_, ok := r.FunctionResource(fn)
	return ok
}

// Role returns the logical ID of function fnID's role (its Role:
// !GetAtt X.Arn).
func (r *Roles) Role(fnID string) (string, error) {
	props, _ := r.tpl.Resources[fnID]["Properties"].(map[string]any)
	if role := getAtt(props["Role"]); role != "" {
		return role, nil
	}
	return "", fmt.Errorf("iamfront: %s has no Role: !GetAtt <role>.Arn", fnID)
}

// Env returns function fnID's environment variables as the template
// writes them (long form).
func (r *Roles) Env(fnID string) map[string]any {
	props, _ := r.tpl.Resources[fnID]["Properties"].(map[string]any)
	env, _ := props["Environment"].(map[string]any)
	vars, _ := env["Variables"].(map[string]any)
	return vars
}

// StackFor returns the local stack function fnID runs in, read from the
// environment env the test gives it: each variable the template sets to
// a parameter (!Ref SmsProvider) sets that parameter; SENDONCE_TABLE the
// table name; a queue URL variable (!Ref NotificationQueue) that queue's
// URL and ARN; SENDONCE_REDACT_KEY_PARAM the generated secret (an ARN)
// or RedactKeyParam (an SSM name).
func (r *Roles) StackFor(fnID string, env map[string]string, region string) Stack {
	st := Stack{Region: region, Account: Account, Params: r.tpl.Defaults(), Refs: map[string]string{}, Arns: map[string]string{}}
	// What each variable means, as any function's environment declares
	// it (the tests give a function more than its own: the sender gets
	// the queue's URL too), the function's own first.
	decl := map[string]any{}
	for id, res := range r.tpl.Resources {
		if res["Type"] == "AWS::Serverless::Function" && id != fnID {
			maps.Copy(decl, r.Env(id))
		}
	}
	maps.Copy(decl, r.Env(fnID))
	for name, v := range decl {
		val, ok := env[name]
		if !ok {
			continue
		}
		switch {
		case name == "SENDONCE_TABLE":
			st.Params["TableName"] = val
		case name == "SENDONCE_REDACT_KEY_PARAM":
			if strings.HasPrefix(val, "arn:") || strings.HasPrefix(val, "secretsmanager:") {
				st.Params["RedactKeyParam"] = ""
				st.Refs["RedactKeySecret"] = secretARN(strings.TrimPrefix(val, "secretsmanager:"), region)
			} else {
				st.Params["RedactKeyParam"] = val
			}
		default:
			ref := refOf(v)
			switch {
			case ref == "":
			case r.tpl.Parameters[ref] != nil:
				st.Params[ref] = val
			case r.tpl.Resources[ref]["Type"] == "AWS::SQS::Queue":
				st.Refs[ref] = val
				st.Arns[ref] = queueARN(val, region)
			}
		}
	}
	return st
}

// Policy returns role's policy document (its inline policies' statements,
// in one document) as CloudFormation makes it for st, every intrinsic
// resolved. It fails on one it cannot resolve: a resource st does not
// name.
func (r *Roles) Policy(role string, st Stack) (map[string]any, error) {
	res := r.tpl.Resources[role]
	if res["Type"] != "AWS::IAM::Role" {
		return nil, fmt.Errorf("iamfront: %s is not an AWS::IAM::Role", role)
	}
	pseudo := infra.Pseudo{"AWS::Region": st.Region, "AWS::AccountId": st.Account, "AWS::Partition": "aws",
		"AWS::URLSuffix": "amazonaws.com", "AWS::StackName": StackName}
	props, _ := res["Properties"].(map[string]any)
	v, err := r.tpl.Resolve(props["Policies"], st.Params, pseudo)
	if err != nil {
		return nil, fmt.Errorf("iamfront: resolve %s: %w", role, err)
	}
	// Policies attached to the role by AWS::IAM::Policy resources.
	var statements []any
	pols, _ := v.([]any)
	for _, p := range pols {
		doc, _ := mapOf(p)["PolicyDocument"].(map[string]any)
		sts, _ := doc["Statement"].([]any)
		statements = append(statements, sts...)
	}
	for id, other := range r.tpl.Resources {
		if other["Type"] != "AWS::IAM::Policy" {
			continue
		}
		pp, _ := other["Properties"].(map[string]any)
		roles, _ := pp["Roles"].([]any)
		if !slices.ContainsFunc(roles, func(x any) bool { return refOf(x) == role }) {
			continue
		}
		if c, _ := other["Condition"].(string); c != "" {
			on, err := r.tpl.Resolve(map[string]any{"Fn::If": []any{c, true, false}}, st.Params, pseudo)
			if err != nil {
				return nil, fmt.Errorf("iamfront: resolve %s's condition: %w", id, err)
			}
			if on != true {
				continue
			}
		}
		d, err := r.tpl.Resolve(pp["PolicyDocument"], st.Params, pseudo)
		if err != nil {
			return nil, fmt.Errorf("iamfront: resolve %s: %w", id, err)
		}
		sts, _ := mapOf(d)["Statement"].([]any)
		statements = append(statements, sts...)
	}
	out, err := fill(statements, st)
	if err != nil {
		return nil, fmt.Errorf("iamfront: %s: %w", role, err)
	}
	return map[string]any{"Version": "2012-10-17", "Statement": out}, nil
}

// fill replaces the resources' !Ref and !GetAtt X.Arn in v with st's
// names for them.
func fill(v any, st Stack) (any, error) {
	switch x := v.(type) {
	case map[string]any:
		if len(x) == 1 {
			if id := getAtt(x); id != "" {
				if a, ok := st.Arns[id]; ok {
					return a, nil
				}
				// A resource no local call can reach (a log group: the
				// functions log to stdout under the emulator): a name of
				// its own that no request carries.
				return fmt.Sprintf("arn:aws:unreachable:%s:%s:%s", st.Region, st.Account, id), nil
			}
			if ref, ok := x["Ref"].(string); ok {
				if a, ok := st.Refs[ref]; ok {
					return a, nil
				}
				return fmt.Sprintf("arn:aws:unreachable:%s:%s:%s", st.Region, st.Account, ref), nil
			}
			for k := range x {
				if strings.HasPrefix(k, "Fn::") {
					return nil, fmt.Errorf("unresolved %s", k)
				}
			}
		}
		out := map[string]any{}
		for k, e := range x {
			f, err := fill(e, st)
			if err != nil {
				return nil, err
			}
			out[k] = f
		}
		return out, nil
	case []any:
		out := make([]any, 0, len(x))
		for _, e := range x {
			f, err := fill(e, st)
			if err != nil {
				return nil, err
			}
			out = append(out, f)
		}
		return out, nil
	}
	return v, nil
}

func mapOf(v any) map[string]any { m, _ := v.(map[string]any); return m }

// getAtt returns X of {"Fn::GetAtt": [X, "Arn"]} or "X.Arn".
func getAtt(v any) string {
	switch g := mapOf(v)["Fn::GetAtt"].(type) {
	case []any:
		if len(g) == 2 && g[1] == "Arn" {
			s, _ := g[0].(string)
			return s
		}
	case string:
		if id, ok := strings.CutSuffix(g, ".Arn"); ok {
			return id
		}
	}
	return ""
}

// refOf returns X of {"Ref": X}.
func refOf(v any) string { s, _ := mapOf(v)["Ref"].(string); return s }

// queueARN is the ARN of the queue at url (http://host/<account>/<name>).
func queueARN(url, region string) string {
	parts := strings.Split(strings.TrimRight(url, "/"), "/")
	if len(parts) < 2 {
		return url
	}
	return fmt.Sprintf("arn:aws:sqs:%s:%s:%s", region, parts[len(parts)-2], parts[len(parts)-1])
}

// secretARN is id as a Secrets Manager ARN (id itself when it is one).
func secretARN(id, region string) string {
	if strings.HasPrefix(id, "arn:") {
		return id
	}
	return fmt.Sprintf("arn:aws:secretsmanager:%s:%s:secret:%s", region, Account, id)
}

// Statements returns the Allow statements' grants of policy: each
// statement's Sid with each action it allows, "Sid action".
func Statements(policy map[string]any) []string {
	var out []string
	sts, _ := policy["Statement"].([]any)
	for _, s := range sts {
		m := mapOf(s)
		if m["Effect"] != "Allow" {
			continue
		}
		sid, _ := m["Sid"].(string)
		for _, a := range strs(m["Action"]) {
			out = append(out, sid+" "+a)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func strs(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		var out []string
		for _, e := range x {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// policyJSON is policy as the evaluator gets it.
func policyJSON(policy map[string]any) string {
	b, _ := json.Marshal(policy)
	return string(b)
}
