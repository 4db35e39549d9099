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

// WorkloadOptions describes a workload: how many logical messages, the
// planned rejections among them, and invalid bodies. Rates are fractions
// of the valid messages, drawn without overlap.
type WorkloadOptions struct {
	// N is the number of valid logical messages.
	N int
	// Seed makes the workload (and the faults it plans) reproducible.
	Seed uint64
	// Tenant is the tenant of every message; default "demo".
	Tenant string
	// Permanent and Undeliverable are the shares of messages whose first
	// send is rejected (400) or accepted but never delivered, each once
	// per chosen message.
	Permanent, Undeliverable float64
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
	// First is every body once, in sending order.
	First []string
}

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

// NewWorkload generates the workload o describes. It is deterministic in
// o. Its emails carry text outside ASCII (a name in the data, the
// newsletter's subject), which an email adapter must encode.
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
		ch := channels[0]
		if len(channels) > 1 {
			ch = channels[rng.IntN(len(channels))]
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
				Subject: "Les nouveautés de sendonce", Text: fmt.Sprintf("Issue %d: what is new in sendonce.", i),
				HTML: fmt.Sprintf("<p>Issue <b>%d</b>: what is new in sendonce.</p>", i),
			}
		default:
			req.Template, req.Data = "order_shipped", map[string]any{"order_id": fmt.Sprintf("A-%05d", i)}
			if ch == notify.ChannelEmail {
				req.Data["name"] = "José"
			}
		}
		body, _ := json.Marshal(req)
		w.Messages = append(w.Messages, Message{
			Body: string(body), Valid: true, Key: req.Key(), Channel: string(ch), Class: string(class),
			Address: req.Address(),
		})
	}

	// Planned rejections: distinct messages, in a shuffled order.
	order := rng.Perm(o.N)
	next := 0
	plan := func(rate float64, f simulator.Fault, failed bool) {
		n := min(int(rate*float64(o.N)+0.5), o.N-next)
		for _, i := range order[next : next+n] {
			f.Reference, f.Count = w.Messages[i].Key, 1
			w.Messages[i].Fault, w.Messages[i].WantFailed = f, failed
		}
		next += n
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
		w.Messages = append(w.Messages, Message{Body: body, InvalidField: v.field, Address: v.address})
	}

	// Sending order: the valid messages in order, the invalid bodies
	// spread through them rather than at the end.
	type slot struct {
		pos  float64
		body string
	}
	slots := make([]slot, 0, len(w.Messages))
	for i, m := range w.Messages {
		pos := float64(i)
		if i >= o.N {
			pos = float64(rng.IntN(max(1, o.N)))
		}
		slots = append(slots, slot{pos, m.Body})
	}
	slices.SortStableFunc(slots, func(a, b slot) int { return cmp.Compare(a.pos, b.pos) })
	for _, s := range slots {
		w.First = append(w.First, s.body)
	}
	return w
}
