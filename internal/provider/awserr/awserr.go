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

	"github.com/sendonce/sendonce/internal/provider"
	"github.com/sendonce/sendonce/internal/redact"
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
	// Codes classifies the service's documented error codes.
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

// Classify translates an error of the service's send call into a
// *provider.Error. to is the message's raw address; it is redacted out of
// any text kept.
//
//   - a code in Codes: its kind and reason;
//   - an unknown code: by HTTP status (429 Transient, 401/403 Config,
//     other 4xx Permanent, 5xx Ambiguous: the service does not say whether
//     it took the message, and it cannot drop a repeat);
//   - no answer: Transient when the connection was never made (dial or
//     DNS failure: nothing was sent), otherwise Ambiguous (a timeout or
//     reset after the request may have been written).
func (s Service) Classify(err error, to string) *provider.Error {
	pe := &provider.Error{Kind: provider.Ambiguous, Provider: s.Provider, Op: "send", Err: redact.Error(err, to)}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		pe.Code = ae.ErrorCode()
		k, known := s.Codes[pe.Code]
		if known {
			pe.Kind, pe.Reason = k.Kind, k.Reason
		} else {
			pe.Kind, pe.Reason = s.byStatus(httpStatus(err))
		}
		if msg := redact.Text(ae.ErrorMessage(), to); msg != "" && pe.Kind == provider.Permanent && (!known || s.DetailKnown) {
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

// Send runs call, the adapter's one request for m, bounded by timeout when
// it is above zero. On success it returns the message id call returned;
// on failure the error classified by Classify, logged on log at warning
// level with msg.
func (s Service) Send(ctx context.Context, log *slog.Logger, timeout time.Duration, m provider.Message, msg string, call func(context.Context) (*string, error)) (provider.Receipt, error) {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	id, err := call(ctx)
	if err != nil {
		perr := s.Classify(err, m.To)
		log.WarnContext(ctx, msg,
			"provider", s.Provider, "key", m.Key, "channel", m.Channel,
			"to", redact.Address(m.To), "kind", perr.Kind.String(), "code", perr.Code, "reason", perr.Reason)
		return provider.Receipt{}, perr
	}
	return provider.Receipt{MessageID: aws.ToString(id)}, nil
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
