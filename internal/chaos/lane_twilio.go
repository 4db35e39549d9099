package chaos

import (
	"context"
	"time"

	"github.com/sendonce/sendonce/internal/localpipeline"
	"github.com/sendonce/sendonce/internal/provider/registry"
	"github.com/sendonce/sendonce/internal/provider/twilio/twiliotest"
)

// twilioLane is the Twilio adapter against twiliotest: Twilio's Messages
// API as documented, with its lookup semantics (a list by recipient
// filtered by send date, matched by body).
type twilioLane struct {
	*drawer
	fake    *twiliotest.Server
	timeout time.Duration
}

// twilioFrom is the lane's sender number (Twilio's magic test number).
const twilioFrom = "+15005550006"

func newTwilioLane(_ context.Context, o Options, seed uint64) (Counterpart, error) {
	l := &twilioLane{fake: twiliotest.NewServer(), drawer: newDrawer(o.SendFaults, seed), timeout: o.ProviderTimeout}
	l.fake.SetDecide(l.decide)
	return l, nil
}

// decide maps a drawn fault onto Twilio's wire.
func (l *twilioLane) decide(to string) twiliotest.Fault {
	l.inFlight.Add(1)
	defer l.inFlight.Add(-1)
	k, delay := l.draw(to)
	switch k {
	case fkTransient, fkOutage:
		if l.Intn(2) == 0 {
			return twiliotest.Fault{Status: 429, Code: 20429, Message: "Too Many Requests"}
		}
		return twiliotest.Fault{Status: 503, Code: 20503, Message: "Service unavailable"}
	case fkBefore:
		return twiliotest.Fault{HangBeforeAccept: true}
	case fkAfter:
		return twiliotest.Fault{AcceptThenHang: true}
	case fkAfterError:
		return twiliotest.Fault{AcceptThenStatus: 500, Code: 20500, Message: "Internal Server Error"}
	case fkSlow:
		return twiliotest.Fault{Delay: delay}
	case fkReject:
		return twiliotest.Fault{Status: 400, Code: 21610, Message: "Attempt to send to unsubscribed recipient"}
	}
	return twiliotest.Fault{}
}

func (l *twilioLane) Env() map[string]string {
	return map[string]string{
		registry.EnvSMSProvider: "twilio", registry.EnvEmailProvider: "",
		registry.EnvTwilioAccountSID: l.fake.AccountSID, registry.EnvTwilioAuthToken: l.fake.AuthToken,
		registry.EnvTwilioFrom: twilioFrom, registry.EnvTwilioBaseURL: l.fake.URL,
	}
}

func (l *twilioLane) Delivered(_ context.Context, w localpipeline.Workload) (map[string]int, map[string]string, error) {
	count := map[string]int{}
	for _, m := range l.fake.Messages() {
		count[m.To]++
	}
	return byAddress(w, count, true), nil, nil
}

// byAddress turns counts per recipient into counts per workload key (a
// lane's workload gives every message its own recipient). With strays,
// recipients outside the workload are counted under one pseudo-key (a
// counterpart only this run uses must have none); without, they are
// ignored (a counterpart shared with other tests, as moto_server is in
// `make test`).
func byAddress(w localpipeline.Workload, perAddr map[string]int, strays bool) map[string]int {
	out := map[string]int{}
	known := map[string]bool{}
	for _, m := range w.Messages {
		if m.Valid && m.Address != "" {
			known[m.Address] = true
			if n := perAddr[m.Address]; n > 0 {
				out[m.Key] = n
			}
		}
	}
	for a, n := range perAddr {
		if strays && !known[a] {
			out["(recipients outside the workload)"] += n
		}
	}
	return out
}

func (l *twilioLane) Sent() int {
	to := map[string]bool{}
	for _, m := range l.fake.Messages() {
		to[m.To] = true
	}
	return len(to)
}

func (l *twilioLane) Capability(string) Capability { return CanAvoid }

func (l *twilioLane) Close() { l.fake.Close() }
