package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"

	"github.com/sendonce/sendonce/internal/localpipeline"
	"github.com/sendonce/sendonce/internal/provider/registry"
	"github.com/sendonce/sendonce/internal/testenv"
)

// sesLane is the SES adapter (email through the SES v2 API) against
// moto_server, which records every email it accepted (GET
// /moto-api/data.json, ses.Message, by destination). The functions reach
// SES through a front that injects the send faults into SendEmail calls
// and passes everything else on. moto refuses a send from an unverified
// identity, as SES does: the lane verifies its sender first.
type sesLane struct {
	moto     string
	draw     *drawer
	client   *http.Client
	url      string
	stop     func()
	inFlight atomic.Int64

	mu       sync.Mutex
	accepted map[string]bool // addresses moto answered a SendEmail to with 200
}

// sesFrom is the lane's verified sender. Each run's identity is the same:
// creating it again is harmless.
const sesFrom = "chaos-ses@sendonce.test"

// sesSendPath is SES v2's SendEmail (POST).
const sesSendPath = "/v2/email/outbound-emails"

func newSESLane(ctx context.Context, o Options, seed uint64) (Counterpart, error) {
	moto := strings.TrimRight(o.MotoEndpoint, "/")
	c := sesv2.NewFromConfig(testenv.Config(), func(so *sesv2.Options) { so.BaseEndpoint = aws.String(moto) })
	if _, err := c.CreateEmailIdentity(ctx, &sesv2.CreateEmailIdentityInput{EmailIdentity: aws.String(sesFrom)}); err != nil &&
		!strings.Contains(err.Error(), "AlreadyExists") {
		return nil, fmt.Errorf("chaos: ses: verify the sender identity: %w", err)
	}
	l := &sesLane{moto: moto, draw: newDrawer(o.SendFaults, seed), accepted: map[string]bool{},
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 32}}}
	url, stop, err := serve(http.HandlerFunc(l.serve))
	if err != nil {
		return nil, err
	}
	l.url, l.stop = url, stop
	return l, nil
}

func (l *sesLane) Env() map[string]string {
	return map[string]string{
		registry.EnvEmailProvider: "ses", registry.EnvSMSProvider: "",
		registry.EnvSESFrom: sesFrom, "AWS_ENDPOINT_URL_SESV2": l.url,
	}
}

// sesError answers as SES v2's REST-JSON protocol does.
func sesError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amzn-ErrorType", code)
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"message":%q}`, msg)
}

// sesRecipient is the first destination of a SendEmail body.
func sesRecipient(body []byte) string {
	var in struct {
		Destination struct {
			ToAddresses []string `json:"ToAddresses"`
		} `json:"Destination"`
	}
	if json.Unmarshal(body, &in) != nil || len(in.Destination.ToAddresses) == 0 {
		return ""
	}
	return in.Destination.ToAddresses[0]
}

func (l *sesLane) serve(w http.ResponseWriter, r *http.Request) {
	l.inFlight.Add(1)
	defer l.inFlight.Add(-1)
	body, err := readBody(r)
	if err != nil {
		return
	}
	send := r.Method == http.MethodPost && r.URL.Path == sesSendPath
	to := ""
	k, delay := fkNone, time.Duration(0)
	if send {
		to = sesRecipient(body)
		k, delay = l.draw.draw(to)
	}
	switch k {
	case fkTransient, fkOutage:
		// SES's throttling and its temporary failure: nothing was taken
		// (the adapter classifies both Transient).
		if l.draw.Intn(2) == 0 {
			sesError(w, http.StatusTooManyRequests, "TooManyRequestsException", "Maximum sending rate exceeded.")
		} else {
			sesError(w, http.StatusServiceUnavailable, "ServiceUnavailable", "Service is unavailable")
		}
		return
	case fkReject:
		sesError(w, http.StatusBadRequest, "MessageRejected", "Email address is on the suppression list")
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
	if send && status == http.StatusOK {
		l.mu.Lock()
		l.accepted[to] = true
		l.mu.Unlock()
	}
	switch k {
	case fkAfter:
		<-r.Context().Done()
		return
	case fkAfterError:
		// An unknown 5xx after the email was taken: SES does not say
		// whether it accepted it (Ambiguous).
		sesError(w, http.StatusInternalServerError, "InternalFailure", "An internal error occurred")
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

func (l *sesLane) Attach(*localpipeline.Pipeline) error { return nil }

func (l *sesLane) Plan(m localpipeline.Message, slow time.Duration) error {
	return planDrawer(l.draw, m, slow)
}

func (l *sesLane) Faults(on bool) { l.draw.enabled.Store(on) }
func (l *sesLane) Outage(on bool) { l.draw.outage.Store(on) }

// Delivered reads moto_server's record of the email it accepted.
func (l *sesLane) Delivered(ctx context.Context, w localpipeline.Workload) (map[string]int, map[string]string, error) {
	_, count, err := localpipeline.MotoRecords(ctx, l.client, l.moto)
	if err != nil {
		return nil, nil, fmt.Errorf("chaos: ses: %w", err)
	}
	return byAddress(w, count, false), nil, nil // moto_server may serve other tests too
}

// Sent counts the addresses moto accepted a SendEmail to, as the front
// saw it (moto's own record, read by Delivered, is the ground truth).
func (l *sesLane) Sent() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.accepted)
}

func (l *sesLane) Capability(string) Capability { return Neither }
func (l *sesLane) Faulted() map[string]int      { return namedCounts(l.draw.Counts()) }
func (l *sesLane) InFlight() int64              { return l.inFlight.Load() }
func (l *sesLane) Quiesce(context.Context)      {}
func (l *sesLane) Close()                       { l.stop() }
