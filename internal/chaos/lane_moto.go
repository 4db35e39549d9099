package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"

	"github.com/sendonce/sendonce/internal/localpipeline"
	"github.com/sendonce/sendonce/internal/provider/registry"
	"github.com/sendonce/sendonce/internal/testenv"
)

// motoLane is an AWS-native adapter against moto_server, which records
// every SMS (SNS Publish) and email (SES v2 SendEmail) it accepted (GET
// /moto-api/data.json). The functions reach the API through a front that
// injects the send faults into its sends and passes everything else on.
// The sns and ses lanes are one motoLane each, told apart by their
// motoAPI.
type motoLane struct {
	*drawer
	api    motoAPI
	moto   string
	client *http.Client
	url    string
	stop   func()

	// before is what moto had recorded per recipient when the lane
	// started: moto keeps every message it ever took, so a recipient an
	// earlier run used (runs draw their numbers from one range of ten
	// million) is counted from there on, not twice.
	before map[string]int
}

// motoAPI is what a moto lane needs of one AWS API.
type motoAPI struct {
	// name is the API's, and its record's in motoRecords.
	name string
	// recipient returns the recipient of r (body read) if r is a send.
	recipient func(r *http.Request, body []byte) (to string, send bool)
	// refused are the two refusals (nothing taken) a transient fault or
	// an outage draws from; reject is a permanent rejection; internal an
	// unknown 5xx after the message was taken (the API does not say
	// whether it accepted it: Ambiguous).
	refused          [2]apiError
	reject, internal apiError
	// write answers e in the API's protocol.
	write func(w http.ResponseWriter, e apiError)
	// env is the functions' environment, the API served at front.
	env func(front string) map[string]string
	// setup prepares moto at moto before the first send (nil: nothing).
	setup func(ctx context.Context, moto string) error
}

// apiError is one error answer of an AWS API (typ only where the
// protocol has one).
type apiError struct {
	status          int
	typ, code, text string
}

// snsAPI is SNS (SMS by direct Publish), on its query protocol.
var snsAPI = motoAPI{
	name: "sns",
	recipient: func(_ *http.Request, body []byte) (string, bool) {
		form, _ := url.ParseQuery(string(body))
		return form.Get("PhoneNumber"), form.Get("Action") == "Publish"
	},
	refused: [2]apiError{
		{http.StatusBadRequest, "Sender", "Throttling", "Rate exceeded"},
		{http.StatusServiceUnavailable, "Receiver", "ServiceUnavailable", "Service is unavailable"},
	},
	reject:   apiError{http.StatusBadRequest, "Sender", "InvalidParameter", "Invalid parameter: PhoneNumber Reason: the number is opted out"},
	internal: apiError{http.StatusInternalServerError, "Receiver", "InternalError", "Internal failure"},
	write: func(w http.ResponseWriter, e apiError) {
		w.Header().Set("Content-Type", "text/xml")
		w.WriteHeader(e.status)
		fmt.Fprintf(w, `<ErrorResponse xmlns="http://sns.amazonaws.com/doc/2010-03-31/"><Error><Type>%s</Type><Code>%s</Code><Message>%s</Message></Error><RequestId>chaos-%d</RequestId></ErrorResponse>`,
			e.typ, e.code, e.text, time.Now().UnixNano())
	},
	env: func(front string) map[string]string {
		return map[string]string{registry.EnvSMSProvider: "sns", registry.EnvEmailProvider: "", "AWS_ENDPOINT_URL_SNS": front}
	},
}

// sesFrom is the ses lane's verified sender. Each run's identity is the
// same: creating it again is harmless.
const sesFrom = "chaos-ses@sendonce.test"

// sesSendPath is SES v2's SendEmail (POST).
const sesSendPath = "/v2/email/outbound-emails"

// sesAPI is SES v2 (email), on its REST-JSON protocol. moto refuses a
// send from an unverified identity, as SES does: setup verifies sesFrom.
var sesAPI = motoAPI{
	name: "ses",
	recipient: func(r *http.Request, body []byte) (string, bool) {
		if r.Method != http.MethodPost || r.URL.Path != sesSendPath {
			return "", false
		}
		var in struct {
			Destination struct {
				ToAddresses []string `json:"ToAddresses"`
			} `json:"Destination"`
		}
		if json.Unmarshal(body, &in) != nil || len(in.Destination.ToAddresses) == 0 {
			return "", true
		}
		return in.Destination.ToAddresses[0], true
	},
	refused: [2]apiError{
		{http.StatusTooManyRequests, "", "TooManyRequestsException", "Maximum sending rate exceeded."},
		{http.StatusServiceUnavailable, "", "ServiceUnavailable", "Service is unavailable"},
	},
	reject:   apiError{http.StatusBadRequest, "", "MessageRejected", "Email address is on the suppression list"},
	internal: apiError{http.StatusInternalServerError, "", "InternalFailure", "An internal error occurred"},
	write: func(w http.ResponseWriter, e apiError) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Amzn-ErrorType", e.code)
		w.WriteHeader(e.status)
		fmt.Fprintf(w, `{"message":%q}`, e.text)
	},
	env: func(front string) map[string]string {
		return map[string]string{registry.EnvEmailProvider: "ses", registry.EnvSMSProvider: "", registry.EnvSESFrom: sesFrom, "AWS_ENDPOINT_URL_SESV2": front}
	},
	setup: func(ctx context.Context, moto string) error {
		c := sesv2.NewFromConfig(testenv.Config(), func(so *sesv2.Options) { so.BaseEndpoint = aws.String(moto) })
		if _, err := c.CreateEmailIdentity(ctx, &sesv2.CreateEmailIdentityInput{EmailIdentity: aws.String(sesFrom)}); err != nil &&
			!strings.Contains(err.Error(), "AlreadyExists") {
			return fmt.Errorf("verify the sender identity: %w", err)
		}
		return nil
	},
}

