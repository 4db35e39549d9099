// Package localpipeline runs the whole sendonce pipeline on one machine
// with real components, against emulators that are already running: the
// functions' bootstraps under the Lambda Runtime Interface Emulator (one
// emulator per sender instance, one invocation at a time, as Lambda),
// DynamoDB Local with the production table, SQS on moto_server with a
// dead-letter queue and RedrivePolicy, the provider simulator in process
// as ground truth, the webhook behind a Function URL front, the
// reconciler on a timer, and pollers that behave like Lambda's SQS event
// source mapping (partial batch failures; a function error fails the
// whole batch). docs/local-pipeline.md ("What runs") describes it. The
// chaos harness (make demo, make chaos) starts one per adapter lane;
// tests start one with StartTest. The functions' output is kept for the
// caller: Logs, ParseEMF, Scan.
package localpipeline

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"golang.org/x/sync/errgroup"

	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/ledger/dynamoledger"
	"github.com/sendonce/sendonce/internal/provider/simulator"
	"github.com/sendonce/sendonce/internal/reconcile"
	"github.com/sendonce/sendonce/internal/redact"
	"github.com/sendonce/sendonce/internal/rie"
	"github.com/sendonce/sendonce/internal/templates"
	"github.com/sendonce/sendonce/internal/templates/dynamotemplates"
	"github.com/sendonce/sendonce/internal/testenv"
)

// The pipeline's settings: the queues', the functions' timeouts and the
// reconciler's schedule. Options sets only the sender instances
// (DefaultSenderInstances when zero).
const (
	DefaultSenderInstances   = 4
	DefaultVisibilityTimeout = 10 * time.Second
	DefaultMaxReceiveCount   = 5
	DefaultProviderTimeout   = 2 * time.Second
	DefaultClaimTimeout      = 12 * time.Second
	DefaultSettle            = 2 * time.Second
	DefaultReconcileEvery    = 2 * time.Second
	DefaultSenderTimeout     = 10 * time.Second
	DefaultReconcilerTimeout = 30 * time.Second
	DefaultConcurrency       = 10
)

// Credentials given to the simulator and the functions. They protect
// nothing: everything listens on loopback for the length of one run.
const (
	simToken       = "localpipeline-provider-token"
	callbackSecret = "localpipeline-callback-secret"
)

// Options configures a pipeline. Only the endpoints are required.
type Options struct {
	// DynamoDBEndpoint and MotoEndpoint are the running emulators' URLs
	// (SENDONCE_TEST_DYNAMODB_ENDPOINT, SENDONCE_TEST_MOTO_ENDPOINT).
	DynamoDBEndpoint string
	MotoEndpoint     string
	// RIE is the aws-lambda-rie binary; empty means SENDONCE_TEST_RIE.
	RIE string
	// Bootstraps are the functions' linux bootstraps (BuildBootstraps;
	// StartTest builds them with rie.Build).
	Bootstraps

	// SenderInstances is the number of concurrent sender instances (and
	// pollers). Default 4.
	SenderInstances int
	// Env adds to (and overrides) every function's environment.
	Env map[string]string
	// TemplateTenants are the tenants whose example templates
	// (templates.Examples) Start stores in the table. Default: "demo",
	// the default tenant of a Workload.
	TemplateTenants []string
	// InstanceEnv, if set, is called with each instance's name
	// ("sender-1", "webhook", "reconciler") and adds to (and overrides)
	// that instance's environment after Env: a chaos run gives each
	// instance its own DynamoDB endpoint to tell their requests apart.
	InstanceEnv func(instance string) map[string]string

	// Simulator configures the provider simulator. Token, CallbackSecret
	// and Logger are set by Start.
	Simulator simulator.Options

	// KeepResources makes Close leave the table and queues (and what they
	// hold) in the emulators, for a person to look at afterwards (make
	// demo KEEP=1, through chaos.Options.KeepResources). Default false:
	// Close deletes them.
	KeepResources bool

	// Twin, if set, is called with every batch a poller received; the
	// records it returns are handed at the same moment to a second free
	// sender instance (if one is free), as Lambda does when it delivers
	// one message to two instances at once. The twin invocation deletes
	// nothing. Nil (the default) never delivers twice.
	Twin func(batch []types.Message) []types.Message
}

