package lambdaprovider_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/rie"
)

// emulated is one function running as a real bootstrap under the Lambda
// Runtime Interface Emulator, reached through a proxy that serialises
// invocations.
//
// The emulator runs one invocation at a time and crashes when a second
// one arrives while the first runs (seen here: a nil dereference in
// rapidcore after "ReserveFailed: AlreadyReserved"). An adapter that stops
// waiting for a slow function (its timeout) leaves that invocation
// running, and the sender's next call would then crash the emulator. The
// proxy therefore holds every invocation until the emulator has answered
// the one before, even after its caller went away: one Lambda instance
// whose callers queue, where Lambda would start another instance. It
// forwards bodies and statuses unchanged, so the adapter sees exactly what
// the emulator answers.
type emulated struct {
	inst *rie.Instance
	// URL is the proxy's base URL: the adapter's Lambda endpoint.
	URL string

	mu       sync.Mutex // held while the emulator runs an invocation
	stats    sync.Mutex
	invokes  int
	timedOut int
}

// startFunction builds pkg (a path from the module root) as a bootstrap
// and runs it under the emulator with env, behind a serialising proxy.
func startFunction(t *testing.T, pkg string, env map[string]string) *emulated {
	t.Helper()
	e := &emulated{inst: rie.Start(t, rie.Build(t, pkg), env)}
	target, err := url.Parse(e.inst.URL())
	if err != nil {
		t.Fatal(err)
	}
	idle := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		type result struct {
			status int
			body   []byte
			err    error
		}
		done := make(chan result, 1)
		go func() {
			e.mu.Lock()
			defer e.mu.Unlock()
			u := *target
			u.Path = r.URL.Path // the emulator answers 404 for another function name
			resp, err := http.Post(u.String(), "application/json", bytes.NewReader(body))
			if err != nil {
				done <- result{err: err}
				return
			}
			data, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			e.stats.Lock()
			e.invokes++
			if strings.HasPrefix(string(data), "Task timed out after ") {
				e.timedOut++
			}
			e.stats.Unlock()
			done <- result{resp.StatusCode, data, err}
		}()
		select {
		case res := <-done:
			if res.err != nil {
				// The emulator is gone: so is the connection.
				panic(http.ErrAbortHandler)
			}
			w.WriteHeader(res.status)
			w.Write(res.body)
		case <-r.Context().Done():
		case <-idle:
		}
	}))
	t.Cleanup(func() {
		close(idle)
		srv.Close()
	})
	e.URL = srv.URL
	return e
}

// counts returns how many invocations the emulator answered, and how many
// of those it ended for running past the function's timeout.
func (e *emulated) counts() (invokes, timedOut int) {
	e.stats.Lock()
	defer e.stats.Unlock()
	return e.invokes, e.timedOut
}

// idle waits until the emulator runs no invocation (or d passes).
func (e *emulated) idle(d time.Duration) bool {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	got := make(chan struct{})
	go func() {
		e.mu.Lock()
		e.mu.Unlock()
		close(got)
	}()
	select {
	case <-got:
		return true
	case <-ctx.Done():
		return false
	}
}
