package lambdaprovider

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/sendonce/sendonce/internal/redact"
	"github.com/sendonce/sendonce/provider"
)

// code is the classification of one Invoke error code.
type code struct {
	kind   provider.Kind
	reason string
}

// Reasons shared by several codes.
const (
	notRun     = "Lambda did not run the function"
	notStarted = "Lambda could not start the function"
)

// codes classifies the error codes of Lambda's Invoke API (the Lambda API
// reference's list for Invoke, and AWS's common errors). Lambda answers
// with an error code only for an invocation it did not run ("error codes
// are reserved for errors that prevent your function from executing"),
// except ServiceException and EFSIOException, after which the function
// may have run. A function's own failure is not an error code: it is a
// FunctionError on a 200 answer.
var codes = map[string]code{
	// Throttled, or the function is not ready yet: nothing ran; retry.
	"TooManyRequestsException":          {provider.Transient, "throttled: " + notRun},
	"ThrottlingException":               {provider.Transient, "throttled: " + notRun},
	"ResourceConflictException":         {provider.Transient, "the function is being updated: " + notRun},
	"ResourceNotReadyException":         {provider.Transient, "the function is inactive (its VPC connection is being restored): " + notRun},
	"ENINotReadyException":              {provider.Transient, "the function's network interface is not ready: " + notRun},
	"EC2ThrottledException":             {provider.Transient, "EC2 throttled the function's set-up: " + notStarted},
	"EC2UnexpectedException":            {provider.Transient, "EC2 failed the function's set-up: " + notStarted},
	"SnapStartNotReadyException":        {provider.Transient, "the function's SnapStart snapshot is not ready: " + notRun},
	"SnapStartTimeoutException":         {provider.Transient, "the function's SnapStart restore timed out: " + notStarted},
	"EFSMountConnectivityException":     {provider.Transient, "the function's file system is unreachable: " + notStarted},
	"EFSMountTimeoutException":          {provider.Transient, "the function's file system mount timed out: " + notStarted},
	"S3FilesMountConnectivityException": {provider.Transient, "the function's S3 Files access point is unreachable: " + notStarted},
	"S3FilesMountTimeoutException":      {provider.Transient, "the function's S3 Files mount timed out: " + notStarted},
	"CodeArtifactUserPendingException":  {provider.Transient, "the function's code is still being provisioned: " + notStarted},

	// The deployment is at fault: retried, alarmed, never FAILED.
	"ResourceNotFoundException":             {provider.Config, "no such function, version or alias"},
	"AccessDeniedException":                 {provider.Config, "access denied: the sender's role needs lambda:InvokeFunction on the function"},
	"AccessDenied":                          {provider.Config, "access denied: the sender's role needs lambda:InvokeFunction on the function"},
	"UnrecognizedClientException":           {provider.Config, "invalid AWS credentials"},
	"InvalidClientTokenId":                  {provider.Config, "invalid AWS credentials"},
	"InvalidSignatureException":             {provider.Config, "AWS request signature does not match"},
	"SignatureDoesNotMatch":                 {provider.Config, "AWS request signature does not match"},
	"ExpiredToken":                          {provider.Config, "AWS credentials expired"},
	"ExpiredTokenException":                 {provider.Config, "AWS credentials expired"},
	"MissingAuthenticationToken":            {provider.Config, "no AWS credentials"},
	"InvalidParameterValueException":        {provider.Config, "Lambda refused a parameter of the invoke (function name or qualifier)"},
	"InvalidRequestContentException":        {provider.Config, "Lambda could not read the request"},
	"UnsupportedMediaTypeException":         {provider.Config, "Lambda refused the request's content type"},
	"RecursiveInvocationException":          {provider.Config, "Lambda stopped a recursive invocation loop: " + notRun},
	"KMSAccessDeniedException":              {provider.Config, "Lambda cannot decrypt the function's environment (KMS access denied): " + notStarted},
	"KMSDisabledException":                  {provider.Config, "the function's KMS key is disabled: " + notStarted},
	"KMSInvalidStateException":              {provider.Config, "the function's KMS key is in an invalid state: " + notStarted},
	"KMSNotFoundException":                  {provider.Config, "the function's KMS key does not exist: " + notStarted},
	"EC2AccessDeniedException":              {provider.Config, "the function's role cannot set up its VPC access: " + notStarted},
	"ENILimitReachedException":              {provider.Config, "the VPC's network interface limit is reached: " + notStarted},
	"InvalidSubnetIDException":              {provider.Config, "the function's subnet is invalid: " + notStarted},
	"InvalidSecurityGroupIDException":       {provider.Config, "the function's security group is invalid: " + notStarted},
	"SubnetIPAddressLimitReachedException":  {provider.Config, "the function's subnets have no free IP address: " + notStarted},
	"InvalidRuntimeException":               {provider.Config, "the function's runtime is not supported: " + notStarted},
	"InvalidZipFileException":               {provider.Config, "Lambda cannot unzip the function's code: " + notStarted},
	"EFSMountFailureException":              {provider.Config, "the function's file system cannot be mounted: " + notStarted},
	"S3FilesMountFailureException":          {provider.Config, "the function's S3 Files access point cannot be mounted: " + notStarted},
	"CodeArtifactUserDeletedException":      {provider.Config, "the function's code artifact user was deleted: " + notStarted},
	"CodeArtifactUserFailedException":       {provider.Config, "the function's code could not be provisioned: " + notStarted},
	"SnapStartException":                    {provider.Config, "the function's afterRestore hook failed: " + notStarted},
	"SnapStartRegenerationFailureException": {provider.Config, "the function's SnapStart snapshot could not be regenerated: " + notStarted},
	"NoPublishedVersionException":           {provider.Config, "the function has no published version"},

	// This message can never be invoked: its payload is over Lambda's
	// 6 MB limit for synchronous invocations.
	"RequestTooLargeException":                 {provider.Permanent, "the message is larger than Lambda's payload limit"},
	"SerializedRequestEntityTooLargeException": {provider.Permanent, "the message is larger than Lambda's payload limit"},

	// Lambda failed while it may have been running the function.
	"ServiceException": {provider.Ambiguous, "Lambda's internal error: " + mayHaveSent},
	"EFSIOException":   {provider.Ambiguous, "the function's file system failed while it ran: " + mayHaveSent},
}

