package rie

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

const echoPkg = "./internal/rie/testdata/echo"

type bundle struct {
	bootstrap string
	fn        *Instance
}

func setup(t *testing.T, env map[string]string) bundle {
	t.Helper()
	bootstrap := Build(t, echoPkg)
	return bundle{bootstrap: bootstrap, fn: Start(t, bootstrap, env)}
}

type echoResponse struct {
	Echo     string `json:"echo"`
	EnvValue string `json:"env_value"`
	PID      int    `json:"pid"`
}

func invoke(t *testing.T, fn *Instance, payload string) (echoResponse, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	body, err := fn.Invoke(ctx, []byte(payload))
	var resp echoResponse
	if err == nil {
		if uerr := json.Unmarshal(body, &resp); uerr != nil {
			t.Fatalf("response %q: %v", body, uerr)
		}
	}
	return resp, err
}

func TestInvoke(t *testing.T) {
	t.Parallel()
	b := setup(t, map[string]string{"ECHO_SETTING": "from-env"})

	tests := []struct {
		name      string
		payload   string
		wantEcho  string
		wantEnv   string
		wantError *InvokeError
	}{
		{name: "Echo", payload: `{"echo":"hello"}`, wantEcho: "hello"},
		{name: "EnvPassed", payload: `{"env":"ECHO_SETTING"}`, wantEnv: "from-env"},
		{name: "FunctionName", payload: `{"env":"AWS_LAMBDA_FUNCTION_NAME"}`, wantEnv: DefaultFunctionName},
		{name: "CallerEnvNotLeaked", payload: `{"env":"SENDONCE_TEST_RIE"}`, wantEnv: ""},
		{name: "HandlerError", payload: `{"fail":"boom"}`, wantError: &InvokeError{Message: "boom", Type: "echoError"}},
		{name: "BadPayload", payload: `[1,2]`, wantError: &InvokeError{Type: "UnmarshalTypeError"}},
	}
	// Subtests share one instance and so run in sequence.
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := invoke(t, b.fn, tc.payload)
			if tc.wantError != nil {
				var ie *InvokeError
				if !errors.As(err, &ie) {
					t.Fatalf("err = %v, want an *InvokeError", err)
				}
				if ie.Type != tc.wantError.Type {
					t.Errorf("errorType = %q, want %q", ie.Type, tc.wantError.Type)
				}
				if tc.wantError.Message != "" && ie.Message != tc.wantError.Message {
					t.Errorf("errorMessage = %q, want %q", ie.Message, tc.wantError.Message)
				}
				return
			}
			if err != nil {
				t.Fatalf("Invoke: %v", err)
			}
			if got.Echo != tc.wantEcho || got.EnvValue != tc.wantEnv {
				t.Errorf("got echo %q env %q, want echo %q env %q", got.Echo, got.EnvValue, tc.wantEcho, tc.wantEnv)
			}
		})
	}
}