func (o *Options) defaults() error {
	if o.DynamoDBEndpoint == "" || o.MotoEndpoint == "" {
		return fmt.Errorf("localpipeline: the DynamoDB Local and moto_server endpoints are required (%s, %s): run through `make demo` or `make services-start`, which start them",
			testenv.DynamoDBEndpointEnv, testenv.MotoEndpointEnv)
	}
	if o.RIE = cmp.Or(o.RIE, os.Getenv(rie.BinaryEnv)); o.RIE == "" {
		return rie.ErrNoBinary
	}
	if b := o.Bootstraps; b.SenderBootstrap == "" || b.WebhookBootstrap == "" || b.ReconcilerBootstrap == "" {
		return errors.New("localpipeline: every bootstrap is required (BuildBootstraps)")
	}
	if o.SenderInstances <= 0 {
		o.SenderInstances = DefaultSenderInstances
	}
	return nil
}

// Pipeline is a running local pipeline. Its methods are safe for
// concurrent use.
type Pipeline struct {
	opts Options

	// Resources are the table and queues.
	Resources

	ddb    *dynamodb.Client
	sqs    *sqs.Client
	ledger *dynamoledger.Ledger

	sim      *simulator.Simulator
	simURL   string
	frontURL string
	// closers stop the webhook's front and the simulators, in order.
	closersMu sync.Mutex
	closers   []func()

	senders    []*rie.Instance
	free       chan *rie.Instance
	webhook    *rie.Instance
	reconciler *rie.Instance

	cancel context.CancelFunc
	wg     sync.WaitGroup

	stats pollerStats

	// Redactor makes the address tokens of this pipeline's deployment key
	// (a Secrets Manager secret, SENDONCE_REDACT_KEY_PARAM of every
	// function), for log scans.
	Redactor     *redact.Redactor
	redactKeyARN string

	recMu      sync.Mutex
	recSummary reconcile.Summary
	recRuns    int
	recErrors  int

	closeOnce sync.Once
	closeErr  error
}

type pollerStats struct {
	invocations, functionErrors, records, deleted, reported, twins atomic.Int64
}

// PollerStats are the event source mapping's totals.
type PollerStats struct {
	// Invocations counts sender invocations; FunctionErrors those that
	// failed as a whole (every record of the batch was left to reappear).
	Invocations, FunctionErrors int64
	// Records counts records handed to the sender (redeliveries
	// included); Deleted those acknowledged and deleted; Reported those
	// listed in batchItemFailures.
	Records, Deleted, Reported int64
	// Twins counts twin invocations (Options.Twin): records handed to a
	// second instance at the same time.
	Twins int64
}

