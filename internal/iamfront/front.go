// Package iamfront enforces the template's IAM roles on every AWS call a
// function makes in the local runs: an HTTP front between the functions
// (their real bootstraps under the Lambda emulator, package rie) and the
// local services (DynamoDB Local, directly or through package ddbfront;
// moto_server), which answers a call the function's role does not allow
// as AWS answers it, so that the product's own handling of a denial runs.
//
// As on AWS, the caller is known by its credentials: Register gives each
// function instance an access key of its own, tied to its role
// (template.full.yaml's role of that function, its intrinsics resolved
// for the local test stack: the function's environment names the table,
// the queues, the providers and the redaction key). The front reads the
// access key from the request's SigV4 Authorization header and the
// service from its credential scope, works out the authorizations AWS
// makes for the request (Calls), and asks @cloud-copilot/iam-simulate
// (AGPL-3.0-or-later, a test-time tool that never enters a build, a
// package or a deployed function) whether the role's policy allows each,
// following IAM's policy evaluation logic (an explicit Deny wins; without
// an Allow, the request is implicitly denied: IAM User Guide, "Policy
// evaluation logic"). A request signed with any other key (the tests'
// own set-up, as an administrator) passes unchecked.
//
// A denied request is answered in the service's own protocol (Deny), and
// recorded: Principal.Denied lists what the function was refused, and
// rie.Instance.Close fails with it, so a test whose function was denied a
// call fails and names the function and the call. With SENDONCE_TEST_IAM_REPORT
// set to a directory, each process writes there what every role was asked
// and allowed (make iam-check sums them up: cmd/iamreport).
//
// SENDONCE_TEST_IAM=0 turns enforcement off.
package iamfront

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// EnvEnforce turns enforcement off when "0".
const EnvEnforce = "SENDONCE_TEST_IAM"

// EnvReport names the directory each process writes its figures to.
const EnvReport = "SENDONCE_TEST_IAM_REPORT"

// Enabled reports whether enforcement is on (SENDONCE_TEST_IAM is not "0").
func Enabled() bool { return os.Getenv(EnvEnforce) != "0" }

// endpointVars maps each AWS_ENDPOINT_URL_<SERVICE> variable to the
// service's SigV4 signing name.
var endpointVars = map[string]string{
	"AWS_ENDPOINT_URL_DYNAMODB": "dynamodb", "AWS_ENDPOINT_URL_SQS": "sqs", "AWS_ENDPOINT_URL_SNS": "sns",
	"AWS_ENDPOINT_URL_SSM": "ssm", "AWS_ENDPOINT_URL_SECRETS_MANAGER": "secretsmanager",
	"AWS_ENDPOINT_URL_SESV2": "ses", "AWS_ENDPOINT_URL_LAMBDA": "lambda", "AWS_ENDPOINT_URL_STS": "sts",
}

// Principal is one registered function instance.
type Principal struct {
	// Function is the function's name ("sender"), Role its role's
	// logical ID ("SenderRole").
	Function, Role string
	// AccessKey is the access key it signs with.
	AccessKey string
	// Policy is its role's policy, resolved for its stack.
	Policy map[string]any

	policy    string
	session   string
	upstreams map[string]string // signing name → the endpoint it was given ("" key: AWS_ENDPOINT_URL)
	// origKey is the access key env gave: the upstream sees it, as
	// before (DynamoDB Local keeps a database per access key, moto_server
	// an account).
	origKey string

	mu     sync.Mutex
	denied []string
}

// Denied returns the calls the principal was refused, one line each.
func (p *Principal) Denied() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.denied)
}

// Front is the enforcing front (package doc).
type Front struct {
	roles *Roles
	eval  *Evaluator
	url   string
	proxy *httputil.ReverseProxy

	keys  sync.Map // access key → *Principal
	count atomic.Int64

	mu    sync.Mutex
	stats map[string]*RoleStats // role → figures
}

// RoleStats is what one role was asked and allowed in a process.
type RoleStats struct {
	// Functions are the functions that ran with the role.
	Functions []string
	// Evaluated counts the authorizations asked; Denied lists the denied
	// ones ("function: action on resource (condition keys)") with their
	// counts.
	Evaluated int
	Denied    map[string]int
	// Grants are the role's grants ("Sid action") in the policies it
	// was resolved to; Used those an allowed call went through.
	Grants, Used map[string]bool
}

var (
	sharedOnce sync.Once
	shared     *Front
	sharedErr  error
)

// Shared returns the process's front, started on first use.
func Shared() (*Front, error) {
	sharedOnce.Do(func() { shared, sharedErr = start() })
	return shared, sharedErr
}

