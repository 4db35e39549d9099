package chaos

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"

	"github.com/sendonce/sendonce/internal/localpipeline"
	"github.com/sendonce/sendonce/internal/provider/sesprovider"
	"github.com/sendonce/sendonce/internal/testenv"
	"github.com/sendonce/sendonce/provider"
)

// TestSESLane drives the real SES adapter through the lane's front to
// moto_server's SES v2: each injected fault must reach the adapter as the
// kind SES's answer means, and the ground truth (moto's record) must
// count exactly the emails moto took, also when the answer after taking
// one was an error.
func TestSESLane(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cp, err := newSESLane(ctx, Options{MotoEndpoint: testenv.MotoEndpoint(t), SendFaults: SendFaults{AfterError: 1}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cp.Close)
	l := cp.(*motoLane)
	client := sesv2.NewFromConfig(testenv.Config(), func(o *sesv2.Options) { o.BaseEndpoint = aws.String(l.url) })
	p, err := sesprovider.New(sesprovider.Config{Client: client, From: sesFrom, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	run := time.Now().UnixNano()
	addr := func(name string) string { return fmt.Sprintf("%s-%d@ses.chaos.test", name, run) }
	send := func(to string) error {
		_, err := p.Send(ctx, provider.Message{Key: "v1_" + to, Channel: "email", To: to, Subject: "s", Body: "b"})
		return err
	}
	w := localpipeline.Workload{}
	for i, name := range []string{"ok", "outage", "rejected", "after-error"} {
		w.Messages = append(w.Messages, localpipeline.Message{Key: fmt.Sprint("k", i), Valid: true, Address: addr(name)})
	}

	if err := send(addr("ok")); err != nil {
		t.Fatalf("send without faults: %v", err)
	}
	cp.Outage(true)
	if err := send(addr("outage")); provider.KindOf(err) != provider.Transient {
		t.Errorf("send during the outage: %v (kind %s), want transient", err, provider.KindOf(err))
	}
	cp.Outage(false)
	if err := cp.Plan(localpipeline.Message{Address: addr("rejected"), WantFailed: true}, 0); err != nil {
		t.Fatal(err)
	}
	if err := send(addr("rejected")); provider.KindOf(err) != provider.Permanent {
		t.Errorf("send of a planned rejection: %v (kind %s), want permanent", err, provider.KindOf(err))
	}
	cp.Faults(true)
	if err := send(addr("after-error")); provider.KindOf(err) != provider.Ambiguous {
		t.Errorf("send answered 500 after moto took it: %v (kind %s), want ambiguous", err, provider.KindOf(err))
	}
	got, _, err := cp.Delivered(ctx, w)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"k0": 1, "k3": 1}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("moto's record = %v, want %v (ok and after-error taken, outage and rejected not)", got, want)
	}
}