// Start creates the resources and starts every component; it returns once
// the pipeline is polling. On error, whatever was started is stopped. The
// caller must call Close.
func Start(ctx context.Context, opts Options) (p *Pipeline, err error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	pl := &Pipeline{opts: opts, recSummary: reconcile.Summary{Actions: map[string]int{}}}
	defer func() {
		if err != nil {
			_ = pl.Close()
			p = nil
		}
	}()
	p = pl
	p.ddb, p.sqs = testenv.DynamoDBAt(opts.DynamoDBEndpoint), testenv.SQSAt(opts.MotoEndpoint)
	if p.redactKeyARN, p.Redactor, err = NewRedactKeySecret(ctx, opts.MotoEndpoint); err != nil {
		return nil, err
	}

	if p.Resources, err = CreateResources(ctx, p.ddb, p.sqs, DefaultVisibilityTimeout, DefaultMaxReceiveCount); err != nil {
		return nil, err
	}
	if p.ledger, err = dynamoledger.New(p.ddb, p.Table, dynamoledger.Config{}); err != nil {
		return nil, fmt.Errorf("localpipeline: ledger: %w", err)
	}
	tenants := opts.TemplateTenants
	if len(tenants) == 0 {
		tenants = []string{"demo"}
	}
	for _, tenant := range tenants {
		if _, err := templates.ImportExamples(ctx, p.Templates(), tenant); err != nil {
			return nil, fmt.Errorf("localpipeline: %w", err)
		}
	}

	// The front listens first: its URL is the callback base of the
	// simulator's callbacks and of the sender's configuration.
	front := httptest.NewServer(http.HandlerFunc(p.serveWebhook))
	p.frontURL, p.closers = front.URL, []func(){front.Close}
	p.sim, p.simURL = p.newSimulator(opts.Simulator)

	env := p.functionEnv()
	if p.webhook, err = p.launch(ctx, "webhook", p.opts.WebhookBootstrap, 30*time.Second, env); err != nil {
		return nil, err
	}
	if p.reconciler, err = p.launch(ctx, "reconciler", p.opts.ReconcilerBootstrap, DefaultReconcilerTimeout, env); err != nil {
		return nil, err
	}
	p.free = make(chan *rie.Instance, opts.SenderInstances)
	for i := range opts.SenderInstances {
		inst, err := p.launch(ctx, "sender-"+strconv.Itoa(i+1), p.opts.SenderBootstrap, DefaultSenderTimeout, env)
		if err != nil {
			return nil, err
		}
		p.senders = append(p.senders, inst)
		p.free <- inst
	}

	runCtx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	for range opts.SenderInstances {
		p.wg.Go(func() { p.poll(runCtx) })
	}
	p.wg.Go(func() { Every(runCtx, DefaultReconcileEvery, func() { _, _ = p.Reconcile(runCtx) }) })
	return p, nil
}

// Bootstraps are the linux bootstraps of ./functions/sender, webhook and
// reconciler.
type Bootstraps struct {
	SenderBootstrap, WebhookBootstrap, ReconcilerBootstrap string
}

// BuildBootstraps compiles the bootstraps at once, each into
// dir/<name>/bootstrap, and returns their paths. It must run inside the
// module (go env GOMOD).
func BuildBootstraps(ctx context.Context, dir string) (Bootstraps, error) {
	var b Bootstraps
	root, err := rie.ModuleRoot(ctx)
	if err != nil {
		return b, err
	}
	var g errgroup.Group
	for name, path := range map[string]*string{"sender": &b.SenderBootstrap, "webhook": &b.WebhookBootstrap, "reconciler": &b.ReconcilerBootstrap} {
		g.Go(func() error {
			out := filepath.Join(dir, name, "bootstrap")
			if err := rie.BuildBootstrap(ctx, root, name, out); err != nil {
				return fmt.Errorf("localpipeline: build %s: %w", name, err)
			}
			*path = out
			return nil
		})
	}
	return b, g.Wait()
}

// Resources are a pipeline's table and queues (CreateResources).
type Resources struct {
	// Table is the DynamoDB table; QueueURL and DLQURL the queues.
	Table, QueueURL, DLQURL string
	queueARN                string
}

