package main

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/aws/aws-sdk-go-v2/config"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
)

// plain turns a command's error into the one line an operator reads: the
// failures every command meets (no credentials, no such profile, table or
// queue, an endpoint that does not answer) said plainly, and the SDK's
// request metadata left out of any other AWS error. With --debug it is
// the error unabridged.
func (a *app) plain(err error) string {
	if a.debug {
		return err.Error()
	}
	var (
		ce      *credentialsError
		profile config.SharedConfigProfileNotExistError
		noTable *ddbtypes.ResourceNotFoundException
		qe      *queueError
		noQueue *sqstypes.QueueDoesNotExist
		op      *smithy.OperationError
		ue      *url.Error
		dns     *net.DNSError
		dial    *net.OpError
	)
	switch {
	case errors.As(err, &ce):
		return a.prefix() + credentialsMessage(ce)
	case errors.As(err, &profile):
		return a.prefix() + fmt.Sprintf("AWS profile %q is not in the AWS config files (~/.aws/config, ~/.aws/credentials, or AWS_CONFIG_FILE)", profile.Profile)
	case errors.As(err, &noTable) && a.where.table != "":
		return fmt.Sprintf("%stable %q does not exist%s: create it with \"sendonce create-tables --table %s\", or name another with --table or SENDONCE_TABLE",
			a.prefix(), a.where.table, a.place(a.where.dynamoDBEndpoint), a.where.table)
	case errors.As(err, &qe) && (errors.As(err, &noQueue) || isAPIError(err, "AWS.SimpleQueueService.NonExistentQueue")):
		return fmt.Sprintf("%squeue %s does not exist%s (check %s)", a.prefix(), qe.url, a.place(""), qe.flag)
	case errors.As(err, &op) && errors.As(err, &ue) && errors.As(err, &dns):
		return fmt.Sprintf("%scannot reach %s at %s: no such host (check --region and --endpoint-url)", a.prefix(), op.ServiceID, hostOf(ue.URL))
	case errors.As(err, &op) && errors.As(err, &ue) && errors.As(err, &dial) && dial.Op == "dial":
		return fmt.Sprintf("%scannot reach %s at %s: %s (is it running? check --endpoint-url and AWS_ENDPOINT_URL_%s)",
			a.prefix(), op.ServiceID, hostOf(ue.URL), innermost(dial), strings.ToUpper(strings.ReplaceAll(op.ServiceID, " ", "_")))
	case errors.As(err, &op):
		// "operation error DynamoDB: GetItem, https response error
		// StatusCode: 400, RequestID: ..., api error X: msg" becomes
		// "DynamoDB GetItem: X: msg".
		short := fmt.Sprintf("%s %s: %s", op.ServiceID, op.OperationName, innermost(op.Err))
		var api smithy.APIError
		if errors.As(err, &api) {
			short = fmt.Sprintf("%s %s: %s: %s", op.ServiceID, op.OperationName, api.ErrorCode(), api.ErrorMessage())
		}
		return strings.Replace(err.Error(), op.Error(), short, 1)
	}
	return err.Error()
}

// credentialsMessage says why there are no credentials: none configured
// at all (the SDK's chain ended at the EC2 instance metadata service,
// which is not there), or the configured ones failed.
func credentialsMessage(ce *credentialsError) string {
	var op *smithy.OperationError
	if errors.As(ce.err, &op) && op.ServiceID == "ec2imds" {
		return "no AWS credentials: set AWS_PROFILE (or pass --profile), or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY " +
			"(any dummy values for the local emulators: source .local/env)"
	}
	if ce.profile != "" {
		return fmt.Sprintf("cannot load the AWS credentials of profile %q: %s", ce.profile, innermost(ce.err))
	}
	return "cannot load AWS credentials: " + innermost(ce.err)
}

// place is " in REGION at ENDPOINT", as far as they are known.
func (a *app) place(endpoint string) string {
	s := ""
	if a.cfg != nil && a.cfg.Region != "" {
		s = " in " + a.cfg.Region
	}
	if endpoint != "" {
		s += " at " + endpoint
	}
	return s
}

// innermost is the message of the last error in err's chain (the first
// of a joined error's): the cause without its wrapping.
func innermost(err error) string {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			if j, ok := err.(interface{ Unwrap() []error }); ok && len(j.Unwrap()) > 0 {
				next = j.Unwrap()[0]
			}
		}
		if next == nil {
			return err.Error()
		}
		err = next
	}
}

func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return raw
	}
	return u.Scheme + "://" + u.Host
}

func isAPIError(err error, code string) bool {
	var api smithy.APIError
	return errors.As(err, &api) && api.ErrorCode() == code
}

// prefix is "COMMAND: ", for the messages that replace a command's own.
func (a *app) prefix() string {
	if a.command == "" {
		return ""
	}
	return a.command + ": "
}

// queueError is a failed call on the queue at url, which flag names.
type queueError struct {
	url, flag string
	err       error
}

func (e *queueError) Error() string { return e.err.Error() }
func (e *queueError) Unwrap() error { return e.err }
