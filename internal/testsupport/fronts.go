package testsupport

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
)

// AcceptThen starts a front of the HTTP service at upstream (moto_server,
// say) that passes each request on unchanged and then, instead of the
// service's answer, answers status with an empty body, or with status 0
// never answers (until the client goes away): a service that took the
// message and whose answer was lost. It returns the front's URL; the
// front stops when t ends.
//
// It is how the conformance tests of the adapters over AWS services
// build providertest.Harness's AcceptedThenFailed and
// AcceptedThenTimedOut: the service's own records count the message.
func AcceptThen(t testing.TB, upstream string, status int) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		req, err := http.NewRequestWithContext(r.Context(), r.Method, upstream+r.URL.RequestURI(), bytes.NewReader(body))
		if err != nil {
			panic(http.ErrAbortHandler)
		}
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(http.ErrAbortHandler)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if status == 0 {
			<-r.Context().Done()
			return
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// Stalled starts an HTTP server that reads each request and never
// answers it (until the client goes away), and returns its URL; it stops
// when t ends.
func Stalled(t testing.TB) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// Unreachable returns the URL of a loopback port nothing listens on.
func Unreachable(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}