// CreateResources creates a table with the production schema in ddb and,
// in q, a dead-letter queue and the notification queue, with visibility
// its visibility timeout and a RedrivePolicy that moves a message to the
// dead-letter queue after maxReceive receives.
func CreateResources(ctx context.Context, ddb *dynamodb.Client, q *sqs.Client, visibility time.Duration, maxReceive int) (Resources, error) {
	suffix := testenv.RandomID()
	r := Resources{Table: "sendonce-local-" + suffix}
	if err := testenv.CreateTable(ctx, ddb, r.Table); err != nil {
		return r, fmt.Errorf("localpipeline: %w", err)
	}
	dlq, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("sendonce-dlq-" + suffix)})
	if err != nil {
		return r, fmt.Errorf("localpipeline: create dead-letter queue: %w", err)
	}
	r.DLQURL = aws.ToString(dlq.QueueUrl)
	dlqARN, err := queueARN(ctx, q, r.DLQURL)
	if err != nil {
		return r, err
	}
	redrive, _ := json.Marshal(map[string]string{"deadLetterTargetArn": dlqARN, "maxReceiveCount": strconv.Itoa(maxReceive)})
	out, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{
		QueueName: aws.String("sendonce-notifications-" + suffix),
		Attributes: map[string]string{
			string(types.QueueAttributeNameVisibilityTimeout): strconv.Itoa(int(visibility / time.Second)),
			string(types.QueueAttributeNameRedrivePolicy):     string(redrive),
		},
	})
	if err != nil {
		return r, fmt.Errorf("localpipeline: create queue: %w", err)
	}
	r.QueueURL = aws.ToString(out.QueueUrl)
	r.queueARN, err = queueARN(ctx, q, r.QueueURL)
	return r, err
}

func queueARN(ctx context.Context, q *sqs.Client, url string) (string, error) {
	name := types.QueueAttributeNameQueueArn
	out, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []types.QueueAttributeName{name}})
	if err != nil {
		return "", fmt.Errorf("localpipeline: queue attribute %s of %s: %w", name, url, err)
	}
	return out.Attributes[string(name)], nil
}

// Env returns the environment that points a function at r and at the
// emulators (DynamoDB Local at ddbURL, everything else on moto_server at
// motoURL), with test credentials.
func (r Resources) Env(ddbURL, motoURL string) map[string]string {
	return map[string]string{
		"AWS_REGION":                       testenv.Region,
		"AWS_ACCESS_KEY_ID":                "test",
		"AWS_SECRET_ACCESS_KEY":            "test",
		"AWS_ENDPOINT_URL_DYNAMODB":        ddbURL,
		"AWS_ENDPOINT_URL_SQS":             motoURL,
		"AWS_ENDPOINT_URL_SNS":             motoURL,
		"AWS_ENDPOINT_URL_SSM":             motoURL,
		"AWS_ENDPOINT_URL_SECRETS_MANAGER": motoURL,
		"SENDONCE_TABLE":                   r.Table,
		"SENDONCE_QUEUE_URL":               r.QueueURL,
		"SENDONCE_DLQ_URL":                 r.DLQURL,
	}
}

// functionEnv is the environment every function gets (each reads what
// it needs).
func (p *Pipeline) functionEnv() map[string]string {
	o := p.opts
	env := p.Resources.Env(o.DynamoDBEndpoint, o.MotoEndpoint)
	maps.Copy(env, map[string]string{
		"SENDONCE_SMS_PROVIDER":                  "http",
		"SENDONCE_EMAIL_PROVIDER":                "http",
		"SENDONCE_HTTP_PROVIDER_URL":             p.simURL,
		"SENDONCE_HTTP_PROVIDER_TOKEN":           simToken,
		"SENDONCE_CALLBACK_BASE_URL":             p.frontURL,
		"SENDONCE_HTTP_PROVIDER_CALLBACK_SECRET": callbackSecret,
		"SENDONCE_PROVIDER_TIMEOUT":              DefaultProviderTimeout.String(),
		"SENDONCE_CLAIM_TIMEOUT":                 DefaultClaimTimeout.String(),
		"SENDONCE_RECONCILE_SETTLE":              DefaultSettle.String(),
		// Released rows are retried after seconds, not minutes, so a
		// local run drains within its timeouts.
		"SENDONCE_RECONCILE_RETRY_BASE": "1s",
		"SENDONCE_CONCURRENCY":          strconv.Itoa(DefaultConcurrency),
		"SENDONCE_REDACT_KEY_PARAM":     p.redactKeyARN,
	})
	maps.Copy(env, o.Env)
	return env
}

