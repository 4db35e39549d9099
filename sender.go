package sendonce

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sendonce/sendonce/internal/decide"
	"github.com/sendonce/sendonce/internal/dispatch"
	"github.com/sendonce/sendonce/internal/metrics"
	"github.com/sendonce/sendonce/internal/opstate"
	"github.com/sendonce/sendonce/internal/redact"
	"github.com/sendonce/sendonce/internal/render"
	"github.com/sendonce/sendonce/internal/sender"
	"github.com/sendonce/sendonce/notify"
	"github.com/sendonce/sendonce/provider"
)

// Defaults of a SenderConfig's and a ReconcilerConfig's durations, used
// when a field is zero.
const (
	// DefaultProviderTimeout bounds one provider call.
	DefaultProviderTimeout = decide.DefaultProviderTimeout
	// DefaultClaimTimeout is the lease of a claim.
	DefaultClaimTimeout = sender.DefaultClaimTimeout
	// DefaultLedgerMargin is the time one step's ledger writes and
	// rendering are given around its provider calls.
	DefaultLedgerMargin = decide.ProcessingMargin
)

// Routes maps a channel to the providers that serve it, in the order they
// are tried: a message goes to the next provider only when the previous
// one refused it before accepting anything (a transient or configuration
// error). A row whose attempt may have reached a provider is always
// resolved against that provider, so every provider a route ever used
// must stay in it while its rows can still be unsettled.
type Routes map[notify.Channel][]provider.Adapter

// SenderConfig is what a Sender is built from. NewSender validates it.
type SenderConfig struct {
	// Ledger is where each message's key is claimed. Required.
	Ledger *Ledger
	// Routes are the channels' providers. A request for a channel with no
	// route is a configuration error: it is retried, never failed.
	Routes Routes
	// DeadLetters receives the bodies HandleSQS cannot parse, with the
	// reason. Without it HandleSQS reports such a record failed, so that
	// the queue's redrive policy moves it aside. Send reports an invalid
	// request Invalid instead (Result.Invalid) and never uses it.
	DeadLetters DeadLetters
	// TemplateCacheTTL is how long a stored template is cached before the
	// tenant's latest version is read again; zero keeps the default (60 s),
	// a negative value disables the cache.
	TemplateCacheTTL time.Duration
	// Metrics receives the sender's metrics (an EMF, or a Metrics of
	// your own); nil records none.
	Metrics Metrics
	// Logger receives the sender's log lines; nil logs nothing.
	Logger *slog.Logger
	// RedactionKey keys the tokens that stand for recipients' addresses
	// in log lines (an HMAC-SHA256: the same address gives the same token
	// under one key, and cannot be recovered without it). At least 32
	// bytes; give every process of a deployment the same key so that
	// their tokens correlate. Empty: a random key of this process (or
	// the one LoadEnvironment set).
	RedactionKey []byte
	// ProviderTimeout bounds one provider call (DefaultProviderTimeout).
	ProviderTimeout time.Duration
	// ClaimTimeout is the lease of a claim (DefaultClaimTimeout); it must
	// cover a lookup and a send: 2 × ProviderTimeout + LedgerMargin.
	ClaimTimeout time.Duration
	// LedgerMargin is the time one step's ledger writes (the claim and
	// the outcome's mark) and rendering are given around its provider
	// calls (DefaultLedgerMargin, 5 s). No first attempt starts with less
	// than ProviderTimeout + LedgerMargin left before its context's
	// deadline, and no takeover of a dead worker's claim (a lookup, then
	// a send) with less than 2 × ProviderTimeout + LedgerMargin: such a
	// message is reported Retry instead. Lower it only for a ledger that
	// answers faster (DynamoDB in the same region answers in
	// milliseconds; the margin covers the SDK's retries).
	LedgerMargin time.Duration
	// SendTimeout, when set, is the deadline Send gives each message (a
	// deadline of ctx that comes earlier still wins). NewSender refuses
	// one shorter than a step's longest path, 2 × ProviderTimeout +
	// LedgerMargin (15 s with the defaults): with less, some messages
	// could never be sent. Zero leaves the deadline to ctx; HandleSQS
	// ignores it (the Lambda invocation's deadline applies).
	SendTimeout time.Duration
	// Settle is how long after an attempt a provider's "no record" answer
	// is trusted when a dead worker's claim is taken over.
	Settle time.Duration
	// RetryBase is the base of the reconciler's backoff of the rows this
	// sender releases.
	RetryBase time.Duration
	// Concurrency bounds the records of one batch processed at once
	// (default 10). Records of one FIFO message group run in order.
	Concurrency int
	// Validity is each class's default validity (notify.ClassOTP → 10
	// minutes; SENDONCE_VALIDITY), counted from when the message was
	// first enqueued (HandleSQS: the record's SentTimestamp; Send: its
	// enqueued argument); a request's earlier expires_at wins. Past it a
	// message is never sent (docs/request.md, "Validity"). None when nil.
	Validity map[notify.Class]time.Duration
}

