// Package lambdaprovider is sendonce's adapter for a provider written as
// an AWS Lambda function, in any language (docs/lambda-provider.md, the
// JSON of schema/lambda-provider.v1.json). Its configuration name, stored
// in every row it sends, is "lambda".
//
// A send invokes the function synchronously with op "send" and the
// message's key; its answer says accepted (with an id), rejected
// (Permanent) or retry (Transient). A function error, a function timeout,
// an unreadable answer, or no answer after the invoke was written is
// Ambiguous: the function ran and may have sent. The SDK's retries are
// off for Invoke, since a retried invoke could run the function twice.
//
// A function's capabilities cannot be discovered, so they are declared:
// Options.Idempotent when the function drops a repeat of a key,
// Options.Lookup when it answers op "lookup" (the adapter then implements
// provider.Looker). Declare only what the function really does: a
// capability claimed wrongly can send twice.
//
// The adapter reads no environment variable. The SAM application's
// functions build it from theirs (SENDONCE_<CHANNEL>_LAMBDA_*,
// docs/configuration.md) through New, as a program of your own does with
// its own settings.
package lambdaprovider

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/sendonce/sendonce/internal/provider/lambdaprovider"
	"github.com/sendonce/sendonce/internal/provider/settings"
	"github.com/sendonce/sendonce/provider"
)

// Invoker is the part of the Lambda client the adapter calls:
// *lambda.Client (github.com/aws/aws-sdk-go-v2/service/lambda)
// implements it.
type Invoker interface {
	Invoke(ctx context.Context, in *lambda.InvokeInput, optFns ...func(*lambda.Options)) (*lambda.InvokeOutput, error)
}

// Options configure the adapter.
type Options struct {
	// Function is the function's ARN
	// (arn:aws:lambda:REGION:ACCOUNT:function:NAME, optionally with a
	// :VERSION or :ALIAS) or its name (NAME[:QUALIFIER], in the client's
	// account and Region). Required.
	Function string
	// Idempotent declares that the function drops a repeat of a key: a
	// second send with the same key sends nothing new and answers
	// accepted with the first message's id. An ambiguous attempt is then
	// settled by repeating it.
	Idempotent bool
	// Lookup declares that the function answers op "lookup": the adapter
	// then implements provider.Looker, and an ambiguous attempt is
	// settled by asking.
	Lookup bool
	// Timeout bounds one invocation, on top of its context's deadline.
	// Zero: 5 s (sendonce.DefaultProviderTimeout); a negative value is
	// refused. Set the function's own timeout below it.
	Timeout time.Duration
	// Logger receives a warning line for each failed call and a debug
	// line for each accepted send, with the recipient as a token. Nil:
	// none.
	Logger *slog.Logger
	// RedactionKey keys the tokens that stand for recipients' addresses
	// in the adapter's log lines and error reasons, as
	// sendonce.SenderConfig.RedactionKey does the sender's: at least 32
	// bytes, the same in every process of a deployment. Empty: the
	// process's key (random unless the Lambda wiring set the
	// deployment's).
	RedactionKey []byte
}

// New returns the adapter of one function, invoked through client
// (usually lambda.NewFromConfig(cfg)). It returns an error naming the
// setting when client is nil, Function is not a function's name or ARN,
// Timeout is negative, or RedactionKey is shorter than 32 bytes.
func New(client Invoker, opts Options) (provider.Adapter, error) {
	if client == nil {
		return nil, errors.New("lambdaprovider: new: no Lambda client")
	}
	timeout, r, err := settings.Common("lambdaprovider", opts.Timeout, opts.RedactionKey)
	if err != nil {
		return nil, err
	}
	return lambdaprovider.New(lambdaprovider.Config{
		Client: client, Function: opts.Function, Idempotent: opts.Idempotent, Lookup: opts.Lookup,
		Timeout: timeout, Logger: opts.Logger, Redactor: r,
	})
}
