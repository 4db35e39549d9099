// Package awserr classifies the errors of the provider adapters that send
// through an AWS service (sesprovider, snsprovider) into the kinds of
// provider.Error, and runs their one send call under its timeout.
//
// Each adapter describes its service once in a Service: its error codes
// and the words its reasons use. What no code decides goes by the HTTP
// status, then by whether the request can have left at all.
package awserr

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/sendonce/sendonce/internal/redact"
	"github.com/sendonce/sendonce/provider"
)

// Code is the classification of one AWS error code. It is an alias of an
// unnamed struct so that an adapter's table of codes can list its entries
// as {kind, reason} pairs.
type Code = struct {
	Kind   provider.Kind
	Reason string
}

// Service describes how one adapter classifies its service's errors.
type Service struct {
	// Provider is the adapter's name, kept in provider.Error.Provider.
	Provider string
	// Service is the service's name in reasons, e.g. "SES".
	Service string
	// Codes classifies the service's documented error codes; AWS's common
	// codes (credentials, access, throttling, validation) are classified
	// alike for every service unless Codes names them.
	Codes map[string]Code
	// DetailKnown appends the service's error message (redacted) to the
	// reason of a Permanent error of a known code too, not only of an
	// unknown one.
	DetailKnown bool
	// Maybe ends the reason of an error after which the message may have
	// been taken, e.g. "the email may have been accepted".
	Maybe string
	// Maybe5xx ends the reason of an unknown code answered with a 5xx;
	// Maybe when empty.
	Maybe5xx string
}

// commonCodes classifies the error codes every AWS service answers with
// the same meaning (AWS's common errors), unless a Service's Codes say
// otherwise.
var commonCodes = map[string]Code{
	"ValidationException":   {provider.Permanent, "validation failed"},
	"InvalidParameterValue": {provider.Permanent, "invalid parameter value"},
	// Throttled: the service took nothing; retry later.
	"ThrottlingException": {provider.Transient, "throttled"},
	"Throttling":          {provider.Transient, "throttled"},
	// The deployment is at fault: retried, alarmed, never FAILED.
	"AccessDenied":                {provider.Config, "access denied"},
	"AccessDeniedException":       {provider.Config, "access denied"},
	"InvalidClientTokenId":        {provider.Config, "invalid AWS credentials"},
	"UnrecognizedClientException": {provider.Config, "invalid AWS credentials"},
	"SignatureDoesNotMatch":       {provider.Config, "AWS request signature does not match"},
	"ExpiredToken":                {provider.Config, "AWS credentials expired"},
	"ExpiredTokenException":       {provider.Config, "AWS credentials expired"},
}

// Classify translates an error of the service's send call into a
// *provider.Error. to is the message's raw address; it is redacted out of
// any text kept.
//
//   - a code in Codes, or else one of AWS's common error codes: its kind
//     and reason;
//   - an unknown code: by HTTP status (429 Transient, 401/403 Config,
//     other 4xx Permanent, 5xx Ambiguous: the service does not say whether
//     it took the message, and it cannot drop a repeat);
//   - no answer: Transient when the connection was never made (dial or
//     DNS failure: nothing was sent), otherwise Ambiguous (a timeout or
//     reset after the request may have been written).
func (s Service) Classify(err error, to string) *provider.Error {
	return s.ClassifyWith(redact.Default(), err, to)
}

// ClassifyWith is Classify with the addresses of the texts it keeps
// redacted by r.
func (s Service) ClassifyWith(r *redact.Redactor, err error, to string) *provider.Error {
	pe := &provider.Error{Kind: provider.Ambiguous, Provider: s.Provider, Op: "send", Err: r.Error(err, to)}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		pe.Code = ae.ErrorCode()
		k, known := s.Codes[pe.Code]
		if !known {
			k, known = commonCodes[pe.Code]
		}
		if known {
			pe.Kind, pe.Reason = k.Kind, k.Reason
		} else {
			pe.Kind, pe.Reason = s.byStatus(httpStatus(err))
		}
		if msg := r.Text(ae.ErrorMessage(), to); msg != "" && pe.Kind == provider.Permanent && (!known || s.DetailKnown) {
			pe.Reason += ": " + msg
		}
		return pe
	}
	if notSent(err) {
		pe.Kind, pe.Reason = provider.Transient, "could not connect to "+s.Service+": nothing was sent"
		return pe
	}
	if errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
		pe.Reason = "timed out waiting for " + s.Service + ": " + s.Maybe
	} else {
		pe.Reason = "connection to " + s.Service + " failed mid-request: " + s.Maybe
	}
	return pe
}

