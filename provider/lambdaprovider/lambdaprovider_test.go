package lambdaprovider_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/sendonce/sendonce"
	"github.com/sendonce/sendonce/internal/testenv"
	"github.com/sendonce/sendonce/internal/testsupport"
	"github.com/sendonce/sendonce/notify"
	"github.com/sendonce/sendonce/provider"
	"github.com/sendonce/sendonce/provider/lambdaprovider"
	"github.com/sendonce/sendonce/provider/providertest"
)

// function is a stand-in of Lambda's Invoke API serving one provider
// function that speaks docs/lambda-provider.md: it drops a repeat of a
// key, answers lookups, refuses one number and fails the delivery to
// another. Its records are the provider's own count.
type function struct {
	sent map[string]int // key -> messages taken, shared by the stand-ins
	// after is what the function does once it took a message: "" answer,
	// "fail" a function error, "hang" never answer; "stall" takes nothing
	// and never answers.
	after string
	url   string
}

const (
	phone         = "+15551234567"
	refusedPhone  = "+15550000001"
	bouncingPhone = "+15550000002"
)

func startFunction(t *testing.T, after string, sent map[string]int, mu *sync.Mutex) *function {
	f := &function{sent: sent, after: after}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/invocations") {
			http.Error(w, `{"Type":"User","message":"not found"}`, http.StatusNotFound)
			return
		}
		var req struct{ Op, Key, To string }
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &req); err != nil {
			http.Error(w, "bad payload", http.StatusBadRequest)
			return
		}
		if f.after == "stall" {
			<-r.Context().Done()
			return
		}
		mu.Lock()
		n := f.sent[req.Key]
		answer := fmt.Sprintf(`{"version":1,"status":"accepted","id":"msg-%s"}`, req.Key[3:15])
		switch {
		case req.To == refusedPhone:
			answer = `{"version":1,"status":"rejected","reason":"not a mobile number","code":"21614"}`
		case req.Op == "lookup" && n == 0:
			answer = `{"version":1,"status":"not_found"}`
		case req.Op == "lookup" && req.To == bouncingPhone:
			answer = fmt.Sprintf(`{"version":1,"status":"rejected","id":"msg-%s","reason":"handset unreachable"}`, req.Key[3:15])
		case req.Op == "send" && n == 0:
			f.sent[req.Key] = 1
		}
		mu.Unlock()
		switch {
		case req.Op == "send" && f.after == "fail":
			w.Header().Set("X-Amz-Function-Error", "Unhandled")
			fmt.Fprint(w, `{"errorType":"Error","errorMessage":"gateway answered 500"}`)
		case req.Op == "send" && f.after == "hang":
			<-r.Context().Done()
		default:
			fmt.Fprint(w, answer)
		}
	}))
	t.Cleanup(srv.Close)
	f.url = srv.URL
	return f
}

// TestConformance runs the public provider conformance suite against the
// adapter and a stand-in of the Invoke API and of a function that keeps
// the protocol (idempotent, with lookup), its own records being the
// provider's count.
func TestConformance(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	sent := map[string]int{}
	ok, failed, timedOut, stalled := startFunction(t, "", sent, &mu), startFunction(t, "fail", sent, &mu),
		startFunction(t, "hang", sent, &mu), startFunction(t, "stall", sent, &mu)
	adapter := func(t *testing.T, endpoint string) provider.Adapter {
		t.Helper()
		client := lambda.NewFromConfig(testenv.Config(), func(o *lambda.Options) { o.BaseEndpoint = aws.String(endpoint) })
		a, err := lambdaprovider.New(client, lambdaprovider.Options{Function: "sms-gateway", Idempotent: true, Lookup: true, Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	message := func(key, to string) provider.Message {
		return provider.Message{Key: key, Tenant: "acme", Channel: notify.ChannelSMS, Class: notify.ClassOTP, To: to, Body: "Your code"}
	}
	providertest.Run(t, providertest.Harness{
		New:     func(t *testing.T) provider.Adapter { return adapter(t, ok.url) },
		Message: func(_ *testing.T, key string) provider.Message { return message(key, phone) },
		Received: func(_ *testing.T, key string) int {
			mu.Lock()
			defer mu.Unlock()
			return sent[key]
		},
		Refused:              func(_ *testing.T, key string) provider.Message { return message(key, refusedPhone) },
		Undeliverable:        func(_ *testing.T, key string) provider.Message { return message(key, bouncingPhone) },
		Stalled:              func(t *testing.T) provider.Adapter { return adapter(t, stalled.url) },
		Unreachable:          func(t *testing.T) provider.Adapter { return adapter(t, testsupport.Unreachable(t)) },
		AcceptedThenFailed:   func(t *testing.T) provider.Adapter { return adapter(t, failed.url) },
		AcceptedThenTimedOut: func(t *testing.T) provider.Adapter { return adapter(t, timedOut.url) },
	})
}

// TestNewRefuses: New names what is wrong with its options.
func TestNewRefuses(t *testing.T) {
	t.Parallel()
	client := lambda.NewFromConfig(testenv.Config())
	for name, tt := range map[string]struct {
		client lambdaprovider.Invoker
		opts   lambdaprovider.Options
		want   string
	}{
		"NoClient":      {nil, lambdaprovider.Options{Function: "f"}, "no Lambda client"},
		"NoFunction":    {client, lambdaprovider.Options{}, "Function"},
		"BadFunction":   {client, lambdaprovider.Options{Function: "arn:aws:s3:::bucket"}, "Function"},
		"NegativeTime":  {client, lambdaprovider.Options{Function: "f", Timeout: -time.Second}, "negative"},
		"ShortRedactor": {client, lambdaprovider.Options{Function: "f", RedactionKey: []byte("short")}, "RedactionKey"},
	} {
		t.Run(name, func(t *testing.T) {
			a, err := lambdaprovider.New(tt.client, tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) || a != nil {
				t.Errorf("New = %v, %v: want a nil adapter and an error saying %q", a, err, tt.want)
			}
		})
	}
}

// A provider function of your own (any language) on the push route,
// declared idempotent and able to answer lookups.
func Example() {
	ctx := context.Background()
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		panic(err)
	}
	push, err := lambdaprovider.New(lambda.NewFromConfig(awsCfg), lambdaprovider.Options{
		Function:   "arn:aws:lambda:eu-west-1:123456789012:function:push-gateway:live",
		Idempotent: true,
		Lookup:     true,
	})
	if err != nil {
		panic(err)
	}
	s, err := sendonce.NewSender(sendonce.SenderConfig{
		Ledger: sendonce.NewMemoryLedger(),
		Routes: sendonce.Routes{notify.ChannelPush: {push}},
	})
	if err != nil {
		panic(err)
	}
	_ = s // s.Send(ctx, req, enqueued) for each request
	fmt.Println(push.Name())
	// Output: lambda
}
