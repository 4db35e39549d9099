package localpipeline

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/sendonce/sendonce/internal/provider/simulator"
	"github.com/sendonce/sendonce/notify"
)

// WorkloadOptions describes a workload: how many logical messages and how
// much trouble. Rates are fractions of the valid messages, drawn without
// overlap for the faults.
type WorkloadOptions struct {
	// N is the number of valid logical messages.
	N int
	// Seed makes the workload (and the faults it plans) reproducible.
	Seed uint64
	// Tenant is the tenant of every message; default "demo".
	Tenant string
	// SameBatch: a second SQS copy right after the first (same batch,
	// raced by two goroutines of one instance).
	SameBatch float64
	// CrossInstance: a second copy a batch and a half later (likely
	// processed at the same time by another instance).
	CrossInstance float64
	// Late: two more copies sent after the first wave (redeliveries of a
	// message that is already final).
	Late float64
	// The provider faults, each once per chosen message (Count 1).
	TimeoutAfterAccept, TimeoutBeforeAccept, Transient, Permanent, Undeliverable float64
	// Invalid is the number of invalid bodies added (they must reach the
	// dead-letter queue with their reason).
	Invalid int
	// Channels are the channels drawn from (each message picks one at
	// random); empty means sms and email. An adapter that serves one
	// channel gets a workload of that channel only.
	Channels []notify.Channel
	// AddressBase offsets every recipient's number (phone +1555 followed
	// by 7 digits from AddressBase + i; email user number likewise), so
	// that runs sharing one provider counterpart (moto_server's SMS
	// record) do not share recipients.
	AddressBase int
}

// DefaultWorkload returns the demo's mix for n messages and seed.
func DefaultWorkload(n int, seed uint64) WorkloadOptions {
	return WorkloadOptions{
		N: n, Seed: seed, Tenant: "demo",
		SameBatch: 0.10, CrossInstance: 0.08, Late: 0.06,
		TimeoutAfterAccept: 0.04, TimeoutBeforeAccept: 0.02, Transient: 0.06, Permanent: 0.015, Undeliverable: 0.01,
		Invalid: max(5, n/50),
	}
}

// Message is one logical message of a workload.
type Message struct {
	// Body is the SQS message body (every copy is identical).
	Body string
	// Valid is false for a body the sender must dead-letter.
	Valid bool
	// Key is the idempotency key of a valid message.
	Key string
	// Channel, Class and Address of a valid message; Address is the raw
	// phone number or email address (never to appear in a log).
	Channel, Class, Address string
	// Copies is the number of SQS messages sent with this body.
	Copies int
	// Fault is the provider fault planned for the message's first send
	// (zero Kind: none).
	Fault simulator.Fault
	// WantFailed is true when the message must end FAILED (a permanent
	// provider rejection).
	WantFailed bool
	// InvalidField is the field an invalid body breaks ("" for the body
	// as a whole).
	InvalidField string
}

// Workload is a generated workload.
type Workload struct {
	Messages []Message
	// First is the first wave of bodies, in sending order; Late is sent
	// after it.
	First, Late []string
}

// Copies returns the number of SQS messages the workload sends.
func (w Workload) Copies() int { return len(w.First) + len(w.Late) }

// Addresses returns every address the workload uses, valid or not.
func (w Workload) Addresses() []string {
	var out []string
	for _, m := range w.Messages {
		if m.Address != "" {
			out = append(out, m.Address)
		}
	}
	return out
}

// Faults returns the provider faults the workload plans, one per faulted
// message, each restricted to the message's key.
func (w Workload) Faults() []simulator.Fault {
	var out []simulator.Fault
	for _, m := range w.Messages {
		if m.Fault.Kind != "" {
			out = append(out, m.Fault)
		}
	}
	return out
}