func (s Service) byStatus(status int) (provider.Kind, string) {
	switch {
	case status >= 500:
		maybe := s.Maybe5xx
		if maybe == "" {
			maybe = s.Maybe
		}
		return provider.Ambiguous, fmt.Sprintf("%s answered HTTP %d: %s", s.Service, status, maybe)
	case status == 429:
		return provider.Transient, "throttled"
	case status == 401 || status == 403:
		return provider.Config, fmt.Sprintf("%s answered HTTP %d", s.Service, status)
	case status >= 400:
		return provider.Permanent, "rejected by " + s.Service
	default:
		return provider.Ambiguous, "unrecognised " + s.Service + " error"
	}
}

// Refuse returns the Permanent error of a message the adapter does not
// send at all (no address, a channel it does not serve), with reason.
func (s Service) Refuse(reason string) *provider.Error {
	return &provider.Error{Kind: provider.Permanent, Provider: s.Provider, Op: "send", Reason: reason}
}

// Base is what an adapter over an AWS service shares: its Service, the
// timeout of its one send call, its logger and its Redactor. Embedded in the adapter, it
// gives it Name and Capabilities; the adapter's Send calls Send.
type Base struct {
	service Service
	timeout time.Duration
	log     *slog.Logger
	redact  *redact.Redactor
}

// NewBase returns the Base of service s whose send call is bounded
// by timeout when it is above zero and whose failures are logged on log
// (nil: discard), addresses redacted by r (nil: redact.Default, read at
// each call).
func NewBase(s Service, timeout time.Duration, log *slog.Logger, r *redact.Redactor) Base {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return Base{service: s, timeout: timeout, log: log, redact: r}
}

// redactor returns a's Redactor, or the package default.
func (a Base) redactor() *redact.Redactor {
	if a.redact != nil {
		return a.redact
	}
	return redact.Default()
}

// Name returns the adapter's name, its Service's Provider.
func (a Base) Name() string { return a.service.Provider }

// Capabilities returns no idempotent sends and no lookup: the AWS services
// sendonce sends through take no client idempotency key and cannot be
// asked whether they sent a message.
func (a Base) Capabilities() provider.Capabilities { return provider.Capabilities{} }

// Send builds m's request with input and makes call, the SDK client's
// method, with it and opts, bounded by the adapter's timeout; id picks the
// message id out of call's answer. An error of input is returned as it
// is, and nothing is sent. An error of call is classified by
// Service.Classify and logged at warning level with msg.
func Send[In, Out, Options any](ctx context.Context, a Base, m provider.Message, msg string,
	input func(provider.Message) (In, error), call func(context.Context, In, ...func(*Options)) (Out, error),
	id func(Out) *string, opts ...func(*Options)) (provider.Receipt, error) {
	in, err := input(m)
	if err != nil {
		return provider.Receipt{}, err
	}
	if a.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, a.timeout)
		defer cancel()
	}
	out, err := call(ctx, in, opts...)
	if err != nil {
		r := a.redactor()
		perr := a.service.ClassifyWith(r, err, m.To)
		a.log.WarnContext(ctx, msg,
			"provider", a.service.Provider, "key", m.Key, "channel", m.Channel,
			"to", r.Address(m.To), "kind", perr.Kind.String(), "code", perr.Code, "reason", perr.Reason)
		return provider.Receipt{}, perr
	}
	return provider.Receipt{MessageID: aws.ToString(id(out))}, nil
}

func httpStatus(err error) int {
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) && re.Response != nil {
		return re.HTTPStatusCode()
	}
	return 0
}

// notSent reports whether err proves the request never left: the TCP
// connection was never established or the name did not resolve.
func notSent(err error) bool {
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
