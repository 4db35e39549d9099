package chaos

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/aws/aws-sdk-go-v2/service/sns"

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
	cp.SetFaults(outage)
	if err := send(addr("outage")); provider.KindOf(err) != provider.Transient {
		t.Errorf("send during the outage: %v (kind %s), want transient", err, provider.KindOf(err))
	}
	cp.SetFaults(faultsOff)
	cp.Plan(localpipeline.Message{Address: addr("rejected"), WantFailed: true}, 0)
	if err := send(addr("rejected")); provider.KindOf(err) != provider.Permanent {
		t.Errorf("send of a planned rejection: %v (kind %s), want permanent", err, provider.KindOf(err))
	}
	cp.SetFaults(faultsOn)
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

// TestMotoLaneCountsFromItsStart: moto keeps every message it ever took,
// and runs draw their recipients from one range; a lane counts what moto
// took since the lane started, so a number an earlier lane (an earlier
// run on the same moto_server) sent to is not counted twice. Without the
// lane's starting record, the second lane saw 2 here (seen in sns-only
// chaos runs against one moto_server: hundreds "delivered twice").
func TestMotoLaneCountsFromItsStart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	phone := fmt.Sprintf("+1999%07d", time.Now().UnixNano()%10000000)
	w := localpipeline.Workload{Messages: []localpipeline.Message{{Key: "k", Valid: true, Address: phone}}}
	for run := 1; run <= 2; run++ {
		cp, err := newSNSLane(ctx, Options{MotoEndpoint: testenv.MotoEndpoint(t)}, 1)
		if err != nil {
			t.Fatal(err)
		}
		l := cp.(*motoLane)
		client := sns.NewFromConfig(testenv.Config(), func(o *sns.Options) { o.BaseEndpoint = aws.String(l.url) })
		if _, err := client.Publish(ctx, &sns.PublishInput{PhoneNumber: aws.String(phone), Message: aws.String("code")}); err != nil {
			t.Fatalf("run %d: publish: %v", run, err)
		}
		got, _, err := cp.Delivered(ctx, w)
		cp.Close()
		if err != nil {
			t.Fatal(err)
		}
		if got["k"] != 1 {
			t.Errorf("run %d: the lane counts %d SMS to %s, want the 1 it sent", run, got["k"], phone)
		}
	}
}
