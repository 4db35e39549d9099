package main

import (
	"context"
	"os"
	"strings"
)

// The key of the request in the key's published test vector. key needs no AWS
// access; the address and data are not part of the key.
func Example_key() {
	req := `{"tenant_id":"acme","event_id":"evt_01J9Z3","channel":"sms","template":"order_shipped",
	         "recipient":{"id":"user-42","phone":"+15551234567"},"data":{"order_id":"A-1001"}}`
	code := run(context.Background(), []string{"key"}, strings.NewReader(req), os.Stdout, os.Stderr, os.Getenv)
	if code != 0 {
		os.Exit(code)
	}
	// Output: v1_a5ce46682abd7dc1fbbc58b114c4d26e0c9886586f14d590ea4ef4f1f6ee0b71
}
