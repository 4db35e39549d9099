package chaos

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sendonce/sendonce/internal/localpipeline"
	"github.com/sendonce/sendonce/internal/provider/registry"
)

// snsLane is the SNS adapter (SMS by direct Publish) against moto_server,
// which records every SMS it accepted (GET /moto-api/data.json, sns.SMS).
// The functions reach SNS through a front that injects the send faults
// into Publish calls and passes everything else on.
type snsLane struct {
	moto     string
	draw     *drawer
	client   *http.Client
	url      string
	stop     func()
	inFlight atomic.Int64

	mu       sync.Mutex
	accepted map[string]bool // phone numbers moto answered a Publish to with 200
}

func newSNSLane(_ context.Context, o Options, seed uint64) (Counterpart, error) {
	l := &snsLane{moto: strings.TrimRight(o.MotoEndpoint, "/"), draw: newDrawer(o.SendFaults, seed), accepted: map[string]bool{},
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 32}}}
	url, stop, err := serve(http.HandlerFunc(l.serve))
	if err != nil {
		return nil, err
	}
	l.url, l.stop = url, stop
	return l, nil
}

func (l *snsLane) Env() map[string]string {
	return map[string]string{
		registry.EnvSMSProvider: "sns", registry.EnvEmailProvider: "",
		"AWS_ENDPOINT_URL_SNS": l.url,
	}
}

// snsError answers as SNS's query protocol does.
func snsError(w http.ResponseWriter, status int, typ, code, msg string) {
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<ErrorResponse xmlns="http://sns.amazonaws.com/doc/2010-03-31/"><Error><Type>%s</Type><Code>%s</Code><Message>%s</Message></Error><RequestId>chaos-%d</RequestId></ErrorResponse>`,
		typ, code, msg, time.Now().UnixNano())
}

func (l *snsLane) serve(w http.ResponseWriter, r *http.Request) {
	l.inFlight.Add(1)
	defer l.inFlight.Add(-1)
	body, err := readBody(r)
	if err != nil {
		return
	}
	form, _ := url.ParseQuery(string(body))
	k, delay := fkNone, time.Duration(0)
	if form.Get("Action") == "Publish" {
		k, delay = l.draw.draw(form.Get("PhoneNumber"))
	}
	switch k {
	case fkTransient, fkOutage:
		if l.draw.Intn(2) == 0 {
			snsError(w, http.StatusBadRequest, "Sender", "Throttling", "Rate exceeded")
		} else {
			snsError(w, http.StatusServiceUnavailable, "Receiver", "ServiceUnavailable", "Service is unavailable")
		}
		return
	case fkReject:
		snsError(w, http.StatusBadRequest, "Sender", "InvalidParameter", "Invalid parameter: PhoneNumber Reason: the number is opted out")
		return
	case fkBefore:
		<-r.Context().Done()
		return
	}
	status, hdr, out, ok := forwardDetached(r, l.client, l.moto, body)
	if !ok {
		hangUp(w)
		return
	}
	if form.Get("Action") == "Publish" && status == http.StatusOK {
		l.mu.Lock()
		l.accepted[form.Get("PhoneNumber")] = true
		l.mu.Unlock()
	}
	switch k {
	case fkAfter:
		<-r.Context().Done()
		return
	case fkAfterError:
		snsError(w, http.StatusInternalServerError, "Receiver", "InternalError", "Internal failure")
		return
	case fkSlow:
		if !waitReq(r, delay) {
			return
		}
	}
	for key, vs := range hdr {
		w.Header()[key] = vs
	}
	w.WriteHeader(status)
	_, _ = w.Write(out)
}

func waitReq(r *http.Request, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	}
}

// readBody reads a front's request body (at most 1 MiB).
func readBody(r *http.Request) ([]byte, error) {
	return io.ReadAll(io.LimitReader(r.Body, 1<<20))
}

// forwardDetached passes r to moto_server at moto; the request is not
// bound to the client's context: once written, moto takes the message
// even if the client goes away.
func forwardDetached(r *http.Request, client *http.Client, moto string, body []byte) (int, http.Header, []byte, bool) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 30*time.Second)
	defer cancel()
	status, hdr, out, err := forwardOnce(ctx, client, r, moto+r.URL.RequestURI(), body)
	return status, hdr, out, err == nil
}

func (l *snsLane) Attach(*localpipeline.Pipeline) error { return nil }

func (l *snsLane) Plan(m localpipeline.Message, slow time.Duration) error {
	return planDrawer(l.draw, m, slow)
}

func (l *snsLane) Faults(on bool) { l.draw.enabled.Store(on) }
func (l *snsLane) Outage(on bool) { l.draw.outage.Store(on) }

// Delivered reads moto_server's record of the SMS it accepted.
func (l *snsLane) Delivered(ctx context.Context, w localpipeline.Workload) (map[string]int, map[string]string, error) {
	count, _, err := localpipeline.MotoRecords(ctx, l.client, l.moto)
	if err != nil {
		return nil, nil, fmt.Errorf("chaos: sns: %w", err)
	}
	return byAddress(w, count, false), nil, nil // moto_server may serve other tests too
}

// Sent counts the numbers moto accepted a Publish to, as the front saw
// it (moto's own record, read by Delivered, is the ground truth).
func (l *snsLane) Sent() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.accepted)
}

func (l *snsLane) Capability(string) Capability { return Neither }
func (l *snsLane) Faulted() map[string]int      { return namedCounts(l.draw.Counts()) }
func (l *snsLane) InFlight() int64              { return l.inFlight.Load() }
func (l *snsLane) Quiesce(context.Context)      {}
func (l *snsLane) Close()                       { l.stop() }
