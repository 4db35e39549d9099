// Package lambdaprovider is the adapter of a provider written as an AWS
// Lambda function (SENDONCE_<CHANNEL>_PROVIDER=lambda): a team writes the
// function in any language, deploys it in its own stack, and sendonce
// invokes it synchronously (Invoke, RequestResponse) with the JSON of
// docs/lambda-provider.md (schema/lambda-provider.v1.json).
//
// The function's capabilities cannot be discovered: they are declared in
// configuration (Config.Idempotent, Config.Lookup), and the adapter
// reports exactly those. The adapter implements provider.Looker only when
// lookup is declared.
//
// Send classifies every outcome into a provider.Kind:
//
//	answer accepted, with an id          a Receipt
//	answer rejected                      Permanent, with the function's reason
//	answer retry                         Transient, with the function's reason
//	function error (FunctionError set,   Ambiguous: the function ran and may
//	  or an error document), function      have sent before it failed
//	  timeout, an unreadable answer
//	Lambda refused the invoke            by error code (Classify): throttling
//	                                     Transient, a missing function or
//	                                     permission Config, ...
//	no answer, request written           Ambiguous (timeout, reset)
//	no answer, request not written       Transient (connection refused, DNS)
//
// "Written" is known from net/http/httptrace, as in httpprovider. The
// SDK's retries are off for Invoke (one attempt per call): a retried
// invoke after a timeout could run the function twice. The sender retries
// what is transient on its own schedule, with the ledger in between.
//
// Lookup invokes the function with op "lookup". A lookup sends nothing, so
// what would be Ambiguous or Permanent for a send is Transient for a
// lookup; Config stays Config.
//
// Locally the function runs under the Lambda Runtime Interface Emulator,
// which serves the Invoke API's path for the function named "function":
// point the SDK at it with AWS_ENDPOINT_URL_LAMBDA and configure the
// function name "function". The emulator returns a function's error as
// a plain 200 answer holding the error document, and a timeout as the
// text "Task timed out after N.00 seconds": both are read as a function
// error (Ambiguous), as Lambda's own FunctionError answer is.
package lambdaprovider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptrace"
	"regexp"
	"strings"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/sendonce/sendonce/internal/decide"
	"github.com/sendonce/sendonce/internal/redact"
	"github.com/sendonce/sendonce/provider"
)

// ProviderName is the adapter's configuration name
// (SENDONCE_<CHANNEL>_PROVIDER=lambda).
const ProviderName = "lambda"

// DefaultTimeout is one call's timeout when Config.Timeout is zero.
const DefaultTimeout = decide.DefaultProviderTimeout

// ErrInvalidConfig is wrapped by New's errors.
var ErrInvalidConfig = errors.New("lambdaprovider: invalid config")

// Invoker is the part of the Lambda client the adapter uses
// (*lambda.Client).
type Invoker interface {
	Invoke(ctx context.Context, in *lambda.InvokeInput, optFns ...func(*lambda.Options)) (*lambda.InvokeOutput, error)
}

// Config configures the adapter of one function.
type Config struct {
	// Client invokes the function. Required. Its endpoint comes from the
	// SDK's configuration (AWS_ENDPOINT_URL_LAMBDA for the emulator).
	Client Invoker
	// Function is the function's ARN (arn:aws:lambda:REGION:ACCOUNT:
	// function:NAME, optionally with :VERSION or :ALIAS) or its name
	// (NAME[:QUALIFIER], in the client's account and region; "function"
	// for the emulator). Required; CheckFunction says what is accepted.
	Function string
	// Idempotent declares that the function drops a repeat of a key: a
	// second send with the same key sends nothing new and answers
	// accepted with the first message's id. Capabilities then reports
	// IdempotentSends, so the reconciler settles an ambiguous (UNCERTAIN)
	// attempt by repeating it with the same key.
	Idempotent bool
	// Lookup declares that the function answers op "lookup": the adapter
	// then implements provider.Looker and reports LookupByReference.
	Lookup bool
	// Timeout bounds one invocation, on top of ctx's deadline. Zero means
	// DefaultTimeout; negative is invalid. Set the function's own timeout
	// below it, so that Lambda ends a slow invocation (a function error)
	// before the adapter stops waiting.
	Timeout time.Duration
	// Logger receives one line per failed call (Warn) and per success
	// (Debug), the recipient redacted. Nil discards.
	Logger *slog.Logger
	// Now is the clock of a request's attempted_at when the message
	// carries no attempt time; nil means time.Now.
	Now func() time.Time
	// Redactor makes the tokens of the addresses in its log lines and
	// reasons; nil: redact.Default.
	Redactor *redact.Redactor
}

