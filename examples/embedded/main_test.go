package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sns"

	"github.com/sendonce/sendonce"
	"github.com/sendonce/sendonce/examples/own-lambda/smsgw/smsgwtest"
	"github.com/sendonce/sendonce/notify"
)

// endpoint returns the local emulator's URL that make test exports in
// variable, or fails: the test never skips.
func endpoint(t *testing.T, variable string) string {
	t.Helper()
	u := os.Getenv(variable)
	if u == "" {
		t.Fatalf("%s is not set: run this test through `make test`, which starts DynamoDB Local and moto_server", variable)
	}
	return u
}

// TestEmbedded builds the program as main does, on DynamoDB Local,
// moto_server's SNS and the gateway's stand-in, and runs four requests
// through it twice: each is sent once, through the gateway or, for the
// number the gateway is down for, through SNS, with the stored template
// rendered; the second run finds every one a duplicate; an invalid
// request is reported invalid and claims nothing.
func TestEmbedded(t *testing.T) {
	ctx := t.Context()
	awsCfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")}
	db := dynamodb.NewFromConfig(awsCfg, func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(endpoint(t, "SENDONCE_TEST_DYNAMODB_ENDPOINT"))
	})
	moto := endpoint(t, "SENDONCE_TEST_MOTO_ENDPOINT")
	table := fmt.Sprintf("embedded-%d", rand.Int64())
	if _, err := db.CreateTable(ctx, sendonce.TableInput(table)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = db.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(table)}) })
	gw := smsgwtest.Start(t, "gw-key")
	s, ledger, err := Build(ctx, Deps{
		DynamoDB: db, Table: table, GatewayURL: gw.URL, GatewayKey: "gw-key",
		SNS: sns.NewFromConfig(awsCfg, func(o *sns.Options) { o.BaseEndpoint = aws.String(moto) }),
		// moto beside make test's other packages has taken more than the
		// adapter's 5 s to answer a Publish; a timeout here is not what
		// the test is about (a fresh-clone run failed on it).
		SNSTimeout: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}

	phone := func() string { return fmt.Sprintf("+1555%07d", rand.IntN(10_000_000)) } // moto keeps every run's SMS
	up, down := phone(), phone()
	gw.Down(down)
	reqs := []notify.Request{
		{TenantID: "acme", EventID: "order-A1-shipped", Channel: notify.ChannelSMS, Template: "order_shipped",
			Recipient: notify.Recipient{ID: "user-1", Phone: up}, Data: map[string]any{"order_id": "A1"}},
		{TenantID: "acme", EventID: "order-B2-shipped", Channel: notify.ChannelSMS, Template: "order_shipped",
			Recipient: notify.Recipient{ID: "user-2", Phone: down}, Data: map[string]any{"order_id": "B2"}},
	}
	var in bytes.Buffer
	for _, r := range reqs {
		body, err := r.Body()
		if err != nil {
			t.Fatal(err)
		}
		in.Write(append(body, '\n'))
	}
	in.WriteString(`{"tenant_id":"acme","channel":"sms","template":"order_shipped","recipient":{"id":"user-3","phone":"+15551230000"}}` + "\n") // no event_id
	input := in.String()

	run := func() []Line {
		var out bytes.Buffer
		if err := Run(ctx, s, ledger, strings.NewReader(input), &out); err != nil {
			t.Fatal(err)
		}
		var lines []Line
		for l := range strings.Lines(out.String()) {
			var line Line
			if err := json.Unmarshal([]byte(l), &line); err != nil {
				t.Fatal(err)
			}
			lines = append(lines, line)
		}
		if len(lines) != 3 {
			t.Fatalf("%d lines, want 3:\n%s", len(lines), out.String())
		}
		return lines
	}
	first, second := run(), run()
	for i, want := range []Line{
		{Event: "order-A1-shipped", Disposition: "sent", Provider: "smsgw", State: "SENT", Attempts: 1},
		// The gateway refused it (down), nothing sent: SNS, next on the route.
		{Event: "order-B2-shipped", Disposition: "sent", Provider: "sns", State: "SENT", Attempts: 2},
	} {
		if got := first[i]; got.Event != want.Event || got.Disposition != want.Disposition || got.Provider != want.Provider || got.State != want.State || got.Attempts != want.Attempts {
			t.Errorf("first run, %s: %+v, want %+v", want.Event, got, want)
		}
		want.Disposition = "duplicate"
		if got := second[i]; got.Event != want.Event || got.Disposition != want.Disposition || got.Provider != want.Provider || got.State != want.State {
			t.Errorf("second run, %s: %+v, want %+v", want.Event, got, want)
		}
	}
	for _, l := range [][]Line{first, second} {
		if got := l[2]; got.Disposition != "invalid" || !strings.Contains(got.Reason, "event_id") || got.State != "" {
			t.Errorf("the request without event_id: %+v, want invalid, naming event_id, nothing claimed", got)
		}
	}

	// The providers' own records: the gateway sent A1 once, SNS sent B2
	// once, each as the stored template rendered it.
	if n := gw.Received(reqs[0].Key()); n != 1 {
		t.Errorf("the gateway sent order A1 %d times, want 1", n)
	}
	if got := gw.Texts()[reqs[0].Key()]; got != "Your order A1 has shipped." {
		t.Errorf("the gateway sent %q", got)
	}
	var data struct {
		SNS struct {
			SMS []struct {
				PhoneNumber string `json:"phone_number"`
				Message     string `json:"message"`
			} `json:"SMS"`
		} `json:"sns"`
	}
	readMotoData(t, moto, &data)
	var viaSNS []string
	for _, m := range data.SNS.SMS {
		if m.PhoneNumber == down || m.PhoneNumber == up {
			viaSNS = append(viaSNS, m.PhoneNumber+": "+m.Message)
		}
	}
	if want := []string{down + ": Your order B2 has shipped."}; fmt.Sprint(viaSNS) != fmt.Sprint(want) {
		t.Errorf("SNS sent %q, want %q", viaSNS, want)
	}

	// Ledger.Get reads the row: each attempt's provider and end, never
	// the address.
	row, err := ledger.Get(ctx, reqs[1].Key())
	if err != nil {
		t.Fatal(err)
	}
	if row.State != sendonce.StateSent || len(row.Attempts) != 2 || row.Attempts[0].Provider != "smsgw" || !strings.HasPrefix(row.Attempts[0].Ended, "released") ||
		row.Attempts[1].Provider != "sns" || row.Attempts[1].Ended != "sent" || row.TemplateVersion < 1 {
		t.Errorf("row of B2: %+v, want SENT: the gateway's attempt released, SNS's sent, from a stored template version", row)
	}
	if b, _ := json.Marshal(row); bytes.Contains(b, []byte(down)) {
		t.Errorf("the row holds the address: %s", b)
	}
}

// readMotoData decodes moto_server's /moto-api/data.json into v. moto
// serializes every service's state for it while other requests change
// that state, and now and then answers 500 with an HTML page: that says
// nothing of the state, so it is read again, a few times.
func readMotoData(t *testing.T, moto string, v any) {
	t.Helper()
	var last string
	for try := range 5 {
		time.Sleep(time.Duration(try) * 200 * time.Millisecond)
		resp, err := http.Get(moto + "/moto-api/data.json")
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK || !json.Valid(body) {
			last = fmt.Sprintf("HTTP %d, %.120q", resp.StatusCode, body)
			continue
		}
		if err := json.Unmarshal(body, v); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("moto data.json: %s", last)
}