// NewWorkload generates the workload o describes. It is deterministic in
// o.
func NewWorkload(o WorkloadOptions) Workload {
	o.Tenant = cmp.Or(o.Tenant, "demo")
	rng := rand.New(rand.NewPCG(o.Seed, o.Seed^0x5eed))
	var w Workload
	classes := []notify.Class{notify.ClassOTP, notify.ClassTransactional, notify.ClassMarketing}
	channels := o.Channels
	if len(channels) == 0 {
		channels = []notify.Channel{notify.ChannelSMS, notify.ChannelEmail}
	}
	for i := range o.N {
		ch := notify.ChannelSMS
		if len(channels) == 1 {
			ch = channels[0]
		} else if c := channels[rng.IntN(len(channels))]; c != notify.ChannelSMS {
			ch = c
		}
		addr := (o.AddressBase + 2000000 + i) % 10000000
		class := classes[rng.IntN(len(classes))]
		req := notify.Request{
			TenantID: o.Tenant,
			EventID:  fmt.Sprintf("evt-%d-%04d", o.Seed, i),
			Channel:  ch,
			Class:    class,
			Recipient: notify.Recipient{
				ID: fmt.Sprintf("user-%04d", i),
			},
		}
		switch ch {
		case notify.ChannelSMS:
			req.Recipient.Phone = fmt.Sprintf("+1555%07d", addr)
		default:
			req.Recipient.Email = fmt.Sprintf("demo.user%04d@example.com", o.AddressBase+i)
		}
		switch {
		case class == notify.ClassOTP:
			req.Template, req.Data = "otp", map[string]any{"code": fmt.Sprintf("%06d", rng.IntN(1000000))}
		case class == notify.ClassMarketing && ch == notify.ChannelSMS:
			req.Template, req.Data = "promo", map[string]any{"message": "Spring sale: 20% off today."}
		case class == notify.ClassMarketing:
			// Pre-rendered by the producer: no stored template is used.
			req.Template, req.Content = "newsletter", &notify.Content{
				Subject: "sendonce news", Text: fmt.Sprintf("Issue %d: what is new in sendonce.", i),
				HTML: fmt.Sprintf("<p>Issue <b>%d</b>: what is new in sendonce.</p>", i),
			}
		default:
			req.Template, req.Data = "order_shipped", map[string]any{"order_id": fmt.Sprintf("A-%05d", i)}
		}
		body, _ := json.Marshal(req)
		w.Messages = append(w.Messages, Message{
			Body: string(body), Valid: true, Key: req.Key(), Channel: string(ch), Class: string(class),
			Address: req.Address(), Copies: 1,
		})
	}

	// Faults: distinct messages per kind, in a shuffled order.
	order := rng.Perm(o.N)
	next := 0
	take := func(rate float64) []int {
		n := int(rate*float64(o.N) + 0.5)
		n = min(n, o.N-next)
		out := order[next : next+n]
		next += n
		return out
	}
	plan := func(rate float64, f simulator.Fault, failed bool) {
		for _, i := range take(rate) {
			f.Reference, f.Count = w.Messages[i].Key, 1
			w.Messages[i].Fault, w.Messages[i].WantFailed = f, failed
		}
	}
	plan(o.TimeoutAfterAccept, simulator.Fault{Kind: simulator.FaultTimeoutAfterAccept}, false)
	plan(o.TimeoutBeforeAccept, simulator.Fault{Kind: simulator.FaultTimeoutBeforeAccept}, false)
	for _, i := range take(o.Transient) {
		status := []int{503, 500, 429}[rng.IntN(3)]
		w.Messages[i].Fault = simulator.Fault{Kind: simulator.FaultStatus, Status: status, Reference: w.Messages[i].Key, Count: 1}
	}
	plan(o.Permanent, simulator.Fault{Kind: simulator.FaultStatus, Status: 400}, true)
	plan(o.Undeliverable, simulator.Fault{Kind: simulator.FaultUndeliverable}, false)

	// Invalid bodies, one of each kind in turn.
	invalid := []struct {
		field, body string
		address     string
	}{
		{"", `{"tenant_id":"demo","event_id":`, ""},
		{"event_id", `{"tenant_id":"demo","channel":"sms","template":"otp","recipient":{"id":"u","phone":"+15550009999"}}`, "+15550009999"},
		{"recipient.phone", `{"tenant_id":"demo","event_id":"bad-phone","channel":"sms","template":"otp","recipient":{"id":"u","phone":"555-0100-77"}}`, "555-0100-77"},
		{"channel", `{"tenant_id":"demo","event_id":"bad-channel","channel":"fax","template":"otp","recipient":{"id":"u"}}`, ""},
		{"recipient.email", `{"tenant_id":"demo","event_id":"bad-email","channel":"email","template":"otp","recipient":{"id":"u","email":"no-at-sign.example.com"}}`, "no-at-sign.example.com"},
		{"class", `{"tenant_id":"demo","event_id":"bad-class","channel":"sms","class":"urgent","template":"otp","recipient":{"id":"u","phone":"+15550008888"}}`, "+15550008888"},
	}
	for i := range o.Invalid {
		v := invalid[i%len(invalid)]
		body := v.body
		if i >= len(invalid) && v.field != "" {
			// Keep later copies of a kind distinct bodies.
			body = body[:len(body)-1] + fmt.Sprintf(`,"n":%d}`, i)
		}
		w.Messages = append(w.Messages, Message{Body: body, InvalidField: v.field, Address: v.address, Copies: 1})
	}

	// Sending order: position i for message i; extra copies at offsets.
	type slot struct {
		pos  float64
		body string
	}
	var slots []slot
	for i, m := range w.Messages {
		slots = append(slots, slot{float64(i), m.Body})
	}
	dup := order[next:] // messages without a fault get the duplicates first
	dup = append(dup, order[:next]...)
	k := 0
	copies := func(rate float64, n int, add func(i int)) {
		for range int(rate*float64(o.N) + 0.5) {
			if k >= len(dup) {
				return
			}
			i := dup[k]
			k++
			w.Messages[i].Copies += n
			add(i)
		}
	}
	copies(o.SameBatch, 1, func(i int) { slots = append(slots, slot{float64(i) + 0.5, w.Messages[i].Body}) })
	copies(o.CrossInstance, 1, func(i int) { slots = append(slots, slot{float64(i) + 15.5, w.Messages[i].Body}) })
	copies(o.Late, 2, func(i int) { w.Late = append(w.Late, w.Messages[i].Body, w.Messages[i].Body) })
	// Invalid bodies are spread through the wave rather than at its end.
	for j := range slots {
		if j >= o.N && j < len(w.Messages) {
			slots[j].pos = float64(rng.IntN(max(1, o.N)))
		}
	}
	slices.SortStableFunc(slots, func(a, b slot) int { return cmp.Compare(a.pos, b.pos) })
	for _, s := range slots {
		w.First = append(w.First, s.body)
	}
	return w
}