// Provider is the adapter of one function. It implements
// provider.Adapter and is safe for concurrent use.
type Provider struct {
	client   Invoker
	function string
	caps     provider.Capabilities
	timeout  time.Duration
	log      *slog.Logger
	now      func() time.Time
	redactor *redact.Redactor
}

// Looking is a Provider whose function answers lookups: it implements
// provider.Looker too.
type Looking struct{ *Provider }

var (
	_ provider.Adapter = (*Provider)(nil)
	_ provider.Looker  = Looking{}
)

var (
	functionName = `[A-Za-z0-9_-]{1,64}`
	qualifier    = `(:(\$LATEST|[A-Za-z0-9_-]{1,128}))?`
	functionRE   = regexp.MustCompile(`^(arn:aws[a-z-]*:lambda:[a-z]{2}(-[a-z]+)+-[0-9]+:[0-9]{12}:function:)?` + functionName + qualifier + `$`)
)

// CheckFunction reports whether fn names a Lambda function the adapter can
// invoke: a function ARN, arn:PARTITION:lambda:REGION:ACCOUNT:function:NAME
// with an optional :VERSION, :ALIAS or :$LATEST, or a bare NAME with the
// same optional qualifier. NAME is 1 to 64 letters, digits, '-' or '_'.
func CheckFunction(fn string) error {
	if !functionRE.MatchString(fn) {
		return fmt.Errorf("%q is neither a Lambda function ARN (arn:aws:lambda:REGION:ACCOUNT:function:NAME[:QUALIFIER]) nor a function name", fn)
	}
	return nil
}

// New validates cfg and returns the function's adapter: a *Provider, or a
// Looking when cfg.Lookup is set. Its error wraps ErrInvalidConfig and
// names the bad field.
func New(cfg Config) (provider.Adapter, error) {
	if cfg.Client == nil {
		return nil, fmt.Errorf("%w: Client is required", ErrInvalidConfig)
	}
	if err := CheckFunction(cfg.Function); err != nil {
		return nil, fmt.Errorf("%w: Function: %v", ErrInvalidConfig, err)
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("%w: Timeout %s is negative", ErrInvalidConfig, cfg.Timeout)
	}
	p := &Provider{
		client: cfg.Client, function: cfg.Function, timeout: cfg.Timeout, log: cfg.Logger, now: cfg.Now, redactor: cfg.Redactor,
		caps: provider.Capabilities{IdempotentSends: cfg.Idempotent, LookupByReference: cfg.Lookup},
	}
	if p.timeout == 0 {
		p.timeout = DefaultTimeout
	}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	if p.now == nil {
		p.now = time.Now
	}
	if cfg.Lookup {
		return Looking{p}, nil
	}
	return p, nil
}

// redact returns p's Redactor, or the package default.
func (p *Provider) redact() *redact.Redactor {
	if p.redactor != nil {
		return p.redactor
	}
	return redact.Default()
}

// Name returns "lambda".
func (p *Provider) Name() string { return ProviderName }

// Capabilities returns what the configuration declared.
func (p *Provider) Capabilities() provider.Capabilities { return p.caps }

// Function returns the function the adapter invokes.
func (p *Provider) Function() string { return p.function }

