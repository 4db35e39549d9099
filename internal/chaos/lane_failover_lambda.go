package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sendonce/sendonce/internal/localpipeline"
	"github.com/sendonce/sendonce/internal/rie"
)

// lambdaPool serves Lambda's Invoke API (the path the Lambda adapter
// calls) from a few emulators running one function, each one invocation
// at a time, as Lambda's instances of a function do. The emulator crashes
// when a second invocation reaches it while one runs, so an invocation
// holds its emulator until the emulator answered, even when its caller
// went away (an adapter's timeout); callers queue for a free emulator.
// Bodies and statuses pass unchanged, so the adapter sees what the
// emulator answers. Every send and lookup is recorded per key, as the
// provider's side saw it (summarize).
type lambdaPool struct {
	url   string
	stop  func()
	insts []*rie.Instance
	free  chan *rie.Instance
	done  chan struct{}

	inFlight atomic.Int64
	wire     wireLog
}

// startLambdaPool launches n emulators of bootstrap with env (a timeout
// of a second: below the pipeline's provider timeout) and serves them.
func startLambdaPool(ctx context.Context, bin, bootstrap string, n int, env map[string]string) (*lambdaPool, error) {
	lp := &lambdaPool{free: make(chan *rie.Instance, n), done: make(chan struct{})}
	for i := range n {
		inst, err := rie.Launch(ctx, rie.Config{RIE: bin, Bootstrap: bootstrap, FunctionName: fmt.Sprintf("chaos-failover-provider-%d", i+1),
			Timeout: time.Second, Env: env})
		if err != nil {
			lp.close()
			return nil, fmt.Errorf("failover: start the example function: %w", err)
		}
		lp.insts = append(lp.insts, inst)
		lp.free <- inst
	}
	url, stop, err := serve(lp)
	if err != nil {
		lp.close()
		return nil, err
	}
	lp.url, lp.stop = url, stop
	return lp, nil
}

func (lp *lambdaPool) close() {
	select {
	case <-lp.done:
	default:
		close(lp.done)
	}
	if lp.stop != nil {
		lp.stop()
	}
	for _, inst := range lp.insts {
		_ = inst.Close()
	}
}

func (lp *lambdaPool) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	lp.inFlight.Add(1)
	defer lp.inFlight.Add(-1)
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/invocations") {
		http.NotFound(w, r)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 6<<20))
	if err != nil {
		return
	}
	var req struct {
		Op  string `json:"op"`
		Key string `json:"key"`
	}
	_ = json.Unmarshal(body, &req)
	at := time.Now()
	var inst *rie.Instance
	select {
	case inst = <-lp.free:
	case <-r.Context().Done():
		return // never invoked: nothing happened
	case <-lp.done:
		localpipeline.HangUp(w)
		return
	}
	type result struct {
		status int
		body   []byte
		err    error
	}
	res := make(chan result, 1)
	go func() {
		defer func() { lp.free <- inst }()
		resp, err := http.Post(inst.URL(), "application/json", bytes.NewReader(body))
		if err != nil {
			res <- result{err: err}
			return
		}
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		res <- result{resp.StatusCode, data, err}
	}()
	note := func(noAnswer bool) {
		lp.wire.note(req.Key, wireEvent{at: at, lookup: req.Op == "lookup", noAnswer: noAnswer})
	}
	select {
	case out := <-res:
		// A function error (its errorMessage document) or a timeout is
		// no answer of the protocol: the function may have sent.
		_, fnErr := rie.ParseInvokeError(out.body)
		failed := out.err != nil || out.status != http.StatusOK || fnErr || bytes.HasPrefix(out.body, []byte("Task timed out"))
		note(failed)
		if out.err != nil {
			localpipeline.HangUp(w)
			return
		}
		w.WriteHeader(out.status)
		_, _ = w.Write(out.body)
	case <-r.Context().Done():
		note(true)
	case <-lp.done:
		note(true)
		localpipeline.HangUp(w)
	}
}
