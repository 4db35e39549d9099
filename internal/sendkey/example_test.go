package sendkey_test

import (
	"fmt"

	"github.com/sendonce/sendonce/internal/sendkey"
)

// The key of one logical message: the same tenant, event, recipient,
// channel and template give the same key on every delivery and every
// attempt; another channel is another message.
func ExampleDerive() {
	sms := sendkey.Parts{
		Tenant:      "acme",
		EventID:     "evt_01J9Z3",
		RecipientID: "user-42",
		Channel:     "sms",
		Template:    "order_shipped",
	}
	fmt.Println(sendkey.Derive(sms))
	fmt.Println(sendkey.Derive(sms) == sendkey.Derive(sms)) // a redelivery

	email := sms
	email.Channel = "email"
	fmt.Println(sendkey.Derive(email))
	// Output:
	// v1_a5ce46682abd7dc1fbbc58b114c4d26e0c9886586f14d590ea4ef4f1f6ee0b71
	// true
	// v1_6c00a0e84491fd2a583baf3a0da2017bbabe3a60e9826522cbe1abf446529b2f
}

// Length-prefixed fields keep the encoding unambiguous: moving a separator
// from one field to the next gives another key.
func ExampleDerive_unambiguous() {
	a := sendkey.Derive(sendkey.Parts{Tenant: "a|b", EventID: "c", RecipientID: "r", Channel: "sms", Template: "t"})
	b := sendkey.Derive(sendkey.Parts{Tenant: "a", EventID: "b|c", RecipientID: "r", Channel: "sms", Template: "t"})
	fmt.Println(a == b)
	// Output:
	// false
}

// Valid checks the shape of a key that arrives from outside (a callback's
// reference, an API path) before it reaches storage.
func ExampleValid() {
	for _, s := range []string{
		"v1_a5ce46682abd7dc1fbbc58b114c4d26e0c9886586f14d590ea4ef4f1f6ee0b71",
		"v1_A5CE46682ABD7DC1FBBC58B114C4D26E0C9886586F14D590EA4EF4F1F6EE0B71", // upper case
		"v1_a5ce4668",      // too short
		"../../etc/passwd", // not a key at all
	} {
		fmt.Println(sendkey.Valid(s))
	}
	// Output:
	// true
	// false
	// false
	// false
}
