package localpipeline

import (
	"bytes"
	"context"
	"io"
	"maps"
	"net/http"
)

// Forward sends r's method, headers, host and body to url under ctx,
// once: the transport never replays it (a client in front of a fault
// injector must see a reset as a reset). It returns the answer, or the
// error when there was none.
func Forward(ctx context.Context, client *http.Client, r *http.Request, url string, body []byte) (int, http.Header, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, r.Method, url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header = r.Header.Clone()
	req.Host = r.Host
	req.GetBody = nil
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, nil, err
	}
	return resp.StatusCode, resp.Header.Clone(), out, nil
}

// Answer writes an answer (as Forward returns it) to w.
func Answer(w http.ResponseWriter, status int, hdr http.Header, body []byte) {
	maps.Copy(w.Header(), hdr)
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// HangUp closes the client's connection without an answer: what a lost
// answer looks like to the client.
func HangUp(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			_ = conn.Close()
			return
		}
	}
	panic(http.ErrAbortHandler)
}
