// Package rie runs a function's real `bootstrap` binary under the AWS Lambda
// Runtime Interface Emulator (aws-lambda-rie), so tests exercise the
// lambda.Start wiring, environment configuration and JSON (un)marshalling
// exactly as Lambda does.
//
// In tests, use Build and Start:
//
//	bootstrap := rie.Build(t, "sender")          // ./functions/sender, built once per test binary
//	fn := rie.Start(t, bootstrap, map[string]string{"SENDONCE_TABLE": table})
//	out, err := fn.Invoke(ctx, payload)          // err is an *InvokeError for a handler error
//
// The emulator binary comes from SENDONCE_TEST_RIE, which `make test`
// sets after installing it into the project's bin/ directory.
//
// The emulator starts bootstrap in a process group of its own, so stopping
// the emulator alone would leave the function running. Close (and the
// cleanup Start registers) kills the emulator and every process it started,
// and checks that none is left. If the test process dies without running
// its cleanups (a go test timeout), the kernel kills the emulator (Linux
// parent-death signal); its function then exits as soon as it next talks to
// the Runtime API, so only a handler stuck at that moment outlives it, until
// the handler returns.
//
// The emulator serves one invocation at a time; an Instance serialises
// Invoke calls. To model several concurrent Lambda instances, start several
// Instances.
package rie

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sendonce/sendonce/internal/iamfront"
	"github.com/sendonce/sendonce/internal/testsupport"
)

// BinaryEnv names the environment variable holding the path of the
// aws-lambda-rie binary.
const BinaryEnv = "SENDONCE_TEST_RIE"

// InvocationsPath is the emulator's invoke endpoint.
const InvocationsPath = "/2015-03-31/functions/function/invocations"

// Defaults applied by Launch when Config leaves a field empty.
const (
	DefaultFunctionName = "sendonce-test"
	DefaultTimeout      = 30 * time.Second
)

// readyTimeout bounds the wait for the emulator to listen.
const readyTimeout = 10 * time.Second

// ErrNoBinary is returned when no aws-lambda-rie binary is configured.
var ErrNoBinary = errors.New("rie: " + BinaryEnv + " is not set: run `make test`, or `make rie` and export " +
	BinaryEnv + "=$PWD/bin/aws-lambda-rie")

// Config describes one emulated function instance.
type Config struct {
	// RIE is the path of the aws-lambda-rie binary. Empty means the value
	// of SENDONCE_TEST_RIE.
	RIE string
	// Bootstrap is the path of the function's linux bootstrap binary.
	Bootstrap string
	// FunctionName becomes AWS_LAMBDA_FUNCTION_NAME. Empty means
	// DefaultFunctionName.
	FunctionName string
	// Timeout becomes AWS_LAMBDA_FUNCTION_TIMEOUT (whole seconds). Zero
	// means DefaultTimeout.
	Timeout time.Duration
	// Env is the function's environment. It is added to a small base
	// (PATH, HOME, TMPDIR, dummy AWS credentials and AWS_REGION=us-east-1)
	// and overrides it; the caller's own environment is not passed on, so a
	// developer's AWS profile cannot leak into a test.
	Env map[string]string
}

// Instance is one running emulator with its function. Its methods are safe
// for concurrent use; invocations are serialised.
type Instance struct {
	cmd    *exec.Cmd
	url    string
	client *http.Client
	stdout *testsupport.Buffer
	stderr *testsupport.Buffer
	waited chan struct{}

	invokeMu sync.Mutex

	closeOnce sync.Once
	closeErr  error

	// The IAM front the function's calls go through, and its principal
	// there (nil when the function is not the template's).
	front     *iamfront.Front
	principal *iamfront.Principal

	mu       sync.Mutex
	seen     map[procID]struct{} // every descendant ever observed
	timeouts []time.Time         // when an invocation timed out (TimedOut)
}

