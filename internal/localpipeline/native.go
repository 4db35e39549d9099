package localpipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"

	"github.com/sendonce/sendonce/internal/groundtruth"
	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/testenv"
	"github.com/sendonce/sendonce/notify"
)

// NativeEnv returns the Options.Env of a pipeline whose functions send SMS
// through Amazon SNS and email through Amazon SES, both on moto_server at
// moto, as a deployment with SmsProvider sns and EmailProvider ses does.
// It verifies from as an SES identity first (moto refuses a send from an
// unverified one, as SES does).
func NativeEnv(ctx context.Context, moto, from string) (map[string]string, error) {
	c := sesv2.NewFromConfig(testenv.Config(), func(o *sesv2.Options) { o.BaseEndpoint = aws.String(moto) })
	if _, err := c.CreateEmailIdentity(ctx, &sesv2.CreateEmailIdentityInput{EmailIdentity: aws.String(from)}); err != nil {
		return nil, fmt.Errorf("localpipeline: verify SES identity: %w", err)
	}
	return map[string]string{
		"SENDONCE_SMS_PROVIDER":   "sns",
		"SENDONCE_EMAIL_PROVIDER": "ses",
		"SENDONCE_SES_FROM":       from,
		"AWS_ENDPOINT_URL_SESV2":  moto,
	}, nil
}

// NativeReport is what RunNative found in moto_server's record of the SMS
// and email sent: its ground truth.
type NativeReport struct {
	// SMS and Email count the logical messages of each channel.
	SMS, Email int
	// SMSSent and EmailSent count the messages moto recorded once.
	SMSSent, EmailSent int
	PhaseVerdicts
}

// PhaseVerdicts is what a phase (RunNative, RunSMTP) found of each
// message in its ground truth.
type PhaseVerdicts struct {
	Elapsed time.Duration
	// Copies counts the SQS messages sent for the phase's messages.
	Copies int
	// Twice lists the keys recorded more than once; Lost those SENT (or
	// never final) but never recorded; NotSent those whose row is final
	// but not SENT, with state and reason.
	Twice, Lost, NotSent []string
	// Abandoned counts rows the reconciler gave up on by class policy: an
	// ambiguous send (no answer in time after the request was written)
	// through providers that can neither drop a repeat nor be asked.
	// AbandonedRecorded counts those the ground truth did record: the
	// policy's cost.
	Abandoned, AbandonedRecorded int
	// Leaks counts the ways the functions' logs could expose an
	// address of the run (Scan); LeakDetail names each one's instance and
	// form (never the address).
	Leaks      int
	LeakDetail []string
}

// OK reports whether no message was recorded twice, every message is
// SENT and recorded once or abandoned by policy after an ambiguous send,
// and no address reached a log.
func (v PhaseVerdicts) OK() bool {
	return len(v.Twice) == 0 && len(v.Lost) == 0 && len(v.NotSent) == 0 && v.Leaks == 0
}

// writeDetail prints a line per row not SENT and per leak.
func (v PhaseVerdicts) writeDetail(w io.Writer) {
	for _, k := range v.NotSent {
		fmt.Fprintf(w, "  not SENT: %s\n", k)
	}
	for _, d := range v.LeakDetail {
		fmt.Fprintf(w, "  leak: %s\n", d)
	}
}

// WriteSummary prints r.
func (r NativeReport) WriteSummary(w io.Writer) {
	fmt.Fprintf(w, "AWS-native providers (moto_server ground truth) in %s:\n", r.Elapsed.Round(10*time.Millisecond))
	fmt.Fprintf(w, "  SMS through SNS:   %d messages, %d recorded once\n", r.SMS, r.SMSSent)
	fmt.Fprintf(w, "  email through SES: %d messages, %d recorded once\n", r.Email, r.EmailSent)
	fmt.Fprintf(w, "  SQS copies sent: %d; delivered twice: %d; lost: %d; other final states: %d; address leaks in logs: %d\n",
		r.Copies, len(r.Twice), len(r.Lost), len(r.NotSent), r.Leaks)
	fmt.Fprintf(w, "  ambiguous sends abandoned by class policy: %d (moto had accepted %d of them: neither provider can be asked)\n",
		r.Abandoned, r.AbandonedRecorded)
	r.writeDetail(w)
}

// nativeMessage is one message of a phase (RunNative, RunSMTP) and where
// its ground truth shows it.
type nativeMessage struct {
	key, channel, address string
}

// nativeTenant is the tenant of the messages RunNative and RunSMTP send: one
// whose example templates Start stores by default.
const nativeTenant = "demo"

