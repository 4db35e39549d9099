package localpipeline

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/testenv"
)

// startNative starts a pipeline whose real sender, reconciler and webhook
// bootstraps (under the RIE) send SMS through SNS and email through SES
// on moto_server, with env overriding NativeEnv's settings.
func startNative(t *testing.T, boot Bootstraps, from string, env map[string]string) *Pipeline {
	t.Helper()
	ctx := context.Background()
	native, err := NativeEnv(ctx, testenv.MotoEndpoint(t), from)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range env {
		native[k] = v
	}
	return StartTest(t, Options{
		Bootstraps:      boot,
		SenderInstances: 2, ProviderTimeout: 5 * time.Second, ClaimTimeout: 15 * time.Second,
		SenderTimeout: 15 * time.Second, VisibilityTimeout: 20 * time.Second, Env: native,
	})
}

// TestNativeProviders: through the real sender, each message enqueued three
// times reaches SNS or SES once (moto_server's record is the ground truth);
// from an unverified SES identity every email is FAILED with SES's
// MessageRejected and nothing is sent, while SMS still goes out.
func TestNativeProviders(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	boot, err := BuildBootstraps(ctx, t.TempDir(), Bootstraps{})
	if err != nil {
		t.Fatal(err)
	}
	t.Run("OncePerKey", func(t *testing.T) {
		t.Parallel()
		p := startNative(t, boot, "notify-"+testenv.RandomID()+"@sendonce.example", nil)
		rep, err := RunNative(ctx, p, 8, 3, 90*time.Second)
		if err != nil {
			t.Fatalf("RunNative: %v", err)
		}
		if !rep.OK() || rep.SMSSent+rep.EmailSent+rep.Abandoned != 8 || rep.SMS != 4 || rep.Email != 4 || rep.Copies != 24 {
			var b strings.Builder
			rep.WriteSummary(&b)
			t.Fatalf("native run:\n%s", b.String())
		}
	})
	t.Run("UnverifiedSenderFailed", func(t *testing.T) {
		t.Parallel()
		p := startNative(t, boot, "notify-"+testenv.RandomID()+"@sendonce.example",
			map[string]string{"SENDONCE_SES_FROM": "nobody-" + testenv.RandomID() + "@unverified.example"})
		rep, err := RunNative(ctx, p, 4, 2, 90*time.Second)
		if err != nil {
			t.Fatalf("RunNative: %v", err)
		}
		if rep.EmailSent != 0 || len(rep.NotSent) != rep.Email || len(rep.Twice) != 0 {
			t.Fatalf("emails sent %d, not SENT %v, twice %v; want every email FAILED and none sent", rep.EmailSent, rep.NotSent, rep.Twice)
		}
		for _, ns := range rep.NotSent {
			if !strings.Contains(ns, "email FAILED") || !strings.Contains(ns, "MessageRejected") {
				t.Errorf("row %s, want an email FAILED with MessageRejected", ns)
			}
		}
		if rep.SMSSent+rep.Abandoned != rep.SMS {
			t.Errorf("SMS sent %d (+%d abandoned) of %d", rep.SMSSent, rep.Abandoned, rep.SMS)
		}
	})
}