// Launch starts aws-lambda-rie with cfg.Bootstrap on two free loopback
// ports and waits until it listens. The caller must call Close.
//
// It returns ErrNoBinary when no emulator binary is configured, and an
// error naming the cause (and the emulator's output) when the binary or
// bootstrap is missing or the emulator does not come up in time.
func Launch(ctx context.Context, cfg Config) (*Instance, error) {
	if cfg.RIE = cmp.Or(cfg.RIE, os.Getenv(BinaryEnv)); cfg.RIE == "" {
		return nil, ErrNoBinary
	}
	for _, p := range []struct{ what, path string }{{"emulator", cfg.RIE}, {"bootstrap", cfg.Bootstrap}} {
		st, err := os.Stat(p.path)
		if err != nil {
			return nil, fmt.Errorf("rie: launch: %s: %w", p.what, err)
		}
		if st.IsDir() || st.Mode()&0o111 == 0 {
			return nil, fmt.Errorf("rie: launch: %s %s is not an executable file", p.what, p.path)
		}
	}
	cfg.FunctionName = cmp.Or(cfg.FunctionName, DefaultFunctionName)
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	// IAM enforced: a function of the template signs with an access key
	// of its own, and its calls go through the front that evaluates them
	// against its role (package iamfront).
	var front *iamfront.Front
	var principal *iamfront.Principal
	if fn := functionOf(cfg); fn != "" && iamfront.Enabled() {
		var err error
		if front, err = iamfront.Shared(); err != nil {
			return nil, fmt.Errorf("rie: launch %s: %w", fn, err)
		}
		if cfg.Env, principal, err = front.Register(fn, cfg.Env); err != nil {
			return nil, fmt.Errorf("rie: launch %s: %w", fn, err)
		}
	}

	// Two free ports are picked and released before the emulator binds
	// them, so another process may take one in between: then the emulator
	// exits at once and Launch tries again with new ports.
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		inst, err := launchOnce(ctx, cfg)
		if err == nil {
			inst.front, inst.principal = front, principal
			return inst, nil
		}
		lastErr = err
		if !errors.Is(err, errExitedEarly) || ctx.Err() != nil {
			break
		}
	}
	if front != nil {
		front.Unregister(principal)
	}
	return nil, lastErr
}

var errExitedEarly = errors.New("emulator exited before it listened")