func (p *Pipeline) launch(ctx context.Context, name, bootstrap string, timeout time.Duration, env map[string]string) (*rie.Instance, error) {
	if p.opts.InstanceEnv != nil {
		env = maps.Clone(env)
		maps.Copy(env, p.opts.InstanceEnv(name))
	}
	inst, err := rie.Launch(ctx, rie.Config{RIE: p.opts.RIE, Bootstrap: bootstrap, FunctionName: "sendonce-" + name, Timeout: timeout, Env: env})
	if err != nil {
		return nil, fmt.Errorf("localpipeline: start %s: %w", name, err)
	}
	return inst, nil
}

// Simulator returns the provider simulator: the ground truth of what was
// delivered.
func (p *Pipeline) Simulator() *simulator.Simulator { return p.sim }

// newSimulator starts a provider simulator with the pipeline's token and
// callback secret (so the functions' configuration and the webhook accept
// it) and returns it with its base URL. Close stops it.
func (p *Pipeline) newSimulator(opts simulator.Options) (*simulator.Simulator, string) {
	opts.Token = simToken
	opts.CallbackSecret = []byte(callbackSecret)
	sim := simulator.New(opts)
	srv := httptest.NewServer(sim.Handler())
	p.closersMu.Lock()
	defer p.closersMu.Unlock()
	p.closers = append(p.closers, sim.Close, srv.Close)
	return sim, srv.URL
}

// Senders returns the sender instances (one emulator each), in order.
func (p *Pipeline) Senders() []*rie.Instance { return slices.Clone(p.senders) }

// ReconcilerInstance returns the reconciler's emulator instance.
func (p *Pipeline) ReconcilerInstance() *rie.Instance { return p.reconciler }

// RedactKeyARN returns the ARN of the pipeline's redaction key secret on
// moto_server (every function's SENDONCE_REDACT_KEY_PARAM).
func (p *Pipeline) RedactKeyARN() string { return p.redactKeyARN }

// Templates returns a template store on the pipeline's table.
func (p *Pipeline) Templates() templates.Store {
	return dynamotemplates.New(p.ddb, p.Table, dynamotemplates.Config{})
}

// NoRow is the state Row reports for a key the ledger holds no live row
// of.
const NoRow ledger.State = "NO ROW"

// Row reads key's ledger row for a verdict: its record and state, NoRow
// when there is none; the error is any other failure to read it.
func (p *Pipeline) Row(ctx context.Context, key string) (ledger.Record, ledger.State, error) {
	rec, err := p.ledger.Get(ctx, key)
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		return rec, NoRow, nil
	case err != nil:
		return rec, "", err
	}
	return rec, rec.State, nil
}

// Stats returns the event source mapping's totals.
func (p *Pipeline) Stats() PollerStats {
	s := &p.stats
	return PollerStats{
		Invocations: s.invocations.Load(), FunctionErrors: s.functionErrors.Load(),
		Records: s.records.Load(), Deleted: s.deleted.Load(), Reported: s.reported.Load(), Twins: s.twins.Load(),
	}
}

// Enqueue sends bodies to the notification queue, in order, ten per
// SendMessageBatch call.
func (p *Pipeline) Enqueue(ctx context.Context, bodies ...string) error {
	for chunk := range slices.Chunk(bodies, 10) {
		entries := make([]types.SendMessageBatchRequestEntry, len(chunk))
		for i, b := range chunk {
			entries[i] = types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(b)}
		}
		out, err := p.sqs.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(p.QueueURL), Entries: entries})
		if err != nil {
			return fmt.Errorf("localpipeline: enqueue: %w", err)
		}
		if len(out.Failed) > 0 {
			return fmt.Errorf("localpipeline: enqueue: %d of %d messages refused: %s", len(out.Failed), len(chunk), aws.ToString(out.Failed[0].Message))
		}
	}
	return nil
}

// QueueDepth returns the notification queue's visible and in-flight
// message counts (approximate, as SQS reports them).
func (p *Pipeline) QueueDepth(ctx context.Context) (visible, inFlight int, err error) {
	return p.depth(ctx, p.QueueURL)
}

// DLQDepth returns the dead-letter queue's visible and in-flight counts.
func (p *Pipeline) DLQDepth(ctx context.Context) (visible, inFlight int, err error) {
	return p.depth(ctx, p.DLQURL)
}