// Send invokes the function with op "send" and returns the id of its
// accepted answer, or a *provider.Error classified as the package
// documentation describes. A message without a key is refused (Config:
// the caller is miswired) before any call.
func (p *Provider) Send(ctx context.Context, m provider.Message) (provider.Receipt, error) {
	if m.Key == "" {
		return provider.Receipt{}, p.fail(OpSend, m, &provider.Error{Kind: provider.Config, Reason: "message has no idempotency key"})
	}
	start := time.Now()
	a, perr := p.call(ctx, OpSend, m)
	if perr != nil {
		return provider.Receipt{}, p.fail(OpSend, m, perr)
	}
	switch a.Status {
	case StatusAccepted:
		p.log.Debug("provider send accepted", "provider", ProviderName, "key", m.Key, "to", p.redact().Address(m.To),
			"message_id", a.ID, "elapsed_ms", time.Since(start).Milliseconds())
		return provider.Receipt{MessageID: a.ID}, nil
	case StatusRejected:
		return provider.Receipt{}, p.fail(OpSend, m, &provider.Error{Kind: provider.Permanent, Code: clean(p.redact(), a.Code, m.To),
			Reason: or(clean(p.redact(), a.Reason, m.To), "rejected by the function")})
	default: // StatusRetry: ParseAnswer allows nothing else for a send.
		return provider.Receipt{}, p.fail(OpSend, m, &provider.Error{Kind: provider.Transient, Code: clean(p.redact(), a.Code, m.To),
			Reason: or(clean(p.redact(), a.Reason, m.To), "the function asked to retry later")})
	}
}

// Lookup invokes the function with op "lookup": accepted is
// LookupAccepted, rejected LookupRejected with its reason, not_found
// LookupNotFound. Errors are *provider.Error: a retry answer, a function
// error and every failure to invoke are Transient, except those Classify
// calls Config.
func (l Looking) Lookup(ctx context.Context, m provider.Message) (provider.LookupResult, error) {
	p := l.Provider
	if m.Key == "" {
		return provider.LookupResult{}, p.fail(OpLookup, m, &provider.Error{Kind: provider.Config, Reason: "message has no idempotency key"})
	}
	a, perr := p.call(ctx, OpLookup, m)
	if perr != nil {
		if perr.Kind != provider.Config {
			perr.Kind = provider.Transient
		}
		return provider.LookupResult{}, p.fail(OpLookup, m, perr)
	}
	var res provider.LookupResult
	switch a.Status {
	case StatusAccepted:
		res = provider.LookupResult{Status: provider.LookupAccepted, MessageID: a.ID}
	case StatusRejected:
		res = provider.LookupResult{Status: provider.LookupRejected, MessageID: a.ID,
			Reason: or(clean(p.redact(), a.Reason, m.To), "rejected by the function")}
	case StatusNotFound:
		res = provider.LookupResult{Status: provider.LookupNotFound}
	default: // StatusRetry
		return provider.LookupResult{}, p.fail(OpLookup, m, &provider.Error{Kind: provider.Transient, Code: clean(p.redact(), a.Code, m.To),
			Reason: or(clean(p.redact(), a.Reason, m.To), "the function could not look the message up")})
	}
	p.log.Debug("provider lookup", "provider", ProviderName, "key", m.Key, "result", res.Status.String(), "message_id", res.MessageID)
	return res, nil
}

// NewRequest returns the payload of op for m.
func NewRequest(op Op, m provider.Message, now time.Time) Request {
	r := Request{
		Version: Version, Op: op, Key: m.Key, Tenant: m.Tenant, Channel: string(m.Channel), Class: string(m.Class), To: m.To,
		Content:     Content{Subject: m.Subject, Text: m.Body, HTML: m.HTML},
		AttemptedAt: timestamp(m.AttemptedAt, now),
	}
	if op == OpLookup {
		if !m.AttemptedUntil.IsZero() {
			r.AttemptedUntil = timestamp(m.AttemptedUntil, now)
		}
		r.ProviderMessageID = m.ProviderMessageID
	}
	return r
}