func newSNSLane(ctx context.Context, o Options, seed uint64) (Counterpart, error) {
	return newMotoLane(ctx, snsAPI, o, seed)
}

func newSESLane(ctx context.Context, o Options, seed uint64) (Counterpart, error) {
	return newMotoLane(ctx, sesAPI, o, seed)
}

func newMotoLane(ctx context.Context, api motoAPI, o Options, seed uint64) (*motoLane, error) {
	moto := strings.TrimRight(o.MotoEndpoint, "/")
	if api.setup != nil {
		if err := api.setup(ctx, moto); err != nil {
			return nil, fmt.Errorf("chaos: %s: %w", api.name, err)
		}
	}
	l := &motoLane{drawer: newDrawer(o.SendFaults, seed), api: api, moto: moto,
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 32}}}
	records, err := motoRecords(ctx, l.client, moto)
	if err != nil {
		return nil, fmt.Errorf("chaos: %s: %w", api.name, err)
	}
	l.before = records[api.name]
	url, stop, err := serve(http.HandlerFunc(l.serve))
	if err != nil {
		return nil, err
	}
	l.url, l.stop = url, stop
	return l, nil
}

func (l *motoLane) Env() map[string]string { return l.api.env(l.url) }

func (l *motoLane) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return
	}
	to, send := l.api.recipient(r, body)
	k, delay := fkNone, time.Duration(0)
	if send {
		k, delay = l.draw(to)
	}
	switch k {
	case fkTransient, fkOutage:
		l.api.write(w, l.api.refused[l.Intn(2)])
		return
	case fkReject:
		l.api.write(w, l.api.reject)
		return
	case fkBefore:
		<-r.Context().Done()
		return
	}
	// Not bound to the client's context: once written, moto takes the
	// message even if the client goes away.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 30*time.Second)
	defer cancel()
	status, hdr, out, err := localpipeline.Forward(ctx, l.client, r, l.moto+r.URL.RequestURI(), body)
	if err != nil {
		localpipeline.HangUp(w)
		return
	}
	if send && status == http.StatusOK {
		l.took(to)
	}
	switch k {
	case fkAfter:
		<-r.Context().Done()
		return
	case fkAfterError:
		l.api.write(w, l.api.internal)
		return
	case fkSlow:
		t := time.NewTimer(delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			return
		}
	}
	localpipeline.Answer(w, status, hdr, out)
}

// Delivered reads moto_server's record of what the API accepted since
// the lane started.
func (l *motoLane) Delivered(ctx context.Context, w localpipeline.Workload) (map[string]int, map[string]string, error) {
	records, err := motoRecords(ctx, l.client, l.moto)
	if err != nil {
		return nil, nil, fmt.Errorf("chaos: %s: %w", l.api.name, err)
	}
	got := records[l.api.name]
	for a, n := range l.before {
		got[a] -= n
	}
	return byAddress(w, got, false), nil, nil // moto_server may serve other tests too
}

func (l *motoLane) Close() { l.stop() }

// motoRecords counts, per API name, what the moto_server at moto
// recorded (/moto-api/data.json): the SMS ("sns", by phone number) and
// the emails ("ses", by recipient).
func motoRecords(ctx context.Context, client *http.Client, moto string) (map[string]map[string]int, error) {
	var data struct {
		SNS struct {
			SMS []struct {
				PhoneNumber string `json:"phone_number"`
			} `json:"SMS"`
		} `json:"sns"`
		SES struct {
			Message []struct {
				Destinations struct {
					ToAddresses []string `json:"ToAddresses"`
				} `json:"destinations"`
			} `json:"Message"`
		} `json:"ses"`
	}
	if err := testenv.MotoData(ctx, client, moto, &data); err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	sms, email := map[string]int{}, map[string]int{}
	for _, s := range data.SNS.SMS {
		sms[s.PhoneNumber]++
	}
	for _, m := range data.SES.Message {
		for _, to := range m.Destinations.ToAddresses {
			email[to]++
		}
	}
	return map[string]map[string]int{"sns": sms, "ses": email}, nil
}
