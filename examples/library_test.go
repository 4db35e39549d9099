package examples_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sendonce/sendonce"
	"github.com/sendonce/sendonce/examples/own-lambda/smsgw/smsgwtest"
	"github.com/sendonce/sendonce/internal/localpipeline"
	"github.com/sendonce/sendonce/internal/provider/simulator"
	"github.com/sendonce/sendonce/internal/rie"
	"github.com/sendonce/sendonce/internal/testenv"
	"github.com/sendonce/sendonce/internal/testsupport"
	"github.com/sendonce/sendonce/notify"
)

// The library examples (own-lambda, worker, producer-go, embedded) are built and
// run as a user builds them: copied into a module of their own outside
// this repository, which requires github.com/sendonce/sendonce and
// replaces it with this checkout. That module sees only what a user
// sees: the Go toolchain refuses its import of any internal/ package.

// outsideModulePath is the copied examples' module path.
const outsideModulePath = "example.com/notifier"

// libraryExamples are the directories copied into the outside module.
var libraryExamples = []string{"own-lambda", "worker", "producer-go", "embedded"}

type outsideBuild struct {
	dir  string            // the module's root
	bins map[string]string // example name -> its binary (a linux bootstrap)
	env  []string          // the go command's environment there
	err  error
}

var (
	outsideOnce sync.Once
	outside     outsideBuild
)

// outsideModule builds the outside module once per test binary and
// returns it.
func outsideModule(t *testing.T) *outsideBuild {
	t.Helper()
	outsideOnce.Do(func() { outside = buildOutside() })
	if outside.err != nil {
		t.Fatalf("outside module: %v", outside.err)
	}
	return &outside
}

func buildOutside() outsideBuild {
	b := outsideBuild{bins: map[string]string{}}
	root, err := filepath.Abs("..")
	if err != nil {
		b.err = err
		return b
	}
	// One directory per checkout, reused by later runs: the go command
	// then finds the binaries up to date and links nothing again.
	h := sha256.Sum256([]byte(root))
	b.dir = filepath.Join(os.TempDir(), "sendonce-outside", hex.EncodeToString(h[:8]))
	if b.err = os.RemoveAll(filepath.Join(b.dir, "src")); b.err != nil {
		return b
	}
	src := filepath.Join(b.dir, "src")
	for _, ex := range libraryExamples {
		if b.err = copyExample(ex, filepath.Join(src, ex)); b.err != nil {
			return b
		}
	}
	gomod := fmt.Sprintf("module %s\n\ngo 1.26\n\nrequire github.com/sendonce/sendonce v0.0.0\n\nreplace github.com/sendonce/sendonce => %s\n", outsideModulePath, root)
	if b.err = os.WriteFile(filepath.Join(src, "go.mod"), []byte(gomod), 0o644); b.err != nil {
		return b
	}
	// The repository's go.sum holds the checksum of every module its
	// build list needs, which is all the outside module's can need.
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		b.err = err
		return b
	}
	if b.err = os.WriteFile(filepath.Join(src, "go.sum"), sum, 0o644); b.err != nil {
		return b
	}
	// Offline: -mod=mod lets the go command write the requirements the
	// examples import into go.mod (all of them in sendonce's build
	// list already), GOPROXY=off makes it take every module from the
	// module cache and fail rather than download.
	b.env = append(os.Environ(), "GOFLAGS=-mod=mod -buildvcs=false", "GOPROXY=off", "GOWORK=off")
	out := filepath.Join(b.dir, "bin")
	b.dir = src
	// No deadline of its own: a cold build on a busy machine takes
	// minutes, and go test's -timeout bounds the whole test binary.
	// With the build settings of make test's bootstraps (not Lambda's
	// CGO_ENABLED=0, which gives every package that imports net another
	// build ID), so that sendonce and the AWS SDK come from the build
	// cache: the programs run on this host, under the emulator or not.
	if _, b.err = goCmd(context.Background(), b.dir, b.env, "build", "-tags", "lambda.norpc", "-o", out+"/", "./..."); b.err != nil {
		return b
	}
	for _, ex := range libraryExamples {
		b.bins[ex] = filepath.Join(out, ex)
	}
	return b
}

// copyExample copies the Go files of examples/name to dst, rewriting
// imports of its own packages to the outside module's path, as a user
// who copies it does.
func copyExample(name, dst string) error {
	return filepath.WalkDir(name, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		src = bytes.ReplaceAll(src, []byte(`"github.com/sendonce/sendonce/examples/`), []byte(`"`+outsideModulePath+`/`))
		target := filepath.Join(dst, strings.TrimPrefix(path, name))
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		return os.WriteFile(target, src, 0o644)
	})
}

