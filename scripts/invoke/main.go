// Command invoke runs one sendonce function's real bootstrap under the
// Lambda Runtime Interface Emulator against the local emulators, sends it
// one event and prints the response. `make invoke-<function>` runs it with
// the local services already started.
//
//	go run ./scripts/invoke -function sender -event events/sqs-batch.json
//
// It creates a fresh table (the production schema) in DynamoDB Local and the
// notification queue and DLQ in moto_server, and gives the function an
// environment pointing at them. Any SENDONCE_* variable set in the caller's
// environment (except SENDONCE_TEST_* and SENDONCE_LOCAL_*) overrides the
// defaults, so `make invoke-sender SENDONCE_SMS_PROVIDER=http` works.
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
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sendonce/sendonce/internal/apikey"
	"github.com/sendonce/sendonce/internal/provider/httpprovider"
	"github.com/sendonce/sendonce/internal/rie"
	"github.com/sendonce/sendonce/internal/tableschema"
	"github.com/sendonce/sendonce/internal/testenv"
)

func main() {
	var (
		function  = flag.String("function", "", "function name under ./functions (sender, reconciler, webhook, api)")
		event     = flag.String("event", "", "path of the event JSON to invoke it with")
		bootstrap = flag.String("bootstrap", "", "prebuilt linux bootstrap (default: build ./functions/<function>)")
		timeout   = flag.Duration("timeout", 60*time.Second, "bound on the whole run")
	)
	flag.Parse()
	if *function == "" || *event == "" || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: go run ./scripts/invoke -function NAME -event FILE [-bootstrap PATH]")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if err := run(ctx, *function, *event, *bootstrap); err != nil {
		fmt.Fprintf(os.Stderr, "invoke %s: %v\n", *function, err)
		os.Exit(1)
	}
}

func run(ctx context.Context, function, eventPath, bootstrap string) error {
	payload, err := os.ReadFile(eventPath)
	if err != nil {
		return fmt.Errorf("read event: %w (the function's sample events live in events/)", err)
	}
	if !json.Valid(payload) {
		return fmt.Errorf("event %s is not valid JSON", eventPath)
	}
	ddbURL, motoURL := os.Getenv(testenv.DynamoDBEndpointEnv), os.Getenv(testenv.MotoEndpointEnv)
	if ddbURL == "" || motoURL == "" {
		return fmt.Errorf("%s and %s must be set: run through `make invoke-%s`, which starts the local services",
			testenv.DynamoDBEndpointEnv, testenv.MotoEndpointEnv, function)
	}
	if bootstrap == "" {
		root, err := rie.ModuleRoot(ctx)
		if err != nil {
			return err
		}
		bootstrap = filepath.Join(root, ".build", function, "bootstrap")
		if err := rie.BuildBootstrap(ctx, root, function, bootstrap); err != nil {
			return err
		}
	}

	env, err := localEnv(ctx, function, ddbURL, motoURL)
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

	fmt.Fprintf(os.Stderr, "invoke: %s with %s\n", function, eventPath)
	body, invokeErr := inst.Invoke(ctx, payload)
	// Let the emulator copy the function's last lines before printing them.
	time.Sleep(100 * time.Millisecond)
	fmt.Fprintf(os.Stderr, "---- function log ----\n%s---- response ----\n", inst.Logs())
	var pretty bytes.Buffer
	if json.Indent(&pretty, body, "", "  ") == nil {
		body = pretty.Bytes()
	}
	fmt.Printf("%s\n", body)
	var ie *rie.InvokeError
	if errors.As(invokeErr, &ie) {
		return fmt.Errorf("the function returned an error: %s: %s", ie.Type, ie.Message)
	}
	return invokeErr
}

