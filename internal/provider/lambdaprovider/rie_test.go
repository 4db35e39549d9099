package lambdaprovider_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/provider/lambdaprovider"
	"github.com/sendonce/sendonce/provider"
	"github.com/sendonce/sendonce/provider/providertest"
)

// fixture is the function of these tests (testdata/fixture): it does what
// the message's text says.
const fixture = "./internal/provider/lambdaprovider/testdata/fixture"

// emulatorName is the one function name the emulator serves.
const emulatorName = "function"

// TestEmulator: each way a function answers or fails, as the Lambda
// Runtime Interface Emulator reports it to the real SDK client, is
// classified as the same thing from Lambda would be.
func TestEmulator(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		text string
		// want is the kind of the error; with none, the id of the receipt.
		want  provider.Kind
		id    string
		code  string
		has   string
		isErr bool
	}{
		{name: "Accepted", text: "accept:msg_7", id: "msg_7"},
		{name: "Rejected", text: "reject:number " + phone + " is a landline", isErr: true, want: provider.Permanent, code: "fixture", has: "is a landline"},
		{name: "Retry", text: "retry:provider throttled", isErr: true, want: provider.Transient, has: "provider throttled"},
		{name: "HandlerError", text: "fail:socket hang up after writing to " + phone, isErr: true, want: provider.Ambiguous, code: "errorString", has: "socket hang up"},
		// The process dies: Lambda answers 200 with FunctionError
		// Runtime.ExitError, the emulator HTTP 502 with the document.
		{name: "Panic", text: "panic", isErr: true, want: provider.Ambiguous, code: "UnknownError", has: "HTTP 502: the function may have sent"},
		{name: "UnreadableAnswer", text: `raw:{"status":"sent"}`, isErr: true, want: provider.Ambiguous, has: "unreadable answer"},
	}
	fn := startFunction(t, fixture, nil)
	// One emulator serves the cases in turn (it runs one invocation at a
	// time), straight at its own address: nothing here outlives its call.
	b := setup(t, strings.TrimSuffix(fn.inst.URL(), "/2015-03-31/functions/function/invocations"),
		lambdaprovider.Config{Function: emulatorName, Timeout: 10 * time.Second})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := message()
			m.Body = tt.text
			r, err := b.p.Send(context.Background(), m)
			if !tt.isErr {
				if err != nil || r.MessageID != tt.id {
					t.Fatalf("Send = %+v, %v; want %s", r, err, tt.id)
				}
				return
			}
			pe := classified(t, err)
			providertest.CheckClassified(t, pe, tt.want, "lambda", phone)
			if pe.Code != tt.code || !strings.Contains(pe.Reason, tt.has) {
				t.Errorf("code %q, reason %q; want code %q, a reason with %q", pe.Code, pe.Reason, tt.code, tt.has)
			}
		})
	}
}

// TestEmulatorTimeout: a function that runs past its Lambda timeout is
// stopped by the emulator, whose answer (the text "Task timed out after
// 1.00 seconds") is ambiguous; the emulator then starts the function
// afresh and the next invocation is answered.
func TestEmulatorTimeout(t *testing.T) {
	t.Parallel()
	fn := startFunction(t, fixture, map[string]string{"AWS_LAMBDA_FUNCTION_TIMEOUT": "1"})
	b := setup(t, fn.URL, lambdaprovider.Config{Function: emulatorName, Timeout: 10 * time.Second})
	m := message()
	m.Body = "hang:4000"
	_, err := b.p.Send(context.Background(), m)
	pe := classified(t, err)
	providertest.CheckClassified(t, pe, provider.Ambiguous, "lambda", phone)
	if pe.Code != "Sandbox.Timedout" || !strings.Contains(pe.Reason, "timed out") {
		t.Errorf("code %q, reason %q; want the emulator's timeout", pe.Code, pe.Reason)
	}
	if _, timedOut := fn.counts(); timedOut != 1 {
		t.Errorf("the emulator timed %d invocations out, want 1", timedOut)
	}
	m.Body = "accept:after"
	if r, err := b.p.Send(context.Background(), m); err != nil || r.MessageID != "after" {
		t.Errorf("the invocation after the timeout: %+v, %v", r, err)
	}
}

// TestEmulatorAdapterTimeout: the adapter stops waiting for a function
// still running (its own timeout, shorter than the function's): ambiguous,
// within the timeout. The function's late answer is lost; the next
// invocation waits for it in the proxy and is answered.
func TestEmulatorAdapterTimeout(t *testing.T) {
	t.Parallel()
	fn := startFunction(t, fixture, map[string]string{"AWS_LAMBDA_FUNCTION_TIMEOUT": "10"})
	const timeout = 500 * time.Millisecond
	b := setup(t, fn.URL, lambdaprovider.Config{Function: emulatorName, Timeout: timeout})
	m := message()
	m.Body = "hang:1500"
	start := time.Now()
	_, err := b.p.Send(context.Background(), m)
	pe := classified(t, err)
	providertest.CheckClassified(t, pe, provider.Ambiguous, "lambda", phone)
	if !strings.Contains(pe.Reason, "within the timeout") {
		t.Errorf("reason %q, want the adapter's timeout", pe.Reason)
	}
	if d := time.Since(start); d > timeout+time.Second {
		t.Errorf("Send took %s with a %s timeout", d, timeout)
	}
	if !fn.idle(10 * time.Second) {
		t.Fatal("the hung invocation never ended")
	}
	if n, _ := fn.counts(); n != 1 {
		t.Errorf("the emulator answered %d invocations, want the late one", n)
	}
	m.Body = "accept:next"
	if r, err := b.p.Send(context.Background(), m); err != nil || r.MessageID != "next" {
		t.Errorf("next invocation: %+v, %v", r, err)
	}
}

// TestEmulatorMisconfigured: the emulator serves only the function named
// "function": another name is answered 404, a configuration error; an
// emulator that is not running refuses the connection: nothing was sent,
// transient.
func TestEmulatorMisconfigured(t *testing.T) {
	t.Parallel()
	fn := startFunction(t, fixture, nil)
	b := setup(t, fn.URL, lambdaprovider.Config{Function: "arn:aws:lambda:us-east-1:123456789012:function:sms-provider"})
	_, err := b.p.Send(context.Background(), message())
	pe := classified(t, err)
	providertest.CheckClassified(t, pe, provider.Config, "lambda", phone)
	if n, _ := fn.counts(); n != 1 {
		t.Errorf("the emulator got %d requests, want 1", n)
	}

	if err := fn.inst.Close(); err != nil {
		t.Fatal(err)
	}
	down := setup(t, strings.TrimSuffix(fn.inst.URL(), "/2015-03-31/functions/function/invocations"),
		lambdaprovider.Config{Function: emulatorName})
	_, err = down.p.Send(context.Background(), message())
	pe = classified(t, err)
	providertest.CheckClassified(t, pe, provider.Transient, "lambda", phone)
	if !strings.Contains(pe.Reason, "nothing was sent") {
		t.Errorf("reason %q", pe.Reason)
	}
}
