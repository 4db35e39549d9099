package memledger_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/ledger/memledger"
)

// The claim/mark cycle of one message: a claim before the provider call,
// a duplicate delivery that collides with it, the SENT mark after the
// provider accepted, and the final row. Every implementation of
// ledger.Ledger behaves the same (package ledgertest); memledger stands in
// for DynamoDB here, with a fixed clock and numbered claim ids so the
// output is stable.
func Example() {
	ctx := context.Background()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	ids := 0
	l := memledger.New(memledger.Config{Now: func() time.Time { return now }, ClaimID: func() string { ids++; return fmt.Sprintf("claim-%d", ids) }})

	entry := ledger.Entry{
		Key:         "v1_a5ce46682abd7dc1fbbc58b114c4d26e0c9886586f14d590ea4ef4f1f6ee0b71",
		Tenant:      "acme",
		Channel:     "sms",
		Class:       "transactional",
		Template:    "order_shipped",
		RecipientID: "user-42",
		Address:     "+15551234567",
		Body:        "Your order A-1001 has shipped.",
	}

	// 1. Claim the key (one conditional write) before calling the provider.
	c, err := l.Claim(ctx, entry, time.Minute)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("claimed:", c.ClaimID, "attempt", c.Attempt, "lease until", c.LeaseUntil.Format(time.TimeOnly))

	// 2. A duplicate delivery claims the same key: its failed write returns
	// the row it collided with, so no read is needed to decide.
	_, err = l.Claim(ctx, entry, time.Minute)
	cur, conflict := ledger.AsConflict(err)
	fmt.Println("duplicate:", errors.Is(err, ledger.ErrExists), conflict, cur.State, "lease live:", !cur.Stale(now))

	// 3. The provider accepted: mark SENT under the claim (a second
	// conditional write, fenced on the claim id).
	now = now.Add(200 * time.Millisecond)
	if err := l.Mark(ctx, c, ledger.Outcome{State: ledger.StateSent, ProviderMessageID: "msg-1"}); err != nil {
		fmt.Println(err)
		return
	}

	// 4. The final row keeps the outcome and the provider's id, but no
	// longer the address or the message text.
	rec, err := l.Get(ctx, entry.Key)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("row:", rec.State, rec.ProviderMessageID, "attempts", rec.Attempts, "final:", rec.State.Final())
	fmt.Printf("address %q, body %q\n", rec.Address, rec.Body)
	fmt.Println("updated", rec.UpdatedAt.Format(time.StampMilli), "expires", rec.ExpiresAt.Format(time.DateOnly))

	// 5. A redelivery after SENT collides with the final row: acknowledged
	// as a prevented duplicate. A mark under the old claim is fenced out.
	_, err = l.Claim(ctx, entry, time.Minute)
	cur, _ = ledger.AsConflict(err)
	fmt.Println("redelivery finds:", cur.State)
	err = l.Mark(ctx, c, ledger.Outcome{State: ledger.StateUncertain})
	fmt.Println("second mark fenced out:", errors.Is(err, ledger.ErrFencingLost))
	// Output:
	// claimed: claim-1 attempt 1 lease until 12:01:00
	// duplicate: true true PENDING lease live: true
	// row: SENT msg-1 attempts 1 final: true
	// address "", body ""
	// updated Dec  1 12:00:00.200 expires 2026-12-31
	// redelivery finds: SENT
	// second mark fenced out: true
}
