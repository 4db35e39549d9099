package metrics

import (
	"fmt"
	"os"
	"time"
)

// A stack's function writes in the stack's own namespace: the line below
// is what the sender of stack "prod" prints for one SMS sent. The stack's
// alarms read FROM "sendonce/prod" and nothing else.
func ExampleNewEMF() {
	e := NewEMF(os.Stdout, StackNamespace("prod"), "sender")
	e.now = func() time.Time { return time.UnixMilli(1700000000000) } // a fixed clock for the example
	e.Count(Sent, 1, Dim{"channel", "sms"})
	_ = e.Flush()
	// Output:
	// {"Sent":1,"_aws":{"Timestamp":1700000000000,"CloudWatchMetrics":[{"Namespace":"sendonce/prod","Dimensions":[["channel","service"]],"Metrics":[{"Name":"Sent","Unit":"Count"}]}]},"channel":"sms","service":"sender"}
}

func ExampleStackNamespace() {
	fmt.Println(StackNamespace("prod"))
	fmt.Println(StackNamespace("")) // outside a stack
	// Output:
	// sendonce/prod
	// sendonce
}
