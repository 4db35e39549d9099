package chaos

import (
	"time"

	"github.com/sendonce/sendonce/internal/ddbfront"
	"github.com/sendonce/sendonce/internal/provider/simulator"
)

// Demo returns make demo's plan for n messages and seed: every lane, as
// in Defaults, under the faults a person's first look should show and
// no more: copies of a message on the queue (some handed to two
// instances at once), provider refusals and sends left without an answer
// after the provider took them (the reconciler settles them), planned
// rejections, callbacks posted twice and out of order, DynamoDB answers
// lost (the SDK's retry finds the write). No outage, no DynamoDB
// throttling storm, no SIGKILL: a small run drains in well under a
// minute.
func Demo(n int, seed uint64) Options {
	o := Defaults(n, seed)
	o.Invalid = 6 // one of each kind
	o.Redeliver, o.RedeliverSpread = 0.10, 4*time.Second
	o.Concurrent = 0.05
	o.CrashEvery = 0
	o.ProviderFaults = simulator.RandomFaults{StatusRate: 0.03, Statuses: []int{503, 429}, TimeoutAfterRate: 0.02}
	o.SendFaults = SendFaults{Transient: 0.03, After: 0.01}
	o.Slow, o.Permanent, o.Undeliverable = 0, 0.01, 0.01
	o.Latency, o.Jitter = 5*time.Millisecond, 20*time.Millisecond
	o.Callbacks = simulator.CallbackOptions{Duplicates: 1, Reorder: true, Workers: 4}
	o.Storm = ddbfront.Storm{DropRate: 0.01}
	o.Outage = 0
	o.FaultWindow, o.Timeout = 15*time.Second, 2*time.Minute
	o.ProgressEvery = 5 * time.Second
	return o
}