func start() (*Front, error) {
	roles, err := Load()
	if err != nil {
		return nil, err
	}
	root, _ := moduleRoot()
	ev, err := NewEvaluator(root)
	if err != nil {
		return nil, err
	}
	// The simulator loads each service's actions on its first question
	// about it (about 1 s on a quiet machine, far longer on a loaded one):
	// ask one of each here, before any function starts, so that no
	// function's first call waits for it inside its invocation's
	// deadline.
	warm := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"*","Resource":"*"}]}`
	for _, c := range []Call{{Action: "dynamodb:GetItem", Resource: "arn:aws:dynamodb:us-east-1:" + Account + ":table/t"},
		{Action: "sqs:SendMessage", Resource: "arn:aws:sqs:us-east-1:" + Account + ":q"}, {Action: "sns:Publish", Resource: "*"},
		{Action: "ssm:GetParameter", Resource: "arn:aws:ssm:us-east-1:" + Account + ":parameter/p"},
		{Action: "secretsmanager:GetSecretValue", Resource: "arn:aws:secretsmanager:us-east-1:" + Account + ":secret:s"},
		{Action: "ses:SendEmail", Resource: "arn:aws:ses:us-east-1:" + Account + ":identity/a@example.com"},
		{Action: "lambda:InvokeFunction", Resource: "arn:aws:lambda:us-east-1:" + Account + ":function:f"}} {
		if _, err := ev.Evaluate("arn:aws:sts::"+Account+":assumed-role/warm/warm", warm, c); err != nil {
			_ = ev.Close()
			return nil, err
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("iamfront: listen: %w", err)
	}
	f := &Front{roles: roles, eval: ev, url: "http://" + ln.Addr().String(), stats: map[string]*RoleStats{}}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	f.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			u, _ := url.Parse(pr.In.Header.Get(upstreamHeader))
			pr.SetURL(u)
			pr.Out.Host = pr.In.Host // as the client signed it
			pr.Out.Header.Del(upstreamHeader)
		},
		Transport: tr,
		// A lost connection upstream (a chaos front hanging up) is lost
		// here too.
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, _ error) { hangUp(w) },
	}
	srv := &http.Server{Handler: f, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return f, nil
}

const upstreamHeader = "X-Sendonce-Iam-Upstream"

// Register ties a new access key to function fn ("sender") and returns
// the environment the function is to run with: env with that key and
// every AWS_ENDPOINT_URL_<SERVICE> it sets pointing at the front, which
// forwards each call to the endpoint env gave. fn may be empty or not a
// template function (a test's own bootstrap): then env comes back as it
// is and p is nil.
func (f *Front) Register(fn string, env map[string]string) (out map[string]string, p *Principal, err error) {
	fnID, ok := f.roles.FunctionResource(fn)
	if !ok {
		return env, nil, nil
	}
	role, err := f.roles.Role(fnID)
	if err != nil {
		return nil, nil, err
	}
	region := cmpOr(env["AWS_REGION"], "us-east-1")
	stack := f.roles.StackFor(fnID, env, region)
	policy, err := f.roles.Policy(role, stack)
	if err != nil {
		return nil, nil, err
	}
	label := role
	if fn == "reconciler" && env["SENDONCE_RECONCILE_QUEUE_URL"] == "" {
		// The library's inline reconciler (no units queue: it settles
		// the rows itself, functions/reconciler), which the template
		// never deploys: it does the finder's and the workers' work, so
		// it is held to both roles together, what a deployment of it
		// would grant.
		worker, err := f.roles.Policy("ReconcileWorkerRole", stack)
		if err != nil {
			return nil, nil, err
		}
		policy = map[string]any{"Version": "2012-10-17",
			"Statement": append(slices.Clone(policy["Statement"].([]any)), worker["Statement"].([]any)...)}
		label = role + "+ReconcileWorkerRole"
	}
	role = label
	n := f.count.Add(1)
	p = &Principal{Function: fn, Role: role, Policy: policy, policy: policyJSON(policy),
		AccessKey: fmt.Sprintf("ASIA%sIAM%06d", strings.ToUpper(fn), n),
		session:   fmt.Sprintf("arn:aws:sts::%s:assumed-role/%s-%s/%s-%s", Account, StackName, role, StackName, fn),
		upstreams: map[string]string{}, origKey: cmpOr(env["AWS_ACCESS_KEY_ID"], "test")}
	out = map[string]string{}
	for k, v := range env {
		out[k] = v
	}
	for v, svc := range endpointVars {
		if u := env[v]; u != "" {
			p.upstreams[svc] = u
			out[v] = f.url
		}
	}
	if u := env["AWS_ENDPOINT_URL"]; u != "" {
		p.upstreams[""] = u
		out["AWS_ENDPOINT_URL"] = f.url
	}
	out["AWS_ACCESS_KEY_ID"] = p.AccessKey
	out["AWS_SECRET_ACCESS_KEY"] = "iamfront-secret"
	delete(out, "AWS_SESSION_TOKEN")
	f.keys.Store(p.AccessKey, p)

	f.mu.Lock()
	st := f.roleStats(role)
	if !slices.Contains(st.Functions, fn) {
		st.Functions = append(st.Functions, fn)
	}
	for _, g := range Statements(policy) {
		st.Grants[g] = true
	}
	f.mu.Unlock()
	return out, p, nil
}

// Unregister forgets p's key and writes the process's figures
// (SENDONCE_TEST_IAM_REPORT).
func (f *Front) Unregister(p *Principal) {
	if p == nil {
		return
	}
	f.keys.Delete(p.AccessKey)
	f.WriteReport()
}

func (f *Front) roleStats(role string) *RoleStats {
	st := f.stats[role]
	if st == nil {
		st = &RoleStats{Denied: map[string]int{}, Grants: map[string]bool{}, Used: map[string]bool{}}
		f.stats[role] = st
	}
	return st
}

// Stats returns a copy of the figures of every role so far.
func (f *Front) Stats() map[string]RoleStats {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]RoleStats{}
	for r, s := range f.stats {
		c := RoleStats{Functions: slices.Clone(s.Functions), Evaluated: s.Evaluated, Denied: map[string]int{}, Grants: map[string]bool{}, Used: map[string]bool{}}
		for k, v := range s.Denied {
			c.Denied[k] = v
		}
		for k := range s.Grants {
			c.Grants[k] = true
		}
		for k := range s.Used {
			c.Used[k] = true
		}
		out[r] = c
	}
	return out
}

var reportMu sync.Mutex

// WriteReport writes the process's figures to SENDONCE_TEST_IAM_REPORT/<pid>.json
// (nothing when it is unset).
func (f *Front) WriteReport() {
	dir := os.Getenv(EnvReport)
	if dir == "" {
		return
	}
	reportMu.Lock()
	defer reportMu.Unlock()
	b, _ := json.Marshal(f.Stats())
	path := filepath.Join(dir, strconv.Itoa(os.Getpid())+".json")
	if err := os.WriteFile(path+".tmp", b, 0o644); err == nil {
		_ = os.Rename(path+".tmp", path)
	}
}

var credential = regexp.MustCompile(`Credential=([^/,\s]+)/\d+/([^/]+)/([^/]+)/aws4_request`)

func (f *Front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m := credential.FindStringSubmatch(r.Header.Get("Authorization"))
	var p *Principal
	if m != nil {
		if v, ok := f.keys.Load(m[1]); ok {
			p = v.(*Principal)
		}
	}
	if p == nil {
		// Not a registered function's key: nothing to forward to.
		http.Error(w, "iamfront: request not signed by a registered function", http.StatusForbidden)
		return
	}
	svc, region := m[3], m[2]
	up := p.upstreams[svc]
	if up == "" {
		up = p.upstreams[""]
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	req := Request{Service: svc, Region: region, Header: r.Header, Method: r.Method, Path: r.URL.Path, Body: body}
	calls, err := Calls(req)
	if err == nil {
		for _, c := range calls {
			var d Decision
			if d, err = f.eval.Evaluate(p.session, p.policy, c); err != nil {
				break
			}
			if !d.Allowed() {
				f.deny(w, p, req, c, d)
				return
			}
			f.allowed(p, c, d)
		}
	}
	if err != nil {
		// A question the evaluator refused (a malformed request): fail
		// the test loudly rather than let it through.
		f.record(p, fmt.Sprintf("%s: %s (%v)", p.Function, req.Operation(), err))
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	r.Header.Set(upstreamHeader, up)
	r.Header.Set("Authorization", strings.Replace(r.Header.Get("Authorization"), "Credential="+p.AccessKey+"/", "Credential="+p.origKey+"/", 1))
	f.proxy.ServeHTTP(w, r)
}

func (f *Front) allowed(p *Principal, c Call, d Decision) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.roleStats(p.Role)
	st.Evaluated++
	for _, sid := range d.Allow {
		st.Used[sid+" "+c.Action] = true
		// A wildcard action in the grant ("sqs:*") counts as used too.
		for g := range st.Grants {
			if sidOf, act, _ := strings.Cut(g, " "); sidOf == sid && strings.Contains(act, "*") && matchAction(act, c.Action) {
				st.Used[g] = true
			}
		}
	}
}

func matchAction(pattern, action string) bool {
	re := "^" + strings.ReplaceAll(regexp.QuoteMeta(pattern), `\*`, ".*") + "$"
	ok, _ := regexp.MatchString("(?i)"+re, action)
	return ok
}

func (f *Front) record(p *Principal, line string) {
	p.mu.Lock()
	if len(p.denied) < 50 {
		p.denied = append(p.denied, line)
	}
	p.mu.Unlock()
	f.mu.Lock()
	st := f.roleStats(p.Role)
	st.Evaluated++
	st.Denied[keyValues.ReplaceAllString(line, "$1…")]++ // one line per call and record type, not per key
	f.mu.Unlock()
	f.WriteReport()
}

// keyValues matches a LeadingKeys value after its record type's prefix
// ("v1_", "tpl#", "cb#").
var keyValues = regexp.MustCompile(`((?:LeadingKeys=|,)[a-z0-9]+[#_])[^,) ]+`)

// Describe is one line naming a call: "dynamodb:PutItem on
// arn:…:table/t (dynamodb:LeadingKeys=v1_…)".
func (c Call) Describe() string {
	s := c.Action + " on " + c.Resource
	if len(c.Context) > 0 {
		var kv []string
		for k, v := range c.Context {
			kv = append(kv, k+"="+strings.Join(v, ","))
		}
		slices.Sort(kv)
		s += " (" + strings.Join(kv, " ") + ")"
	}
	return s
}

// deny answers r as AWS answers a request the caller's policies do not
// allow, in r's service's protocol, and records it.
func (f *Front) deny(w http.ResponseWriter, p *Principal, r Request, c Call, d Decision) {
	why := "no identity-based policy allows the " + c.Action + " action"
	if d.Result == "ExplicitlyDenied" {
		why = "an explicit deny in an identity-based policy"
	}
	msg := fmt.Sprintf("User: %s is not authorized to perform: %s on resource: %s because %s", p.session, c.Action, c.Resource, why)
	f.record(p, fmt.Sprintf("%s (%s): %s denied %s", p.Function, p.Role, r.Operation(), c.Describe()))
	Deny(w, r.Service, msg)
}

// Deny writes service's AccessDenied answer carrying msg:
//
//   - DynamoDB (JSON 1.0): HTTP 400, __type
//     com.amazonaws.dynamodb.v20120810#AccessDeniedException (DynamoDB
//     Developer Guide, "Error handling with DynamoDB": the error
//     components, and AccessDeniedException among the 400s).
//   - The other JSON protocols (SQS, SSM, Secrets Manager): HTTP 400,
//     __type AccessDeniedException (each API Reference's "Common
//     Errors": AccessDeniedException, HTTP status code 400); SQS's JSON
//     protocol also sends x-amzn-query-error: AccessDenied;Sender for its
//     query-compatible clients.
//   - SNS (query protocol, XML): HTTP 403, Code AuthorizationError (SNS
//     API Reference, Publish: "AuthorizationError ... HTTP Status Code:
//     403").
//   - SESv2 and Lambda (REST JSON): HTTP 403, X-Amzn-ErrorType
//     AccessDeniedException.
func Deny(w http.ResponseWriter, service, msg string) {
	h := w.Header()
	h.Set("X-Amzn-Requestid", "iamfront-denied")
	switch service {
	case "dynamodb":
		h.Set("Content-Type", "application/x-amz-json-1.0")
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]string{"__type": "com.amazonaws.dynamodb.v20120810#AccessDeniedException", "Message": msg})
	case "sqs", "ssm", "secretsmanager":
		h.Set("Content-Type", "application/x-amz-json-1.1")
		if service == "sqs" {
			h.Set("Content-Type", "application/x-amz-json-1.0")
			h.Set("X-Amzn-Query-Error", "AccessDenied;Sender")
		}
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]string{"__type": "AccessDeniedException", "message": msg})
	case "sns":
		h.Set("Content-Type", "text/xml")
		w.WriteHeader(http.StatusForbidden)
		var b strings.Builder
		b.WriteString(`<ErrorResponse xmlns="http://sns.amazonaws.com/doc/2010-03-31/"><Error><Type>Sender</Type><Code>AuthorizationError</Code><Message>`)
		_ = xmlEscape(&b, msg)
		b.WriteString(`</Message></Error><RequestId>iamfront-denied</RequestId></ErrorResponse>`)
		_, _ = io.WriteString(w, b.String())
	default:
		h.Set("Content-Type", "application/json")
		h.Set("X-Amzn-Errortype", "AccessDeniedException")
		w.WriteHeader(http.StatusForbidden)
		_ = json.NewEncoder(w).Encode(map[string]string{"message": msg, "Message": msg})
	}
}

func xmlEscape(b *strings.Builder, s string) error {
	r := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&apos;")
	_, err := b.WriteString(r.Replace(s))
	return err
}

// hangUp closes the client's connection without an answer.
func hangUp(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if c, _, err := hj.Hijack(); err == nil {
			_ = c.Close()
			return
		}
	}
	w.WriteHeader(http.StatusBadGateway)
}