// Classify translates an error of Invoke into a *provider.Error of a send
// (Op "send"; the caller sets Provider and Op). written says whether the
// request was written to the connection (net/http/httptrace's
// WroteRequest); to is the recipient, redacted out of any text kept.
//
//   - an error code Lambda answered: its kind in the package's table
//     (docs/lambda-provider.md lists it);
//   - an unknown code: by HTTP status: 429 Transient, 401/403 Config,
//     413 Permanent, any other 4xx Config (Lambda refused the invoke, which
//     is not the message's fault), 5xx and anything else Ambiguous;
//   - no answer, request not written: Transient when the connection could
//     not be made (refused, DNS, dial timeout, the caller's deadline
//     before the request left), Config when the SDK could not build the
//     request (credentials, endpoint);
//   - no answer, request written: Ambiguous (a timeout, a reset, a cut
//     answer): the function may be running.
func Classify(err error, written bool, to string) *provider.Error {
	return ClassifyWith(redact.Default(), err, written, to)
}

// ClassifyWith is Classify with the addresses of the texts it keeps
// redacted by r.
func ClassifyWith(r *redact.Redactor, err error, written bool, to string) *provider.Error {
	pe := &provider.Error{Kind: provider.Ambiguous, Err: r.Error(err, to)}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		pe.Code = ae.ErrorCode()
		if c, ok := codes[pe.Code]; ok {
			pe.Kind, pe.Reason = c.kind, c.reason
		} else {
			pe.Kind, pe.Reason = byStatus(httpStatus(err))
		}
		if msg := clean(r, ae.ErrorMessage(), to); msg != "" {
			pe.Reason += " (" + msg + ")"
		}
		return pe
	}
	if status := httpStatus(err); status != 0 {
		// An answer the SDK could not read as an error document.
		pe.Code = fmt.Sprint(status)
		pe.Kind, pe.Reason = byStatus(status)
		return pe
	}
	if !written {
		if unreachable(err) {
			pe.Kind, pe.Reason = provider.Transient, "could not reach Lambda ("+cause(err)+"): nothing was sent"
		} else {
			pe.Kind, pe.Reason = provider.Config, "the invoke could not be made: "+clean(r, err.Error(), to)
		}
		return pe
	}
	if errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
		pe.Reason = "no answer from the function within the timeout: " + mayHaveSent
	} else {
		pe.Reason = "the connection to Lambda failed after the invoke was sent (" + cause(err) + "): " + mayHaveSent
	}
	return pe
}

// byStatus classifies an answer without a known error code.
func byStatus(status int) (provider.Kind, string) {
	switch {
	case status == 429:
		return provider.Transient, "throttled: " + notRun
	case status == 401 || status == 403:
		return provider.Config, fmt.Sprintf("Lambda answered HTTP %d", status)
	case status == 413:
		return provider.Permanent, "the message is larger than Lambda's payload limit"
	case status >= 400 && status < 500:
		return provider.Config, fmt.Sprintf("Lambda refused the invoke (HTTP %d): %s", status, notRun)
	case status >= 500:
		return provider.Ambiguous, fmt.Sprintf("Lambda answered HTTP %d: %s", status, mayHaveSent)
	}
	return provider.Ambiguous, "unrecognised Lambda error: " + mayHaveSent
}

func httpStatus(err error) int {
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) && re.Response != nil {
		return re.HTTPStatusCode()
	}
	return 0
}

// unreachable reports whether err is a failure to reach the endpoint (or
// the caller's deadline or cancellation) rather than a failure to build
// the request.
func unreachable(err error) bool {
	var dns *net.DNSError
	var op *net.OpError
	return errors.As(err, &dns) || errors.As(err, &op) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, context.Canceled) || isTimeout(err)
}

// cause names a transport failure without its URL.
func cause(err error) string {
	var dns *net.DNSError
	var op *net.OpError
	switch {
	case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.As(err, &dns):
		return "dns lookup failed"
	case errors.As(err, &op):
		if op.Op == "dial" {
			return "connection refused or unreachable"
		}
		return "network error (" + op.Op + ")"
	}
	return "network error"
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
