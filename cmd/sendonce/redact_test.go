package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/redact"
	"github.com/sendonce/sendonce/internal/sendkey"
)

// TestInspectKeyedTokens: with the deployment's key configured, inspect
// prints the token the functions' logs use for the address, in the
// address and in a FAILED reason; another key gives other tokens; a bad
// key is a one-line error.
func TestInspectKeyedTokens(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	led := b.ledger(t)
	const phone = "+15557654321"
	key := sendkey.Derive(sendkey.Parts{Tenant: "acme", EventID: "keyed", RecipientID: "user-7", Channel: "sms", Template: "login_code"})
	if _, err := led.Claim(ctx, ledger.Entry{Key: key, Tenant: "acme", Channel: "sms", Template: "login_code", RecipientID: "user-7", Address: phone, Body: "x"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	inspect := func(k string) map[string]any {
		vars := map[string]string{"SENDONCE_REDACT_KEY": k}
		for n, v := range b.vars {
			vars[n] = v
		}
		r := runWith(t, vars, "", "inspect", key)
		if r.code != exitOK || r.stderr != "" {
			t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	keyA, keyB := strings.Repeat("a", 40), strings.Repeat("b", 40)
	ra, _ := redact.New([]byte(keyA))
	rb, _ := redact.New([]byte(keyB))
	if got, want := inspect(keyA)["address"], ra.Address(phone); got != want {
		t.Errorf("address under key A = %v, want %s", got, want)
	}
	if got, want := inspect(keyB)["address"], rb.Address(phone); got != want || got == ra.Address(phone) {
		t.Errorf("address under key B = %v, want %s (not key A's token)", got, want)
	}
	vars := map[string]string{"SENDONCE_REDACT_KEY": "short"}
	for n, v := range b.vars {
		vars[n] = v
	}
	oneLineError(t, runWith(t, vars, "", "inspect", key), "SENDONCE_REDACT_KEY")
}