// DeadLetters receives requests that can never be sent.
type DeadLetters interface {
	// Put stores the record's body with the reason it was rejected. An
	// error means the record was not stored; HandleSQS then reports the
	// record failed so that it is not lost.
	Put(ctx context.Context, rec events.SQSMessage, invalid *notify.InvalidError) error
}

// NewSQSDeadLetters returns DeadLetters that put each invalid request on
// the SQS queue at queueURL (the notification queue's dead-letter queue),
// its body unchanged and its reason in message attributes.
func NewSQSDeadLetters(client *sqs.Client, queueURL string) DeadLetters {
	return &sender.SQSDeadLetters{Client: client, QueueURL: queueURL}
}

// Sender sends notification requests once each. It is safe for
// concurrent use.
type Sender struct {
	s           *sender.Sender
	metrics     metrics.Recorder
	log         *slog.Logger
	sendTimeout time.Duration
}

// NewSender validates cfg and returns a Sender.
func NewSender(cfg SenderConfig) (*Sender, error) {
	if cfg.Ledger == nil {
		return nil, errors.New("sendonce: new sender: a ledger is required")
	}
	var dl sender.DeadLetters = noDeadLetters{}
	if cfg.DeadLetters != nil {
		dl = cfg.DeadLetters
	}
	t := timing{provider: cfg.ProviderTimeout, claim: cfg.ClaimTimeout, settle: cfg.Settle, retryBase: cfg.RetryBase, margin: cfg.LedgerMargin, redactionKey: cfg.RedactionKey}
	d, err := newDispatcher(cfg.Ledger, cfg.Routes, render.Config{CacheTTL: cfg.TemplateCacheTTL}, cfg.Metrics, cfg.Logger, t)
	if err != nil {
		return nil, fmt.Errorf("sendonce: new sender: %w", err)
	}
	if need := d.Budgets().TakeOver(); cfg.SendTimeout < 0 || cfg.SendTimeout > 0 && cfg.SendTimeout < need {
		return nil, fmt.Errorf("sendonce: new sender: SendTimeout %s is shorter than a step's longest path, %s (2 × ProviderTimeout %s + LedgerMargin %s): a message whose claim must be taken over could never be sent",
			cfg.SendTimeout, need, d.ProviderTimeout, d.Budgets().TakeOver()-2*d.ProviderTimeout)
	}
	validity := make(map[string]time.Duration, len(cfg.Validity))
	for class, v := range cfg.Validity {
		if !class.Valid() {
			return nil, fmt.Errorf("sendonce: new sender: validity of %q: not one of otp, transactional, marketing", class)
		}
		validity[string(class)] = v
	}
	s, err := sender.New(sender.Config{Dispatcher: d, DeadLetters: dl, Concurrency: cfg.Concurrency, Validity: validity})
	if err != nil {
		return nil, fmt.Errorf("sendonce: new sender: %w", err)
	}
	return &Sender{s: s, metrics: d.Metrics, log: d.Logger, sendTimeout: cfg.SendTimeout}, nil
}

// HandleSQS processes one SQS batch, the handler of a Lambda function fed
// by an SQS event source mapping with ReportBatchItemFailures. It reports
// the records that must be delivered again; every other record was sent,
// settled, or moved to DeadLetters. It never fails the whole batch. A
// record's validity counts from its SentTimestamp (or, for a message put
// back by `sendonce dlq redrive`, its original one).
func (s *Sender) HandleSQS(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	return s.s.HandleSQS(ctx, ev)
}