func (p *Pipeline) depth(ctx context.Context, url string) (visible, inFlight int, err error) {
	out, err := p.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []types.QueueAttributeName{
		types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
	}})
	if err != nil {
		return 0, 0, fmt.Errorf("localpipeline: depth of %s: %w", url, err)
	}
	visible, _ = strconv.Atoi(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessages)])
	inFlight, _ = strconv.Atoi(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessagesNotVisible)])
	return visible, inFlight, nil
}

// DeadLetter is a message found on the dead-letter queue.
type DeadLetter struct {
	Body string
	// Attributes are its message attributes (string values), e.g.
	// sender.AttrErrorReason.
	Attributes map[string]string
}

// DrainDLQ receives and deletes every message on the dead-letter queue.
func (p *Pipeline) DrainDLQ(ctx context.Context) ([]DeadLetter, error) {
	var out []DeadLetter
	for empty := 0; empty < 2; {
		r, err := p.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(p.DLQURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 0,
			MessageAttributeNames: []string{"All"},
		})
		if err != nil {
			return out, fmt.Errorf("localpipeline: receive dead letters: %w", err)
		}
		if len(r.Messages) == 0 {
			empty++
			continue
		}
		for _, m := range r.Messages {
			d := DeadLetter{Body: aws.ToString(m.Body), Attributes: map[string]string{}}
			for k, v := range m.MessageAttributes {
				d.Attributes[k] = aws.ToString(v.StringValue)
			}
			out = append(out, d)
			if _, err := p.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(p.DLQURL), ReceiptHandle: m.ReceiptHandle}); err != nil {
				return out, fmt.Errorf("localpipeline: delete dead letter: %w", err)
			}
		}
	}
	return out, nil
}

// DeadLetterAgain puts dls, read off the dead-letter queue by DrainDLQ,
// back on it with their message attributes (what the sender gave them).
func (p *Pipeline) DeadLetterAgain(ctx context.Context, dls []DeadLetter) error {
	for _, d := range dls {
		attrs := map[string]types.MessageAttributeValue{}
		for k, v := range d.Attributes {
			attrs[k] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
		}
		if _, err := p.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(p.DLQURL), MessageBody: aws.String(d.Body), MessageAttributes: attrs}); err != nil {
			return fmt.Errorf("localpipeline: put a dead letter back: %w", err)
		}
	}
	return nil
}

// Attention returns the rows that still need attention (PENDING and
// UNCERTAIN) across every shard of the attention index.
func (p *Pipeline) Attention(ctx context.Context) ([]ledger.Record, error) {
	var rows []ledger.Record
	for shard := range ledger.AttentionShards {
		q := ledger.AttentionQuery{Shard: shard, DueBefore: time.Now().Add(24 * time.Hour), Limit: 100}
		for {
			page, err := p.ledger.Attention(ctx, q)
			if err != nil {
				return rows, fmt.Errorf("localpipeline: attention shard %d: %w", shard, err)
			}
			rows = append(rows, page.Records...)
			if page.Cursor == "" {
				break
			}
			q.Cursor = page.Cursor
		}
	}
	return rows, nil
}

// Waiting counts rows (as Attention returns them) by what they wait for:
// uncertain ones for the reconciler, the others (pending) for their lease.
func Waiting(rows []ledger.Record) (pending, uncertain int) {
	for _, r := range rows {
		if r.State == ledger.StateUncertain {
			uncertain++
		} else {
			pending++
		}
	}
	return pending, uncertain
}