func launchOnce(ctx context.Context, cfg Config) (*Instance, error) {
	ports, err := freePorts(2)
	if err != nil {
		return nil, fmt.Errorf("rie: launch: %w", err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	cmd := exec.Command(cfg.RIE,
		"--runtime-interface-emulator-address", addr,
		"--runtime-api-address", fmt.Sprintf("127.0.0.1:%d", ports[1]),
		cfg.Bootstrap)
	cmd.Env = environ(cfg)
	cmd.SysProcAttr = sysProcAttr()
	// A function process that escaped Close would hold the output pipes
	// open; do not let it block Wait for ever.
	cmd.WaitDelay = 2 * time.Second
	inst := &Instance{
		cmd:    cmd,
		url:    "http://" + addr + InvocationsPath,
		client: &http.Client{},
		stdout: &testsupport.Buffer{},
		stderr: &testsupport.Buffer{},
		waited: make(chan struct{}),
		seen:   map[procID]struct{}{},
	}
	cmd.Stdout = inst.stdout
	cmd.Stderr = inst.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("rie: launch %s: %w", cfg.RIE, err)
	}
	go func() {
		_ = cmd.Wait()
		close(inst.waited)
	}()

	deadline := time.Now().Add(readyTimeout)
	for {
		if listening(cmd.Process.Pid, ports[0]) {
			return inst, nil
		}
		select {
		case <-inst.waited:
			_ = inst.Close()
			return nil, fmt.Errorf("rie: launch on %s: %w; output:\n%s", addr, errExitedEarly, inst.stderr.String())
		case <-ctx.Done():
			_ = inst.Close()
			return nil, fmt.Errorf("rie: launch on %s: %w", addr, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = inst.Close()
			return nil, fmt.Errorf("rie: launch on %s: not listening after %s; output:\n%s", addr, readyTimeout, inst.stderr.String())
		}
	}
}

// environ is the function's environment: a base, then cfg.Env, which
// overrides it (exec.Cmd uses the last value of a key).
func environ(cfg Config) []string {
	env := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test"}
	for _, k := range []string{"PATH", "HOME", "TMPDIR"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	env = append(env, "AWS_LAMBDA_FUNCTION_NAME="+cfg.FunctionName,
		"AWS_LAMBDA_FUNCTION_TIMEOUT="+strconv.Itoa(max(1, int(cfg.Timeout.Round(time.Second)/time.Second))))
	for k, v := range cfg.Env {
		env = append(env, k+"="+v)
	}
	return env
}

// usedPorts keeps this process from handing the same port to two
// instances started at the same moment.
var usedPorts sync.Map

func freePorts(n int) ([]int, error) {
	var ports []int
	for tries := 0; len(ports) < n && tries < 100; tries++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("pick a free port: %w", err)
		}
		p := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if _, dup := usedPorts.LoadOrStore(p, true); dup {
			continue
		}
		ports = append(ports, p)
	}
	if len(ports) < n {
		return nil, errors.New("pick a free port: none left")
	}
	return ports, nil
}

// URL returns the emulator's invoke URL.
func (i *Instance) URL() string { return i.url }

// PID returns the emulator's process id.
func (i *Instance) PID() int { return i.cmd.Process.Pid }

// FunctionPIDs returns the pids of the processes running below the
// emulator, nearest first: after an invoke the first is the function's
// bootstrap.
func (i *Instance) FunctionPIDs() []int {
	kids := i.observe()
	pids := make([]int, len(kids))
	for n, k := range kids {
		pids[n] = k.pid
	}
	return pids
}

// Logs returns what the function wrote to stdout and stderr so far, with
// the emulator's START/END/REPORT lines between invocations.
func (i *Instance) Logs() string { return i.stdout.String() }

// EmulatorLogs returns the emulator's own diagnostic output so far.
func (i *Instance) EmulatorLogs() string { return i.stderr.String() }

// Invoke sends payload to the function and returns the response body.
// Invocations are serialised, since the emulator handles one at a time.
//
// A handler error comes back from the emulator as HTTP 200 with an error
// document: Invoke then returns that body together with an *InvokeError.
// Any other HTTP status is returned as an error with the body's text; a
// transport failure or ctx's end is returned wrapped.
func (i *Instance) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	i.invokeMu.Lock()
	defer i.invokeMu.Unlock()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, i.url, bytes.NewReader(payload))
	if err != nil {
		return nil, fmt.Errorf("rie: invoke: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := i.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("rie: invoke %s: %w", i.url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	// Record the function's processes while they certainly exist, so Close
	// can prove that each one is gone.
	i.observe()
	if err != nil {
		return nil, fmt.Errorf("rie: invoke %s: read response: %w", i.url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return body, fmt.Errorf("rie: invoke %s: HTTP %d: %s", i.url, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	if bytes.HasPrefix(body, []byte(timedOut)) {
		i.mu.Lock()
		i.timeouts = append(i.timeouts, time.Now())
		i.mu.Unlock()
		return body, fmt.Errorf("rie: invoke %s: %s", i.url, body)
	}
	if ie, ok := ParseInvokeError(body); ok {
		return body, ie
	}
	return body, nil
}

// timedOut starts the emulator's answer to an invocation that ran past
// the function's timeout; it then stops the function's process and starts
// a new one for the next invocation, as Lambda does.
const timedOut = "Task timed out after "

// TimedOut returns when invocations of i ran past the function's timeout
// (Invoke then returned an error): each one stopped the function's
// process, whatever it was doing.
func (i *Instance) TimedOut() []time.Time {
	i.mu.Lock()
	defer i.mu.Unlock()
	return slices.Clone(i.timeouts)
}

// InvokeError is a handler error as Lambda reports it: the function's
// error type name and message.
type InvokeError struct {
	// Message is the error's text.
	Message string `json:"errorMessage"`
	// Type is the error's Go type name as aws-lambda-go reports it (for
	// example "errorString"), or a runtime error such as
	// "Runtime.ExitError".
	Type string `json:"errorType"`
	// StackTrace is set for panics.
	StackTrace json.RawMessage `json:"stackTrace,omitempty"`
}

// Error implements error.
func (e *InvokeError) Error() string {
	return fmt.Sprintf("rie: function error %s: %s", e.Type, e.Message)
}

// ParseInvokeError reports whether body is a Lambda error document (a JSON
// object with errorMessage or errorType, and no fields but those, the
// stack trace and a request id) and returns it. Any other body, valid JSON
// or not, gives false.
func ParseInvokeError(body []byte) (*InvokeError, bool) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
		return nil, false
	}
	for k := range fields {
		if !slices.Contains([]string{"errorMessage", "errorType", "stackTrace", "requestId"}, k) {
			return nil, false
		}
	}
	_, hasMsg := fields["errorMessage"]
	_, hasType := fields["errorType"]
	var ie InvokeError
	if !hasMsg && !hasType || json.Unmarshal(body, &ie) != nil {
		return nil, false
	}
	return &ie, true
}

// Close stops the emulator and every process it started (the function's
// bootstrap runs in a process group of its own), waits for them, and
// returns an error if any of them is still running afterwards. It is safe
// to call more than once; later calls return the first result.
//
// It fails too when the function was denied a call its role does not
// allow (package iamfront), naming the function and each call.
func (i *Instance) Close() error {
	i.closeOnce.Do(func() {
		i.closeErr = i.stop()
		if i.front == nil || i.principal == nil {
			return
		}
		i.front.Unregister(i.principal)
		if d := i.principal.Denied(); len(d) > 0 {
			i.closeErr = errors.Join(i.closeErr, fmt.Errorf("rie: IAM: %s (role %s) was denied %d call(s) its role does not allow:\n  %s",
				i.principal.Function, i.principal.Role, len(d), strings.Join(d, "\n  ")))
		}
	})
	return i.closeErr
}

// IAMDenied returns the calls the function was denied by its role (nil
// when IAM is not enforced on it).
func (i *Instance) IAMDenied() []string {
	if i.principal == nil {
		return nil
	}
	return i.principal.Denied()
}

// functionOf names the template function cfg runs ("sender"): its
// FunctionName "sendonce-<name>", or the function Build built its
// bootstrap from; "" for another binary.
func functionOf(cfg Config) string {
	if n, ok := strings.CutPrefix(cfg.FunctionName, "sendonce-"); ok && iamfront.IsFunction(n) {
		return n
	}
	if pkg, ok := built.Load(cfg.Bootstrap); ok && iamfront.IsFunction(pkg.(string)) {
		return pkg.(string)
	}
	return ""
}

func (i *Instance) stop() error {
	pid := i.cmd.Process.Pid
	// Kill the function first, while the emulator still runs and so reaps
	// it; repeat in case the emulator was just starting one.
	for round := 0; round < 5; round++ {
		kids := i.observe()
		if len(kids) == 0 {
			break
		}
		for _, k := range kids {
			killTree(k)
		}
		waitGone(kids, 2*time.Second)
	}
	// The emulator has a process group of its own (Setpgid).
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	_ = i.cmd.Process.Kill()
	select {
	case <-i.waited:
	case <-time.After(10 * time.Second):
		return fmt.Errorf("rie: close: emulator %d did not exit", pid)
	}

	i.mu.Lock()
	all := make([]procID, 0, len(i.seen))
	for p := range i.seen {
		all = append(all, p)
	}
	i.mu.Unlock()
	for _, p := range all {
		killTree(p) // a no-op for a process already gone
	}
	if left := waitGone(all, 5*time.Second); len(left) > 0 {
		return fmt.Errorf("rie: close: function processes still running after the emulator stopped: %v", left)
	}
	return nil
}

// observe records and returns the emulator's live descendants.
func (i *Instance) observe() []procID {
	kids := descendants(i.cmd.Process.Pid)
	i.mu.Lock()
	for _, k := range kids {
		i.seen[k] = struct{}{}
	}
	i.mu.Unlock()
	return kids
}