func goCmd(ctx context.Context, dir string, env []string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir, cmd.Env = dir, env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// TestOutsideModule builds the examples in a module of their own
// (outsideModule), checks that they use sendonce's public API alone, and
// runs their own tests there (own-lambda's adapter passing
// providertest.Run).
func TestOutsideModule(t *testing.T) {
	t.Parallel()
	m := outsideModule(t)
	ctx := t.Context()

	// Every package of the outside module, tests included, imports
	// sendonce's public packages only: no internal/ package and none of
	// the repository's own copies of the examples.
	list, err := goCmd(ctx, m.dir, m.env, "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}{{range .TestImports}} {{.}}{{end}}{{range .XTestImports}} {{.}}{{end}}`, "./...")
	if err != nil {
		t.Fatal(err)
	}
	pkgs, public := 0, map[string]bool{}
	for line := range strings.Lines(list) {
		fields := strings.Fields(line)
		pkgs++
		for _, imp := range fields[1:] {
			if imp == "github.com/sendonce/sendonce" || strings.HasPrefix(imp, "github.com/sendonce/sendonce/") {
				public[imp] = true
				if strings.Contains(imp, "/internal") || strings.HasPrefix(imp, "github.com/sendonce/sendonce/examples") {
					t.Errorf("%s imports %s: an outside program can use only the public API", fields[0], imp)
				}
			}
		}
	}
	if pkgs != 6 {
		t.Errorf("the outside module has %d packages, want 6 (own-lambda, smsgw, smsgwtest, worker, producer-go, embedded):\n%s", pkgs, list)
	}
	t.Logf("sendonce packages the examples import: %v", keys(public))

	// The toolchain would refuse such an import anyway (the internal/
	// rule): a package of the outside module that tries one is an error.
	leak := filepath.Join(m.dir, "leak")
	if err := os.MkdirAll(leak, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(leak, "leak.go"), []byte("package leak\n\nimport _ \"github.com/sendonce/sendonce/internal/ledger\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _ := goCmd(ctx, m.dir, m.env, "list", "-e", "-f", "{{.Error}}", "./leak")
	_ = os.RemoveAll(leak)
	if !strings.Contains(out, "use of internal package github.com/sendonce/sendonce/internal/ledger not allowed") {
		t.Errorf("go list of a package importing sendonce/internal/ledger from outside said %q, want the toolchain's refusal", out)
	}

	// The examples' own tests, built in the outside module: smsgw's
	// conformance, and embedded's run on DynamoDB Local, moto's SNS and
	// the gateway's stand-in (public constructors only).
	if out, err := goCmd(ctx, m.dir, m.env, "test", "-count=1", "./..."); err != nil {
		t.Fatalf("%v\n%s", err, out) // a test's failure is on stdout
	} else {
		for _, pkg := range []string{"own-lambda/smsgw", "embedded"} {
			if !strings.Contains(out, "ok  \t"+outsideModulePath+"/"+pkg) {
				t.Errorf("go test in the outside module did not pass %s's tests:\n%s", pkg, out)
			}
		}
	}
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// bareStack is a new table and moto's SQS, without the repository's
// sender.
func bareStack(t *testing.T) *stack {
	t.Helper()
	moto := testenv.MotoEndpoint(t)
	return &stack{table: testenv.NewTable(t, testenv.DynamoDB(t)), moto: moto, sqs: testenv.SQSAt(moto)}
}

// randomPhone is a number no earlier run used (moto keeps its SNS
// records).
func randomPhone() string { return fmt.Sprintf("+1555%07d", rand.IntN(10_000_000)) }

func smsRequest(event, recipient, phone string) notify.Request {
	return notify.Request{
		TenantID: "acme", EventID: event, Channel: notify.ChannelSMS, Template: "otp",
		Recipient: notify.Recipient{ID: recipient, Phone: phone},
		Content:   &notify.Content{Text: "Your code for " + event},
	}
}

// receiveAll receives n messages from queueURL.
func receiveAll(t *testing.T, c *sqs.Client, queueURL string, n int) []types.Message {
	t.Helper()
	var got []types.Message
	for deadline := time.Now().Add(10 * time.Second); len(got) < n && time.Now().Before(deadline); {
		out, err := c.ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(queueURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: 60})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, out.Messages...)
	}
	if len(got) != n {
		t.Fatalf("received %d messages, want %d", len(got), n)
	}
	return got
}

// TestOwnLambda runs own-lambda, built in the outside module, as a
// bootstrap under the Lambda RIE: its in-house gateway first on the sms
// route, SNS (moto) after it. A batch with a duplicate, delivered twice,
// reaches each recipient exactly once: through the gateway, or through
// SNS for the number the gateway is down for.
func TestOwnLambda(t *testing.T) {
	t.Parallel()
	m, st := outsideModule(t), bareStack(t)
	table, moto := st.table, st.moto
	gw := smsgwtest.Start(t, "gw-key")
	fn := rie.Start(t, m.bins["own-lambda"], map[string]string{
		"AWS_LAMBDA_FUNCTION_TIMEOUT": "30",
		"SENDONCE_TABLE":              table,
		"SENDONCE_DLQ_URL":            st.queue(t, "own-lambda-dlq-"+testenv.RandomID()),
		"SENDONCE_SMS_PROVIDER":       "sns", // the built-in provider after the gateway
		"SMSGW_URL":                   gw.URL,
		"SMSGW_API_KEY":               "gw-key",
		"AWS_ENDPOINT_URL_DYNAMODB":   testenv.DynamoDBEndpoint(t),
		"AWS_ENDPOINT_URL_SQS":        moto,
		"AWS_ENDPOINT_URL_SNS":        moto,
	})

	down := randomPhone()
	gw.Down(down)
	reqs := []notify.Request{
		smsRequest("evt-1", "user-1", randomPhone()),
		smsRequest("evt-2", "user-2", randomPhone()),
		smsRequest("evt-3", "user-3", randomPhone()),
		smsRequest("evt-4", "user-4", down), // the gateway is down for it: SNS sends it
	}
	q := st.queue(t, "own-lambda-"+testenv.RandomID())
	enqueue := append(reqs, reqs[0]) // the producer delivered evt-1 twice
	for _, r := range enqueue {
		if _, err := sendonce.Enqueue(t.Context(), st.sqs, q, r); err != nil {
			t.Fatal(err)
		}
	}
	batch := receiveAll(t, st.sqs, q, len(enqueue))
	payload, _ := json.Marshal(localpipeline.SQSEvent("arn:aws:sqs:"+testenv.Region+":123456789012:own-lambda", batch))
	dupIDs := map[string]bool{} // the two copies of evt-1
	for _, b := range batch {
		if r, err := notify.Parse([]byte(aws.ToString(b.Body))); err == nil && r.Key() == reqs[0].Key() {
			dupIDs[aws.ToString(b.MessageId)] = true
		}
	}
	for i := range 2 { // and SQS delivered the whole batch twice
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		out, err := fn.Invoke(ctx, payload)
		cancel()
		var resp events.SQSEventResponse
		if err == nil {
			err = json.Unmarshal(out, &resp)
		}
		if err != nil || strings.Contains(string(out), "errorMessage") {
			t.Fatalf("invocation %d: %s, %v", i+1, out, err)
		}
		// Within one batch the copies of evt-1 run at once: one sends,
		// the other finds the claim held and asks for redelivery.
		for _, f := range resp.BatchItemFailures {
			if i > 0 || !dupIDs[f.ItemIdentifier] || len(resp.BatchItemFailures) > 1 {
				t.Errorf("invocation %d reported %s for redelivery: want at most one copy of evt-1, in the first", i+1, out)
			}
		}
	}

	var data struct {
		SNS struct {
			SMS []struct {
				PhoneNumber string `json:"phone_number"`
			} `json:"SMS"`
		} `json:"sns"`
	}
	testsupport.MotoData(t, moto, &data)
	sns := map[string]int{}
	for _, s := range data.SNS.SMS {
		sns[s.PhoneNumber]++
	}
	for i, r := range reqs {
		viaGateway, viaSNS := gw.Requests(r.Key()), sns[r.Recipient.Phone]
		want := [2]int{1, 0}
		if i == 3 {
			want = [2]int{0, 1}
		}
		if got := [2]int{viaGateway, viaSNS}; got != want {
			t.Errorf("%s: the gateway was asked %d times and SNS sent %d, want %d and %d", r.EventID, got[0], got[1], want[0], want[1])
		}
	}
	if got := gw.Texts()[reqs[0].Key()]; got != "Your code for evt-1" {
		t.Errorf("the gateway received %q for evt-1", got)
	}
	// Three accepted sends and one refused while down; the duplicate
	// and the redelivered batch asked the gateway nothing.
	if n := gw.Posts(); n != 4 {
		t.Errorf("the gateway answered %d send requests, want 4", n)
	}
}

// TestWorker runs worker, built in the outside module, against moto SQS
// and DynamoDB Local with the HTTP provider simulator (dropping no
// repeats, so that its count is what sendonce sent): every request,
// enqueued twice, is received once; an invalid one is moved to the
// dead-letter queue; one that cannot be sent now (its channel has no
// provider) stays on the queue; SIGTERM stops the worker cleanly.
func TestWorker(t *testing.T) {
	t.Parallel()
	m, st := outsideModule(t), bareStack(t)
	table := st.table
	sim, simURL := testsupport.Simulator(t, simulator.Options{Token: simToken, IdempotencyDisabled: true})
	q := st.queue(t, "worker-"+testenv.RandomID())
	dlq := st.queue(t, "worker-dlq-"+testenv.RandomID())

	var reqs []notify.Request
	for i := range 8 {
		reqs = append(reqs, smsRequest(fmt.Sprintf("evt-%d", i), fmt.Sprintf("user-%d", i), randomPhone()))
	}
	for range 2 { // every request delivered twice
		for _, r := range reqs {
			if _, err := sendonce.Enqueue(t.Context(), st.sqs, q, r); err != nil {
				t.Fatal(err)
			}
		}
	}
	email := notify.Request{TenantID: "acme", EventID: "evt-mail", Channel: notify.ChannelEmail, Template: "welcome",
		Recipient: notify.Recipient{ID: "user-mail", Email: "ana@example.com"}, Content: &notify.Content{Subject: "Hi", Text: "Welcome"}}
	if _, err := sendonce.Enqueue(t.Context(), st.sqs, q, email); err != nil {
		t.Fatal(err)
	}
	if _, err := st.sqs.SendMessage(t.Context(), &sqs.SendMessageInput{QueueUrl: aws.String(q), MessageBody: aws.String(`{"tenant_id":"acme"}`)}); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(m.bins["worker"])
	cmd.Env = st.env(
		"SENDONCE_TABLE="+table, "SENDONCE_QUEUE_URL="+q, "SENDONCE_DLQ_URL="+dlq,
		"SENDONCE_SMS_PROVIDER=http", "SENDONCE_HTTP_PROVIDER_URL="+simURL, "SENDONCE_HTTP_PROVIDER_TOKEN="+simToken,
		"SENDONCE_HTTP_PROVIDER_IDEMPOTENT=false", // the simulator drops no repeats here
		"AWS_ENDPOINT_URL_DYNAMODB="+testenv.DynamoDBEndpoint(t),
		"SENDONCE_PROVIDER_TIMEOUT=1s", "WORKER_POLLERS=3", "WORKER_WAIT=1s", "WORKER_SEND_TIMEOUT=7s", "WORKER_VISIBILITY=12s",
	)
	var logs testsupport.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("worker output:\n%s", logs.String())
		}
	})

	// Wait until each request was sent, each second copy acknowledged
	// as a duplicate (a copy that met its twin's claim is left for
	// redelivery and acknowledged after its visibility timeout), the
	// email request received and left for redelivery, and the invalid
	// one set aside: the queue then holds the email request alone.
	emailLeft := fmt.Sprintf(`"key":%q,"disposition":"retry"`, email.Key())
	// (A busy machine slows moto: a delete that times out brings a sent
	// message back, to be acknowledged as a duplicate a visibility
	// timeout later. The wait ends as soon as the condition holds.)
	waitFor(t, 3*time.Minute, func() bool {
		out := logs.String()
		if len(sim.DeliveredAll()) < len(reqs) || strings.Count(out, `"duplicate delivery acknowledged"`) < len(reqs) ||
			!strings.Contains(out, emailLeft) || queueCounts(t, st.sqs, dlq)[0] != 1 {
			return false
		}
		a := queueCounts(t, st.sqs, q)
		return a[0]+a[1] == 1
	})

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("worker exited with %v after SIGTERM, want 0", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("worker did not stop within 10s of SIGTERM")
	}
	if !strings.Contains(logs.String(), `"message":"stopped"`) {
		t.Error("the worker did not log its clean stop")
	}

	delivered := sim.DeliveredAll()
	for _, r := range reqs {
		if n := delivered[r.Key()]; n != 1 {
			t.Errorf("%s: the provider received %d messages, want 1", r.EventID, n)
		}
	}
	if len(delivered) != len(reqs) {
		t.Errorf("the provider received %d keys, want %d", len(delivered), len(reqs))
	}
	dl := receiveAll(t, st.sqs, dlq, 1)
	if body := aws.ToString(dl[0].Body); body != `{"tenant_id":"acme"}` {
		t.Errorf("dead-letter queue holds %q, want the invalid request", body)
	}
	left := queueCounts(t, st.sqs, q)
	if left[0]+left[1] != 1 {
		t.Errorf("queue holds %v messages (visible, in flight), want the email request alone", left)
	}
}

// queueCounts returns the visible and in-flight message counts of q.
func queueCounts(t *testing.T, c *sqs.Client, q string) [2]int {
	t.Helper()
	out, err := c.GetQueueAttributes(t.Context(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(q), AttributeNames: []types.QueueAttributeName{
		types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		t.Fatal(err)
	}
	var n [2]int
	fmt.Sscan(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessages)], &n[0])
	fmt.Sscan(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessagesNotVisible)], &n[1])
	return n
}

func waitFor(t *testing.T, timeout time.Duration, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(timeout); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s", timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
