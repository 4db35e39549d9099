// Command invoke runs one sendonce function's bootstrap under the Lambda
// Runtime Interface Emulator (internal/rie) against the local emulators,
// sends it one event and prints the response. `make invoke-<function>`
// builds the bootstrap, starts the local services and runs it:
//
//	go run ./scripts/invoke -function sender -event events/sqs-batch.json -bootstrap .build/sender/bootstrap
//
// The function gets a fresh table (the production schema) in DynamoDB
// Local, a notification queue and DLQ on moto_server, and an environment
// pointing at them. Any SENDONCE_* variable of the caller's environment
// (except SENDONCE_TEST_* and SENDONCE_LOCAL_*) overrides the defaults, so
// `make invoke-sender SENDONCE_SMS_PROVIDER=http` works. The API's event
// gets a new API key, the webhook's a fresh signature.
//
// The response body goes to stdout, the function's log to stderr. The exit
// status is 1 when the function returned an error or could not be run.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"strings"
	"time"

	"github.com/sendonce/sendonce/internal/apikey"
	"github.com/sendonce/sendonce/internal/apikey/dynamoapikey"
	"github.com/sendonce/sendonce/internal/localpipeline"
	"github.com/sendonce/sendonce/internal/provider/httpprovider"
	"github.com/sendonce/sendonce/internal/rie"
	"github.com/sendonce/sendonce/internal/testenv"
)

func main() {
	function := flag.String("function", "", "function name under ./functions (sender, reconciler, webhook, api, sesevents)")
	event := flag.String("event", "", "path of the event JSON to invoke it with")
	bootstrap := flag.String("bootstrap", "", "the function's linux bootstrap")
	flag.Parse()
	if *function == "" || *event == "" || *bootstrap == "" || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: go run ./scripts/invoke -function NAME -event FILE -bootstrap PATH")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := run(ctx, *function, *event, *bootstrap); err != nil {
		fmt.Fprintf(os.Stderr, "invoke %s: %v\n", *function, err)
		os.Exit(1)
	}
}

func run(ctx context.Context, function, eventPath, bootstrap string) error {
	payload, err := os.ReadFile(eventPath)
	if err != nil {
		return fmt.Errorf("read event: %w (the sample events live in events/)", err)
	}
	ddbURL, motoURL := os.Getenv(testenv.DynamoDBEndpointEnv), os.Getenv(testenv.MotoEndpointEnv)
	if ddbURL == "" || motoURL == "" {
		return fmt.Errorf("%s and %s must be set: run through `make invoke-%s`, which starts the local services",
			testenv.DynamoDBEndpointEnv, testenv.MotoEndpointEnv, function)
	}
	env, err := localEnv(ctx, ddbURL, motoURL)
	if err != nil {
		return err
	}
	if payload, err = prepare(ctx, function, payload, env, ddbURL); err != nil {
		return err
	}
	inst, err := rie.Launch(ctx, rie.Config{Bootstrap: bootstrap, FunctionName: "sendonce-" + function, Timeout: 30 * time.Second, Env: env})
	if err != nil {
		return err
	}
	defer func() {
		if err := inst.Close(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}()
	fmt.Fprintf(os.Stderr, "invoke: %s with %s (table %s)\n", function, eventPath, env["SENDONCE_TABLE"])
	body, invokeErr := inst.Invoke(ctx, payload)
	time.Sleep(100 * time.Millisecond) // let the emulator copy the function's last lines
	fmt.Fprintf(os.Stderr, "---- function log ----\n%s---- response ----\n", inst.Logs())
	var pretty bytes.Buffer
	if json.Indent(&pretty, body, "", "  ") == nil {
		body = pretty.Bytes()
	}
	fmt.Printf("%s\n", body)
	if ie := (*rie.InvokeError)(nil); errors.As(invokeErr, &ie) {
		return fmt.Errorf("the function returned an error: %s: %s", ie.Type, ie.Message)
	}
	return invokeErr
}

// localEnv creates the table and queues and returns the function's
// environment.
func localEnv(ctx context.Context, ddbURL, motoURL string) (map[string]string, error) {
	res, err := localpipeline.CreateResources(ctx, testenv.DynamoDBAt(ddbURL), testenv.SQSAt(motoURL),
		localpipeline.DefaultVisibilityTimeout, localpipeline.DefaultMaxReceiveCount)
	if err != nil {
		return nil, err
	}
	env := res.Env(ddbURL, motoURL)
	maps.Copy(env, map[string]string{
		"SENDONCE_SMS_PROVIDER": "sns", "SENDONCE_PUSH_PROVIDER": "sns",
		"SENDONCE_HTTP_PROVIDER_CALLBACK_SECRET": "local-callback-secret",
	})
	// The caller's SENDONCE_* settings apply, except the table and queues
	// just created (a shell that sourced .local/env names others).
	fixed := res.Env(ddbURL, motoURL)
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		if _, ours := fixed[k]; !ours && strings.HasPrefix(k, "SENDONCE_") && !strings.HasPrefix(k, "SENDONCE_TEST_") && !strings.HasPrefix(k, "SENDONCE_LOCAL_") {
			env[k] = v
		}
	}
	return env, nil
}

// prepare makes a sample event valid for this run: the API's event gets a
// freshly created API key, the webhook's event a fresh signature (a
// signature older than five minutes is refused, as it must be).
func prepare(ctx context.Context, function string, payload []byte, env map[string]string, ddbURL string) ([]byte, error) {
	var ev map[string]any
	if err := json.Unmarshal(payload, &ev); err != nil {
		return nil, fmt.Errorf("decode event: %w", err)
	}
	headers, _ := ev["headers"].(map[string]any)
	if headers == nil {
		headers = map[string]any{}
	}
	switch function {
	case "api":
		id, secret, err := apikey.New(dynamoapikey.New(testenv.DynamoDBAt(ddbURL), env["SENDONCE_TABLE"]), apikey.Config{}).Create(ctx, "acme")
		if err != nil {
			return nil, fmt.Errorf("create an API key: %w", err)
		}
		fmt.Fprintf(os.Stderr, "invoke: created API key %s for tenant acme\n", id)
		headers["authorization"] = "Bearer " + secret
	case "webhook":
		body, _ := ev["body"].(string)
		headers[strings.ToLower(httpprovider.SignatureHeader)] = httpprovider.Sign([]byte(env["SENDONCE_HTTP_PROVIDER_CALLBACK_SECRET"]), time.Now(), []byte(body))
	default:
		return payload, nil
	}
	ev["headers"] = headers
	return json.Marshal(ev)
}