func TestLogs(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	const line = "fixture-log-line-7f3a"
	if _, err := invoke(t, b.fn, `{"log":"`+line+`"}`); err != nil {
		t.Fatalf("Invoke: %v", err)
	}
	// The emulator copies the function's output asynchronously.
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(b.fn.Logs(), line) {
		if time.Now().After(deadline) {
			t.Fatalf("Logs() = %q, want it to contain %q", b.fn.Logs(), line)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if strings.Contains(b.fn.Logs(), "(rapid)") {
		t.Errorf("Logs() holds the emulator's own diagnostics:\n%s", b.fn.Logs())
	}
}

func TestConcurrentInvokesAreSerialised(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			want := strings.Repeat("x", i+1)
			got, err := invoke(t, b.fn, `{"echo":"`+want+`"}`)
			if err == nil && got.Echo != want {
				err = errors.New("got echo " + got.Echo + ", want " + want)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// procsOf returns the emulator and the function process (whose pid the
// fixture reports), as seen while both run.
func procsOf(t *testing.T, fn *Instance) []procID {
	t.Helper()
	got, err := invoke(t, fn, `{"echo":"x"}`)
	if err != nil {
		t.Fatalf("Invoke: %v", err)
	}
	var procs []procID
	for _, pid := range []int{fn.PID(), got.PID} {
		st, ok := readStat(pid)
		if !ok || !st.running() {
			t.Fatalf("process %d is not running before cleanup", pid)
		}
		procs = append(procs, procID{pid: pid, start: st.start})
	}
	if st, _ := readStat(got.PID); st.pgid == fn.PID() {
		t.Fatalf("function %d shares the emulator's process group; the test would not prove the group kill", got.PID)
	}
	return procs
}

// TestFunctionPIDs checks that the first process FunctionPIDs names is the
// one the function reports as its own.
func TestFunctionPIDs(t *testing.T) {
	t.Parallel()
	fn := setup(t, nil).fn
	got, err := invoke(t, fn, `{"echo":"x"}`)
	if err != nil {
		t.Fatalf("Invoke: %v", err)
	}
	if pids := fn.FunctionPIDs(); len(pids) == 0 || pids[0] != got.PID {
		t.Errorf("FunctionPIDs() = %v, want the function's pid %d first", pids, got.PID)
	}
}

func TestCleanupLeavesNoProcess(t *testing.T) {
	t.Parallel()
	var procs []procID
	t.Run("Start", func(t *testing.T) {
		procs = procsOf(t, setup(t, nil).fn)
	})
	// The subtest's cleanup has run.
	if left := waitGone(procs, 0); len(left) != 0 {
		t.Errorf("processes %v still run after cleanup", left)
	}
}

func TestClose(t *testing.T) {
	t.Parallel()
	bootstrap := Build(t, echoPkg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fn, err := Launch(ctx, Config{Bootstrap: bootstrap})
	if err != nil {
		t.Fatalf("Launch: %v", err)
	}
	procs := procsOf(t, fn)
	if err := fn.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if left := waitGone(procs, 0); len(left) != 0 {
		t.Errorf("processes %v still run after Close", left)
	}
	if err := fn.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := fn.Invoke(ctx, []byte(`{}`)); err == nil {
		t.Errorf("Invoke after Close: got no error")
	}
}

// TestCloseStopsHungFunction checks the case that needs the group kill: a
// function stuck in its handler does not exit when the emulator does.
func TestCloseStopsHungFunction(t *testing.T) {
	t.Parallel()
	var procs []procID
	t.Run("Start", func(t *testing.T) {
		fn := setup(t, nil).fn
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		if _, err := fn.Invoke(ctx, []byte(`{"hang_ms":120000}`)); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Invoke of a hung handler: got %v, want %v", err, context.DeadlineExceeded)
		}
		procs = descendants(fn.PID())
		if len(procs) == 0 {
			t.Fatalf("no function process runs under the emulator %d", fn.PID())
		}
		procs = append(procs, procID{pid: fn.PID()})
		if st, ok := readStat(fn.PID()); ok {
			procs[len(procs)-1].start = st.start
		}
	})
	if left := waitGone(procs, 0); len(left) != 0 {
		t.Errorf("processes %v still run after cleanup", left)
	}
}

func TestLaunchErrors(t *testing.T) {
	bootstrap := Build(t, echoPkg)
	rie := os.Getenv(BinaryEnv)
	tests := []struct {
		name    string
		cfg     Config
		unset   bool
		wantErr string
	}{
		{name: "NoBinary", cfg: Config{Bootstrap: bootstrap}, unset: true, wantErr: BinaryEnv + " is not set"},
		{name: "MissingBinary", cfg: Config{RIE: "/nonexistent/aws-lambda-rie", Bootstrap: bootstrap}, wantErr: "emulator"},
		{name: "MissingBootstrap", cfg: Config{RIE: rie, Bootstrap: "/nonexistent/bootstrap"}, wantErr: "bootstrap"},
		{name: "BootstrapNotExecutable", cfg: Config{RIE: rie, Bootstrap: "rie.go"}, wantErr: "not an executable"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.unset {
				t.Setenv(BinaryEnv, "")
			}
			fn, err := Launch(context.Background(), tc.cfg)
			if err == nil {
				_ = fn.Close()
				t.Fatalf("Launch: got no error, want one containing %q", tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Launch: got %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestParseInvokeError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		body   string
		want   *InvokeError
		wantOK bool
	}{
		{name: "HandlerError", body: `{"errorMessage":"boom","errorType":"echoError"}`, want: &InvokeError{Message: "boom", Type: "echoError"}, wantOK: true},
		{name: "OnlyType", body: `{"errorType":"Runtime.ExitError"}`, want: &InvokeError{Type: "Runtime.ExitError"}, wantOK: true},
		{name: "WithStackTrace", body: `{"errorMessage":"p","errorType":"runtime.Error","stackTrace":[{"path":"a.go"}]}`, want: &InvokeError{Message: "p", Type: "runtime.Error"}, wantOK: true},
		{name: "OrdinaryResponse", body: `{"batchItemFailures":[]}`},
		{name: "ResponseWithExtraField", body: `{"errorMessage":"x","status":"ok"}`},
		{name: "WrongFieldType", body: `{"errorMessage":42}`},
		{name: "Null", body: `null`},
		{name: "Array", body: `[]`},
		{name: "NotJSON", body: `boom`},
		{name: "Empty", body: ``},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, ok := ParseInvokeError([]byte(tc.body))
			if ok != tc.wantOK {
				t.Fatalf("ok = %v, want %v", ok, tc.wantOK)
			}
			if !ok {
				return
			}
			if got.Message != tc.want.Message || got.Type != tc.want.Type {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			if got.Error() == "" {
				t.Errorf("Error() is empty")
			}
		})
	}
}

func FuzzParseInvokeError(f *testing.F) {
	for _, s := range []string{
		`{"errorMessage":"boom","errorType":"echoError"}`,
		`{"errorType":"Runtime.ExitError","stackTrace":[]}`,
		`{"echo":"x"}`, `null`, `[]`, `"s"`, ``, `{`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		ie, ok := ParseInvokeError(body)
		if ok != (ie != nil) {
			t.Fatalf("ok = %v but error = %v", ok, ie)
		}
		if !ok {
			return
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(body, &fields); err != nil {
			t.Fatalf("accepted a body that is not a JSON object: %q", body)
		}
		if _, m := fields["errorMessage"]; !m {
			if _, ty := fields["errorType"]; !ty {
				t.Fatalf("accepted a body with neither errorMessage nor errorType: %q", body)
			}
		}
	})
}

// TestTimedOut: an invocation that runs past the function's timeout is an
// error, is recorded by TimedOut, and the emulator runs the next
// invocation in a new process (it stopped the old one, as Lambda does).
func TestTimedOut(t *testing.T) {
	t.Parallel()
	fn := setup(t, map[string]string{"AWS_LAMBDA_FUNCTION_TIMEOUT": "1"}).fn
	before, err := invoke(t, fn, `{"echo":"a"}`)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := invoke(t, fn, `{"hang_ms":5000}`); err == nil || !strings.Contains(err.Error(), "Task timed out") {
		t.Fatalf("Invoke past the timeout: got %v, want a timed-out error", err)
	}
	at := fn.TimedOut()
	if len(at) != 1 || at[0].Before(start) {
		t.Fatalf("TimedOut() = %v, want one time after %v", at, start)
	}
	after, err := invoke(t, fn, `{"echo":"b"}`)
	if err != nil {
		t.Fatal(err)
	}
	if after.PID == before.PID {
		t.Errorf("the invocation after the timeout ran in the same process %d", after.PID)
	}
	if n := len(fn.TimedOut()); n != 1 {
		t.Errorf("TimedOut() has %d entries after a good invocation, want 1", n)
	}
}

func TestParseStat(t *testing.T) {
	t.Parallel()
	line := "4242 (node (x)) S 1 4242 4242 0 -1 4194304 100 0 0 0 77 23 0 0 20 0 11 0 500 1000 200"
	want := procStat{state: 'S', ppid: 1, pgid: 4242, ticks: 100, start: 500}
	if got, ok := parseStat([]byte(line)); !ok || got != want {
		t.Errorf("parseStat = %+v, %v; want %+v (77 + 23 ticks)", got, ok, want)
	}
	for _, bad := range []string{"4242 (x) S 1", "garbage", "4242 (x) S one 4242 4242 0 -1 4194304 100 0 0 0 77 23 0 0 20 0 11 0 500 1000"} {
		if st, ok := parseStat([]byte(bad)); ok {
			t.Errorf("parseStat(%q) = %+v, ok; want not ok", bad, st)
		}
	}
	if d, ok := CPUTime(os.Getpid()); !ok || d < 0 {
		t.Errorf("CPUTime(self) = %v, %v; want a time, ok", d, ok)
	}
}
