package notify_test

import (
	"errors"
	"fmt"

	"github.com/sendonce/sendonce/notify"
)

// An accepted body: the body of one SQS message becomes a Request, whose
// Key is the idempotency key the ledger claims next.
func ExampleParse() {
	body := []byte(`{"tenant_id":"acme","event_id":"evt_01J9Z3","channel":"sms","template":"order_shipped",
		"recipient":{"id":"user-42","phone":"+15551234567"},"locale":"pt-BR","data":{"order_id":"A-1001"}}`)
	req, err := notify.Parse(body)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(req.TenantID, req.Channel, req.Template, req.Locale)
	fmt.Println(req.Class) // the default class, filled in by Parse
	fmt.Println(req.Data["order_id"])
	fmt.Println(req.Key())
	// Output:
	// acme sms order_shipped pt-BR
	// transactional
	// A-1001
	// v1_a5ce46682abd7dc1fbbc58b114c4d26e0c9886586f14d590ea4ef4f1f6ee0b71
}

// Rejected bodies: every error is a *InvalidError that names the field at
// fault (empty when the body as a whole is) and matches ErrInvalid. The
// sender moves such a message to the dead-letter queue with the field and
// the reason; it is never retried.
func ExampleParse_rejected() {
	for _, body := range []string{
		`{"tenant_id":"acme"`,
		`{"tenant_id":"acme","event_id":"e1","channel":"fax","template":"otp","recipient":{"id":"u1"}}`,
		`{"tenant_id":"acme","event_id":"e1","channel":"sms","template":"otp","recipient":{"id":"u1","phone":"555-1234"}}`,
		`{"tenant_id":"acme","event_id":"e1","channel":"email","template":"otp","recipient":{"id":"u1","email":"a@example.com"},"class":"urgent"}`,
	} {
		_, err := notify.Parse([]byte(body))
		var invalid *notify.InvalidError
		if !errors.As(err, &invalid) || !errors.Is(err, notify.ErrInvalid) {
			fmt.Println("unexpected:", err)
			continue
		}
		fmt.Printf("field %q: %v\n", invalid.Field, err)
	}
	// Output:
	// field "": invalid request: body is not JSON (it ends early)
	// field "channel": invalid request: channel: "fax" is not one of sms, email, push
	// field "recipient.phone": invalid request: recipient.phone: is not an E.164 number (+ and 7 to 15 digits)
	// field "class": invalid request: class: "urgent" is not one of otp, transactional, marketing
}