// localEnv creates the table and queues and returns the function's
// environment.
func localEnv(ctx context.Context, function, ddbURL, motoURL string) (map[string]string, error) {
	cfg := testenv.Config()
	suffix := testenv.RandomID()

	table := "sendonce-invoke-" + suffix
	ddb := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(ddbURL)
		o.DisableValidateResponseChecksum = true // DynamoDB Local's error CRCs are wrong
	})
	if _, err := ddb.CreateTable(ctx, tableschema.CreateTableInput(table)); err != nil {
		return nil, fmt.Errorf("create table %s: %w", table, err)
	}
	if _, err := ddb.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName: aws.String(table),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{
			AttributeName: aws.String(tableschema.TTLAttribute), Enabled: aws.Bool(true),
		},
	}); err != nil {
		return nil, fmt.Errorf("enable TTL on %s: %w", table, err)
	}

	q := sqs.NewFromConfig(cfg, func(o *sqs.Options) { o.BaseEndpoint = aws.String(motoURL) })
	queueURL, err := createQueue(ctx, q, "sendonce-notifications-"+suffix)
	if err != nil {
		return nil, err
	}
	dlqURL, err := createQueue(ctx, q, "sendonce-dlq-"+suffix)
	if err != nil {
		return nil, err
	}

	env := map[string]string{
		"AWS_REGION":                             testenv.Region,
		"AWS_ACCESS_KEY_ID":                      "test",
		"AWS_SECRET_ACCESS_KEY":                  "test",
		"AWS_ENDPOINT_URL_DYNAMODB":              ddbURL,
		"AWS_ENDPOINT_URL_SQS":                   motoURL,
		"AWS_ENDPOINT_URL_SNS":                   motoURL,
		"AWS_ENDPOINT_URL_SSM":                   motoURL,
		"AWS_ENDPOINT_URL_SECRETS_MANAGER":       motoURL,
		"SENDONCE_TABLE":                         table,
		"SENDONCE_QUEUE_URL":                     queueURL,
		"SENDONCE_DLQ_URL":                       dlqURL,
		"SENDONCE_SMS_PROVIDER":                  "sns",
		"SENDONCE_PUSH_PROVIDER":                 "sns",
		"SENDONCE_HTTP_PROVIDER_CALLBACK_SECRET": "local-callback-secret",
	}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "SENDONCE_") && !strings.HasPrefix(k, "SENDONCE_TEST_") && !strings.HasPrefix(k, "SENDONCE_LOCAL_") {
			env[k] = v
		}
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Fprintf(os.Stderr, "invoke: %s environment:\n", function)
	for _, k := range keys {
		if k == "AWS_SECRET_ACCESS_KEY" || strings.HasPrefix(k, "SENDONCE_") && (strings.HasSuffix(k, "_SECRET") || strings.HasSuffix(k, "_TOKEN")) {
			fmt.Fprintf(os.Stderr, "  %s=<set>\n", k)
			continue
		}
		fmt.Fprintf(os.Stderr, "  %s=%s\n", k, env[k])
	}
	return env, nil
}

// prepare makes a sample event valid for this run: the API's event gets a
// freshly created API key, the webhook's event a fresh signature (a
// signature older than five minutes is refused, as it must be).
func prepare(ctx context.Context, function string, payload []byte, env map[string]string, ddbURL string) ([]byte, error) {
	if function != "api" && function != "webhook" {
		return payload, nil
	}
	var ev map[string]any
	if err := json.Unmarshal(payload, &ev); err != nil {
		return nil, fmt.Errorf("decode event: %w", err)
	}
	headers, _ := ev["headers"].(map[string]any)
	if headers == nil {
		headers = map[string]any{}
		ev["headers"] = headers
	}
	switch function {
	case "api":
		ddb := dynamodb.NewFromConfig(testenv.Config(), func(o *dynamodb.Options) {
			o.BaseEndpoint = aws.String(ddbURL)
			o.DisableValidateResponseChecksum = true
		})
		id, secret, err := apikey.New(ddb, env["SENDONCE_TABLE"]).Create(ctx, "acme")
		if err != nil {
			return nil, fmt.Errorf("create an API key: %w", err)
		}
		fmt.Fprintf(os.Stderr, "invoke: created API key %s for tenant acme\n", id)
		headers["authorization"] = "Bearer " + secret
	case "webhook":
		body, _ := ev["body"].(string)
		headers[strings.ToLower(httpprovider.SignatureHeader)] = httpprovider.Sign([]byte(env["SENDONCE_HTTP_PROVIDER_CALLBACK_SECRET"]), time.Now(), []byte(body))
	}
	return json.Marshal(ev)
}

func createQueue(ctx context.Context, c *sqs.Client, name string) (string, error) {
	out, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name)})
	if err != nil {
		return "", fmt.Errorf("create queue %s: %w", name, err)
	}
	return aws.ToString(out.QueueUrl), nil
}