// Reconcile invokes the reconciler once with an EventBridge scheduled
// event and returns its summary. Runs are serialised (one emulator).
func (p *Pipeline) Reconcile(ctx context.Context) (reconcile.Summary, error) {
	ev := ScheduledEvent(time.Now())
	payload, err := json.Marshal(ev)
	if err != nil {
		return reconcile.Summary{}, err
	}
	body, err := p.reconciler.Invoke(ctx, payload)
	p.recMu.Lock()
	defer p.recMu.Unlock()
	p.recRuns++
	if err != nil {
		p.recErrors++
		return reconcile.Summary{}, fmt.Errorf("localpipeline: reconcile: %w", err)
	}
	var sum reconcile.Summary
	if err := json.Unmarshal(body, &sum); err != nil {
		p.recErrors++
		return sum, fmt.Errorf("localpipeline: reconcile: summary %q: %w", body, err)
	}
	p.recSummary.Examined += sum.Examined
	for a, n := range sum.Actions {
		p.recSummary.Actions[a] += n
	}
	return sum, nil
}

// ReconcileTotals returns the sum of every reconciler run's summary, the
// number of runs and how many of them failed.
func (p *Pipeline) ReconcileTotals() (sum reconcile.Summary, runs, failed int) {
	p.recMu.Lock()
	defer p.recMu.Unlock()
	sum = reconcile.Summary{Examined: p.recSummary.Examined, Actions: maps.Clone(p.recSummary.Actions)}
	return sum, p.recRuns, p.recErrors
}

// ScheduledEvent returns an EventBridge "Scheduled Event" as EventBridge
// sends it to a scheduled Lambda at t.
func ScheduledEvent(t time.Time) events.EventBridgeEvent {
	return events.EventBridgeEvent{
		Version:    "0",
		ID:         "localpipeline-" + strconv.FormatInt(t.UnixNano(), 36),
		DetailType: "Scheduled Event",
		Source:     "aws.events",
		AccountID:  "123456789012",
		Time:       t.UTC().Truncate(time.Second),
		Region:     testenv.Region,
		Resources:  []string{"arn:aws:events:" + testenv.Region + ":123456789012:rule/sendonce-reconciler-schedule"},
		Detail:     json.RawMessage(`{}`),
	}
}

// Logs returns every function's captured output (JSON log lines and EMF
// documents), keyed by instance name ("sender-1", "webhook",
// "reconciler").
func (p *Pipeline) Logs() map[string]string {
	out := map[string]string{}
	for i, s := range p.senders {
		out["sender-"+strconv.Itoa(i+1)] = s.Logs()
	}
	if p.webhook != nil {
		out["webhook"] = p.webhook.Logs()
	}
	if p.reconciler != nil {
		out["reconciler"] = p.reconciler.Logs()
	}
	return out
}

// Close stops the pollers, the timer, every emulator, the front and the
// simulator, and deletes the table and queues (unless
// Options.KeepResources). It is idempotent.
func (p *Pipeline) Close() error {
	p.closeOnce.Do(func() {
		if p.cancel != nil {
			p.cancel()
		}
		p.wg.Wait()
		p.closersMu.Lock()
		for _, c := range p.closers {
			c()
		}
		p.closersMu.Unlock()
		var errs []error
		for _, inst := range append(append([]*rie.Instance{}, p.senders...), p.webhook, p.reconciler) {
			if inst != nil {
				if err := inst.Close(); err != nil {
					errs = append(errs, err)
				}
			}
		}
		if !p.opts.KeepResources {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if p.Table != "" {
				_, _ = p.ddb.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(p.Table)})
			}
			for _, u := range []string{p.QueueURL, p.DLQURL} {
				if u != "" {
					_, _ = p.sqs.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(u)})
				}
			}
		}
		p.closeErr = errors.Join(errs...)
	})
	return p.closeErr
}

// WaitCallbacks waits (bounded by ctx) until sim, which posts each
// callback dups extra times, has posted every callback of every message
// it accepted.
func WaitCallbacks(ctx context.Context, sim *simulator.Simulator, dups int) {
	per := 2 * (1 + max(dups, 0))
	for ctx.Err() == nil {
		st := sim.Stats()
		if st.CallbacksSent+st.CallbacksFailed+st.CallbacksDropped*per >= st.Accepted*per {
			return
		}
		Sleep(ctx, 100*time.Millisecond)
	}
}