// RunNative sends n messages (half SMS, half email), each enqueued copies
// times, through p (started with NativeEnv), waits until every row is
// final or timeout passes, and compares moto_server's record with what
// was asked: each message exactly once.
func RunNative(ctx context.Context, p *Pipeline, n, copies int, timeout time.Duration) (NativeReport, error) {
	start := time.Now()
	run := testenv.RandomID()[:8]
	var (
		msgs []nativeMessage
		reqs []notify.Request
		rep  NativeReport
	)
	for i := range n {
		req := notify.Request{
			TenantID: nativeTenant, EventID: fmt.Sprintf("evt_native_%s_%d", run, i), Template: "order_shipped",
			Recipient: notify.Recipient{ID: fmt.Sprintf("user-%d", i)}, Class: notify.ClassTransactional,
			Data: map[string]any{"order_id": fmt.Sprintf("N-%s-%d", run, i)},
		}
		m := nativeMessage{channel: "sms", address: fmt.Sprintf("+1555%07d", (i*7919+int(start.UnixNano()/1000))%10000000)}
		req.Channel, req.Recipient.Phone = notify.ChannelSMS, m.address
		if i%2 == 1 {
			m = nativeMessage{channel: "email", address: fmt.Sprintf("user%d-%s@example.com", i, run)}
			req.Channel, req.Recipient.Phone, req.Recipient.Email = notify.ChannelEmail, "", m.address
			rep.Email++
		} else {
			rep.SMS++
		}
		m.key = req.Key()
		msgs, reqs = append(msgs, m), append(reqs, req)
	}
	st, err := settle(ctx, p, msgs, reqs, copies, timeout, &rep.PhaseVerdicts)
	if err != nil {
		return rep, err
	}
	sms, email, err := MotoRecords(ctx, nil, p.opts.MotoEndpoint)
	if err != nil {
		return rep, err
	}
	got := func(m nativeMessage) int {
		if m.channel == "email" {
			return email[m.address]
		}
		return sms[m.address]
	}
	st.judgeAll(p, &rep.PhaseVerdicts, msgs, got, func(m nativeMessage) {
		if m.channel == "sms" {
			rep.SMSSent++
		} else {
			rep.EmailSent++
		}
	})
	rep.Elapsed = time.Since(start)
	return rep, nil
}

// settled holds the ledger rows of a phase's messages once settle
// returned, by key (a row never final holds its last state).
type settled map[string]ledger.Record

// settle enqueues each of reqs copies times and waits until the row of
// every message is final or timeout passes. It sets v's Copies.
func settle(ctx context.Context, p *Pipeline, msgs []nativeMessage, reqs []notify.Request, copies int, timeout time.Duration, v *PhaseVerdicts) (settled, error) {
	st := settled{}
	var bodies []string
	for _, req := range reqs {
		body, err := json.Marshal(req)
		if err != nil {
			return st, fmt.Errorf("localpipeline: encode request: %w", err)
		}
		for range copies {
			bodies = append(bodies, string(body))
		}
	}
	v.Copies = len(bodies)
	if err := p.Enqueue(ctx, bodies...); err != nil {
		return st, err
	}
	deadline := time.Now().Add(timeout)
	for _, m := range msgs {
		for {
			r, err := p.Ledger().Get(ctx, m.key)
			if err == nil {
				st[m.key] = r
			}
			if err == nil && r.State.Final() || time.Now().After(deadline) {
				break
			}
			select {
			case <-ctx.Done():
				return st, ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return st, nil
}

// judgeAll judges each of msgs, delivered got(m) times through an
// adapter that can neither drop a repeat nor be asked (SNS, SES, SMTP),
// with groundtruth.Judge into v (once is called for each delivered once,
// as asked), and scans p's logs for the messages' addresses. A phase
// cannot tell an ambiguous attempt from its logs: a class policy's
// abandon counts as the policy's.
func (st settled) judgeAll(p *Pipeline, v *PhaseVerdicts, msgs []nativeMessage, got func(nativeMessage) int, once func(nativeMessage)) {
	for _, m := range msgs {
		n := got(m)
		rec, ok := st[m.key]
		state := rec.State
		if !ok {
			state = NoRow
		}
		notSent := fmt.Sprintf("%s (%s %s: %s)", m.key, m.channel, state, rec.Reason)
		if !state.Final() {
			notSent = m.key + " (never final)"
		}
		for _, k := range groundtruth.Judge(groundtruth.Facts{
			Key: m.key, Adapter: m.channel, Class: string(notify.ClassTransactional), Capability: groundtruth.Neither,
			Received: n, State: state, Reason: rec.Reason, Ambiguous: true,
		}) {
			switch k {
			case groundtruth.Once:
				once(m)
			case groundtruth.Twice, groundtruth.TwiceAgainstPolicy, groundtruth.TwiceByPolicy, groundtruth.Unresolved, groundtruth.Contradiction:
				v.Twice = append(v.Twice, m.key) // delivered twice, or delivered though not SENT
			case groundtruth.Lost:
				if state.Final() {
					v.Lost = append(v.Lost, m.key)
				} else {
					v.NotSent = append(v.NotSent, notSent)
				}
			case groundtruth.AbandonedDelivered, groundtruth.AbandonedByPolicy, groundtruth.AbandonedMaxAge:
				v.Abandoned++
				v.AbandonedRecorded += n
			default:
				if k.Violation() {
					v.NotSent = append(v.NotSent, notSent)
				}
			}
		}
	}
	v.Leaks, v.LeakDetail = leakDetail(Scan(p.Logs(), p.Redactor, addresses(msgs)))
}

// addresses returns the addresses of msgs.
func addresses(msgs []nativeMessage) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.address
	}
	return out
}

// MotoRecords counts the SMS (by phone number) and emails (by recipient)
// the moto_server at moto recorded (/moto-api/data.json), read through
// client (http.DefaultClient if nil).
func MotoRecords(ctx context.Context, client *http.Client, moto string) (sms, email map[string]int, err error) {
	if client == nil {
		client = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, moto+"/moto-api/data.json", nil)
	if err != nil {
		return nil, nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("localpipeline: read moto records: %w", err)
	}
	defer resp.Body.Close()
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
	if err := json.NewDecoder(resp.Body).Decode(&data); err != nil {
		return nil, nil, fmt.Errorf("localpipeline: decode moto records: %w", err)
	}
	sms, email = map[string]int{}, map[string]int{}
	for _, s := range data.SNS.SMS {
		sms[s.PhoneNumber]++
	}
	for _, m := range data.SES.Message {
		for _, to := range m.Destinations.ToAddresses {
			email[to]++
		}
	}
	return sms, email, nil
}