// Send is the one-message send step, for a program that takes requests
// from anywhere (a worker polling SQS, a stream consumer): it validates
// req exactly as HandleSQS validates a record's body (notify.Parse; an
// invalid request is Invalid, with Result.Invalid naming the field),
// claims its key, sends through its channel's route unless an earlier
// delivery already did, and records the outcome.
//
// enqueued is when the message was first enqueued, from which its
// class's default validity counts (SenderConfig.Validity): for a message
// received from SQS, EnqueuedAt of it. The zero time means now, for a
// request that was never queued.
//
// Give ctx a deadline (or set SenderConfig.SendTimeout): no provider call
// starts without time left to finish it and record its answer. Once a
// provider call has started, its outcome is recorded even when ctx is
// cancelled (the write has a timeout of its own), so a cancelled Send
// leaves the row SENT, FAILED or UNCERTAIN, never held. A ctx already
// done when Send is called claims nothing: Retry.
//
// The caller acknowledges the message unless the Result's Disposition is
// Retry, and delivers it again later (the same request, so the same key).
func (s *Sender) Send(ctx context.Context, req notify.Request, enqueued time.Time) Result {
	parsed, invalid := parseRequest(req)
	if invalid != nil {
		s.metrics.Count(metrics.InvalidRequests, 1)
		s.log.Warn("invalid request", "key", req.Key(), "field", invalid.Field, "reason", invalid.Reason)
		return Result{Key: req.Key(), Disposition: Invalid, Reason: invalid.Error(), Invalid: invalid}
	}
	if s.sendTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.sendTimeout)
		defer cancel()
	}
	return result(s.s.ProcessEnqueued(ctx, parsed, enqueued))
}

// parseRequest returns req as HandleSQS would see it on the queue: its
// JSON parsed by notify.Parse (defaults filled in, data decoded as
// notify.Parse decodes it), or the reason it is invalid.
func parseRequest(req notify.Request) (notify.Request, *notify.InvalidError) {
	body, err := json.Marshal(req)
	if err != nil {
		return req, &notify.InvalidError{Field: "data", Reason: "cannot be encoded as JSON: " + err.Error()}
	}
	parsed, err := notify.Parse(body)
	if err != nil {
		var invalid *notify.InvalidError
		if !errors.As(err, &invalid) {
			invalid = &notify.InvalidError{Reason: err.Error()}
		}
		return req, invalid
	}
	return parsed, nil
}

// EnqueuedAt returns when m, a message received from SQS, was first
// enqueued: its SentTimestamp or, for a message `sendonce dlq redrive`
// put back, the original one it carries, whichever is earlier. Ask
// ReceiveMessage for the SentTimestamp system attribute and for all
// message attributes, or the zero time comes back (Send then counts the
// validity from now).
func EnqueuedAt(m sqstypes.Message) time.Time {
	rec := events.SQSMessage{Attributes: m.Attributes}
	if a, ok := m.MessageAttributes[sender.EnqueuedAttribute]; ok {
		rec.MessageAttributes = map[string]events.SQSMessageAttribute{sender.EnqueuedAttribute: {StringValue: a.StringValue, DataType: aws.ToString(a.DataType)}}
	}
	return sender.Enqueued(rec)
}

// WithLogger returns a Sender that logs to log (for example annotated
// with a request id) and shares everything else with s.
func (s *Sender) WithLogger(log *slog.Logger) *Sender {
	c := *s
	c.s, c.log = s.s.WithLogger(logger(log)), logger(log)
	return &c
}

// Disposition is what one send step did with a message.
type Disposition int

// The dispositions of a send step.
const (
	// Sent: this step's attempt was accepted by the provider.
	Sent Disposition = iota + 1
	// Failed: the provider (or the request itself) refused the message
	// for good.
	Failed
	// Uncertain: this step's attempt may have reached the provider; the
	// reconciler settles it.
	Uncertain
	// Duplicate: an earlier delivery of the message sent it, or the
	// reconciler owns it; this step sent nothing.
	Duplicate
	// Invalid: the request cannot be stored; it never becomes valid.
	Invalid
	// Retry: nothing was decided; deliver the message again later.
	Retry
)

var dispositionNames = [...]string{Sent: "sent", Failed: "failed", Uncertain: "uncertain", Duplicate: "duplicate", Invalid: "invalid", Retry: "retry"}

// String returns the disposition's name as logs print it ("sent", ...).
func (d Disposition) String() string {
	if d > 0 && int(d) < len(dispositionNames) {
		return dispositionNames[d]
	}
	return fmt.Sprintf("Disposition(%d)", int(d))
}