// timestamp formats t (now when t is zero) as RFC 3339 in UTC with
// milliseconds.
func timestamp(t, now time.Time) string {
	if t.IsZero() {
		t = now
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

// noRetry makes one Invoke one HTTP attempt.
func noRetry(o *lambda.Options) { o.RetryMaxAttempts = 1 }

// call invokes the function with op for m and returns its answer, or the
// classified failure (as for a send; Lookup relaxes it).
func (p *Provider) call(ctx context.Context, op Op, m provider.Message) (Answer, *provider.Error) {
	payload, err := json.Marshal(NewRequest(op, m, p.now()))
	if err != nil {
		return Answer{}, &provider.Error{Kind: provider.Permanent, Reason: "cannot encode the request", Err: err}
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	var written atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		// Called once the request was flushed, or failed while being
		// written: either way the function may have been started.
		WroteRequest: func(httptrace.WroteRequestInfo) { written.Store(true) },
	})
	out, err := p.client.Invoke(ctx, &lambda.InvokeInput{
		FunctionName:   aws.String(p.function),
		InvocationType: types.InvocationTypeRequestResponse,
		Payload:        payload,
	}, noRetry)
	if err != nil {
		return Answer{}, ClassifyWith(p.redact(), err, written.Load(), m.To)
	}
	if out.FunctionError != nil {
		return Answer{}, functionError(p.redact(), aws.ToString(out.FunctionError), out.Payload, m.To)
	}
	if out.StatusCode != 0 && out.StatusCode != 200 {
		return Answer{}, &provider.Error{Kind: provider.Ambiguous, Code: fmt.Sprint(out.StatusCode),
			Reason: fmt.Sprintf("Lambda answered status %d to a synchronous invoke: %s", out.StatusCode, mayHaveSent)}
	}
	a, err := ParseAnswer(op, out.Payload)
	if err != nil {
		if doc, ok := errorDocument(out.Payload); ok {
			// The emulator reports a function error so, without the
			// X-Amz-Function-Error header Lambda sets.
			return Answer{}, functionError(p.redact(), "", []byte(doc), m.To)
		}
		if strings.HasPrefix(string(out.Payload), emulatorTimeout) {
			return Answer{}, &provider.Error{Kind: provider.Ambiguous, Code: "Sandbox.Timedout",
				Reason: "the function timed out (" + clean(p.redact(), string(out.Payload), m.To) + "): " + mayHaveSent}
		}
		return Answer{}, &provider.Error{Kind: provider.Ambiguous, Reason: clean(p.redact(), err.Error(), m.To) + ": " + mayHaveSent, Err: err}
	}
	return a, nil
}

// mayHaveSent ends the reason of an Ambiguous outcome.
const mayHaveSent = "the function may have sent the message"

// emulatorTimeout starts the Runtime Interface Emulator's answer to an
// invocation that ran past the function's timeout.
const emulatorTimeout = "Task timed out after "

// errorDocument reports whether payload is a Lambda error document (an
// object with errorType or errorMessage and no status) and returns it.
func errorDocument(payload []byte) (string, bool) {
	var v map[string]json.RawMessage
	if json.Unmarshal(payload, &v) != nil {
		return "", false
	}
	_, status := v["status"]
	_, typ := v["errorType"]
	_, msg := v["errorMessage"]
	return string(payload), !status && (typ || msg)
}

// functionError is the Ambiguous error of an invocation whose function
// failed: kind is the FunctionError header ("Unhandled"), payload the
// error document.
func functionError(r *redact.Redactor, kind string, payload []byte, to string) *provider.Error {
	var doc struct {
		Type    string `json:"errorType"`
		Message string `json:"errorMessage"`
	}
	_ = json.Unmarshal(payload, &doc)
	what := "function error"
	if kind != "" {
		what += " (" + kind + ")"
	}
	if msg := clean(r, doc.Message, to); msg != "" {
		what += ": " + msg
	}
	return &provider.Error{Kind: provider.Ambiguous, Code: or(clean(r, doc.Type, to), "FunctionError"), Reason: what + ": " + mayHaveSent}
}

// fail completes e, logs it and returns it.
func (p *Provider) fail(op Op, m provider.Message, e *provider.Error) error {
	e.Provider, e.Op = ProviderName, string(op)
	p.log.Warn("provider call failed", "provider", ProviderName, "op", string(op), "key", m.Key, "function", p.function,
		"to", p.redact().Address(m.To), "kind", e.Kind.String(), "code", e.Code, "reason", e.Reason)
	return e
}

// clean makes the function's or Lambda's text safe to store and log: the
// recipient and anything shaped like an address are redacted
// (r.Text), control characters become spaces, and the result is valid
// UTF-8 of at most about 200 bytes.
func clean(r *redact.Redactor, s, to string) string {
	if s == "" {
		return ""
	}
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(s, "?"))
	return strings.TrimSpace(strings.ToValidUTF8(r.Text(strings.TrimSpace(s), to), ""))
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