// Result is what Send did with one message: its Disposition with the
// detail.
type Result struct {
	// Key is the message's key (notify.Request.Key).
	Key         string
	Disposition Disposition
	// Provider is the name of the provider this step's attempt went
	// through (Sent, Failed by the provider, Uncertain, a Retry after a
	// refusal) or, for a Duplicate, the provider of the delivery that
	// sent it. Empty when no provider was involved.
	Provider string
	// ProviderMessageID is the provider's id of the message, for Sent
	// and for a Duplicate whose first delivery recorded one.
	ProviderMessageID string
	// Reason explains Failed, Uncertain, Invalid and Retry.
	Reason string
	// Invalid is the request's fault, for Invalid: the field (its JSON
	// name, "recipient.phone") and what is wrong with it.
	Invalid *notify.InvalidError
	// Previous, for a Duplicate, is the message's row as the earlier
	// delivery left it: its state, its attempts and their providers, its
	// outcome (never the address).
	Previous *Row
}

func result(r dispatch.Result) Result {
	o := Result{Key: r.Key, Provider: r.Provider, ProviderMessageID: r.ProviderMessageID, Reason: r.Reason}
	switch r.Disposition {
	case dispatch.Sent:
		o.Disposition = Sent
	case dispatch.Failed:
		o.Disposition = Failed
	case dispatch.Uncertain:
		o.Disposition = Uncertain
	case dispatch.Duplicate, dispatch.OwnedByReconciler:
		o.Disposition = Duplicate
		if r.Row != nil {
			row := rowOf(*r.Row)
			o.Previous = &row
		}
	case dispatch.Invalid:
		o.Disposition = Invalid
		o.Invalid = &notify.InvalidError{Reason: r.Reason}
	default:
		o.Disposition = Retry
	}
	return o
}

// split turns routes into the sender's channel → first provider map and
// the fallbacks after it.
func (r Routes) split() (map[string]provider.Adapter, map[string][]provider.Adapter, error) {
	providers := map[string]provider.Adapter{}
	fallbacks := map[string][]provider.Adapter{}
	for ch, route := range r {
		if len(route) == 0 {
			continue
		}
		seen := map[string]bool{}
		for _, p := range route {
			if p == nil {
				return nil, nil, fmt.Errorf("channel %s: a nil provider in its route", ch)
			}
			if seen[p.Name()] {
				return nil, nil, fmt.Errorf("channel %s: provider %s twice in its route", ch, p.Name())
			}
			seen[p.Name()] = true
		}
		providers[string(ch)], fallbacks[string(ch)] = route[0], route[1:]
	}
	return providers, fallbacks, nil
}

// noDeadLetters refuses every invalid record: HandleSQS then reports it
// failed, so SQS's own redrive moves it to the queue's dead-letter queue.
type noDeadLetters struct{}

func (noDeadLetters) Put(context.Context, events.SQSMessage, *notify.InvalidError) error {
	return errors.New("no dead-letter queue is configured")
}

// logger is the one meaning of a nil logger in this package: log nothing.
func logger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}

// timing is the durations a sender and a reconciler share.
type timing struct {
	provider, claim, settle, retryBase, margin time.Duration
	redactionKey                               []byte
}

// newDispatcher builds the dispatcher of a Sender or a Reconciler: l's
// rows and templates (rendered with rc), routes, and the defaults of a
// zero provider or claim timeout.
func newDispatcher(l *Ledger, routes Routes, rc render.Config, m Metrics, log *slog.Logger, t timing) (*dispatch.Dispatcher, error) {
	providers, fallbacks, err := routes.split()
	if err != nil {
		return nil, err
	}
	var r *redact.Redactor
	if len(t.redactionKey) > 0 {
		if r, err = redact.New(t.redactionKey); err != nil {
			return nil, fmt.Errorf("RedactionKey: %w", err)
		}
	}
	var status dispatch.StatusRecorder
	if l.db != nil {
		// `sendonce status` reads the providers known down from the table.
		status = opstate.Store{DB: l.db, Table: l.table}
	}
	return dispatch.New(dispatch.Dispatcher{
		Status:          status,
		Ledger:          l.rows,
		Providers:       providers,
		Fallbacks:       fallbacks,
		Renderer:        render.New(l.templates, rc),
		Metrics:         recorder(m),
		Logger:          logger(log),
		ProviderTimeout: cmp.Or(t.provider, DefaultProviderTimeout),
		ClaimTimeout:    cmp.Or(t.claim, DefaultClaimTimeout),
		Settle:          t.settle,
		RetryBase:       t.retryBase,
		Margin:          t.margin,
		Redactor:        r,
	})
}
