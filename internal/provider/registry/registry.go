// Package registry builds the channel → provider map of the sender (and
// reconciler) from the environment (docs/configuration.md and
// docs/providers.md), read through a lambdaenv.Env: every problem is
// recorded there, so start-up names all of them at once.
//
// SENDONCE_SMS_PROVIDER, SENDONCE_EMAIL_PROVIDER and SENDONCE_PUSH_PROVIDER
// name the provider of each channel: http, sns, twilio, smtp, ses or lambda, or a
// route, a comma-separated list (twilio,sns) tried in order only after an
// attempt provably sent nothing (ReadRoutes; dispatch.SendRoute). A
// channel left unset is absent from the map (a request for it is a
// configuration error in the sender, retried and alarmed). A channel set to an unknown provider, to a
// provider that cannot serve it, or a provider missing a required setting
// is a start-up error that names the variable.
//
// Secrets (tokens, passwords) are given either plainly (SENDONCE_X, local
// use) or as the name of an SSM SecureString or a Secrets Manager secret
// (SENDONCE_X_PARAM, production; lambdaenv.Env.Secret); setting both is an
// error. They are read once, when the map is built.
//
// Most providers are one adapter shared by the channels that use them. A
// lambda provider is one function per channel (SENDONCE_<CHANNEL>_LAMBDA_ARN,
// with its declared capabilities), and an http channel with a URL of its
// own (SENDONCE_HTTP_PROVIDER_URL_<CHANNEL>) gets an adapter of its own.
//
// Provider, lookup and callback URLs (SENDONCE_HTTP_PROVIDER_URL(_<CHANNEL>),
// SENDONCE_TWILIO_BASE_URL, SENDONCE_CALLBACK_BASE_URL) must be https://;
// plain http:// is accepted only for a loopback host (127.0.0.0/8, ::1,
// localhost), as local runs and tests use.
package registry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/aws/aws-sdk-go-v2/service/sns"

	"github.com/sendonce/sendonce/internal/decide"
	"github.com/sendonce/sendonce/internal/lambdaenv"
	ilambdaprovider "github.com/sendonce/sendonce/internal/provider/lambdaprovider"
	ismtpprovider "github.com/sendonce/sendonce/internal/provider/smtpprovider"
	"github.com/sendonce/sendonce/internal/secrets"
	"github.com/sendonce/sendonce/notify"
	"github.com/sendonce/sendonce/provider"
	"github.com/sendonce/sendonce/provider/httpprovider"
	"github.com/sendonce/sendonce/provider/lambdaprovider"
	"github.com/sendonce/sendonce/provider/sesprovider"
	"github.com/sendonce/sendonce/provider/smtpprovider"
	"github.com/sendonce/sendonce/provider/snsprovider"
	"github.com/sendonce/sendonce/provider/twilioprovider"
)

// The environment variables the registry reads.
const (
	EnvSMSProvider   = "SENDONCE_SMS_PROVIDER"
	EnvEmailProvider = "SENDONCE_EMAIL_PROVIDER"
	EnvPushProvider  = "SENDONCE_PUSH_PROVIDER"
	EnvTimeout       = "SENDONCE_PROVIDER_TIMEOUT"
	EnvCallbackBase  = "SENDONCE_CALLBACK_BASE_URL"

	EnvHTTPURL = "SENDONCE_HTTP_PROVIDER_URL"
	// EnvHTTPURLSMS, EnvHTTPURLEmail and EnvHTTPURLPush give a channel a
	// gateway of its own: each overrides EnvHTTPURL for its channel.
	EnvHTTPURLSMS   = "SENDONCE_HTTP_PROVIDER_URL_SMS"
	EnvHTTPURLEmail = "SENDONCE_HTTP_PROVIDER_URL_EMAIL"
	EnvHTTPURLPush  = "SENDONCE_HTTP_PROVIDER_URL_PUSH"
	EnvHTTPToken    = "SENDONCE_HTTP_PROVIDER_TOKEN"
	// EnvHTTPIdempotent is "true" (the default) when the HTTP provider
	// honours Idempotency-Key, "false" for a gateway that ignores it.
	EnvHTTPIdempotent = "SENDONCE_HTTP_PROVIDER_IDEMPOTENT"

	EnvTwilioAccountSID = "SENDONCE_TWILIO_ACCOUNT_SID"
	EnvTwilioAuthToken  = "SENDONCE_TWILIO_AUTH_TOKEN"
	EnvTwilioFrom       = "SENDONCE_TWILIO_FROM"
	EnvTwilioService    = "SENDONCE_TWILIO_MESSAGING_SERVICE_SID"
	EnvTwilioBaseURL    = "SENDONCE_TWILIO_BASE_URL"

	EnvSMTPHost            = "SENDONCE_SMTP_HOST"
	EnvSMTPPort            = "SENDONCE_SMTP_PORT"
	EnvSMTPUsername        = "SENDONCE_SMTP_USERNAME"
	EnvSMTPPassword        = "SENDONCE_SMTP_PASSWORD"
	EnvSMTPFrom            = "SENDONCE_SMTP_FROM"
	EnvSMTPTLS             = "SENDONCE_SMTP_TLS"
	EnvSMTPMessageIDDomain = "SENDONCE_SMTP_MESSAGE_ID_DOMAIN"

	EnvSESFrom             = "SENDONCE_SES_FROM"
	EnvSESConfigurationSet = "SENDONCE_SES_CONFIGURATION_SET"

	EnvSNSSenderID          = "SENDONCE_SNS_SENDER_ID"
	EnvSNSOriginationNumber = "SENDONCE_SNS_ORIGINATION_NUMBER"
	EnvSNSSMSTopicARN       = "SENDONCE_SNS_SMS_TOPIC_ARN"
	EnvSNSEmailTopicARN     = "SENDONCE_SNS_EMAIL_TOPIC_ARN"
	EnvSNSPushTopicARN      = "SENDONCE_SNS_PUSH_TOPIC_ARN"

	// The lambda provider of each channel: the function's ARN (or name),
	// and its declared capabilities ("true" or "false", default false:
	// a capability claimed wrongly can send twice).
	EnvSMSLambdaARN          = "SENDONCE_SMS_LAMBDA_ARN"
	EnvSMSLambdaIdempotent   = "SENDONCE_SMS_LAMBDA_IDEMPOTENT"
	EnvSMSLambdaLookup       = "SENDONCE_SMS_LAMBDA_LOOKUP"
	EnvEmailLambdaARN        = "SENDONCE_EMAIL_LAMBDA_ARN"
	EnvEmailLambdaIdempotent = "SENDONCE_EMAIL_LAMBDA_IDEMPOTENT"
	EnvEmailLambdaLookup     = "SENDONCE_EMAIL_LAMBDA_LOOKUP"
	EnvPushLambdaARN         = "SENDONCE_PUSH_LAMBDA_ARN"
	EnvPushLambdaIdempotent  = "SENDONCE_PUSH_LAMBDA_IDEMPOTENT"
	EnvPushLambdaLookup      = "SENDONCE_PUSH_LAMBDA_LOOKUP"
)

// perChannel holds each channel's own variables.
var perChannel = map[string]struct{ httpURL, lambdaARN, lambdaIdempotent, lambdaLookup string }{
	"sms":   {EnvHTTPURLSMS, EnvSMSLambdaARN, EnvSMSLambdaIdempotent, EnvSMSLambdaLookup},
	"email": {EnvHTTPURLEmail, EnvEmailLambdaARN, EnvEmailLambdaIdempotent, EnvEmailLambdaLookup},
	"push":  {EnvHTTPURLPush, EnvPushLambdaARN, EnvPushLambdaIdempotent, EnvPushLambdaLookup},
}

// channelEnv maps each channel to its variable, in a stable order.
var channelEnv = []struct{ channel, env string }{
	{"sms", EnvSMSProvider},
	{"email", EnvEmailProvider},
	{"push", EnvPushProvider},
}

// serves lists the providers that can serve each channel.
var serves = map[string][]string{
	"sms":   {"http", "lambda", "sns", "twilio"},
	"email": {"http", "lambda", "ses", "smtp", "sns"},
	"push":  {"http", "lambda", "sns"},
}

// Options are the dependencies of Read and FromEnvWith.
type Options struct {
	// Secrets resolves *_PARAM variables for FromEnvWith (Read uses its
	// Env's). Required when one is set.
	Secrets *secrets.Resolver
	// SNS publishes for the sns provider. Required when it is used.
	SNS snsprovider.Publisher
	// SES sends for the ses provider. Required when it is used.
	SES sesprovider.EmailSender
	// Lambda invokes the functions of the lambda provider. Required when
	// it is used.
	Lambda lambdaprovider.Invoker
	// Logger is given to every adapter; nil discards.
	Logger *slog.Logger
	// Timeout bounds one provider call. Zero: SENDONCE_PROVIDER_TIMEOUT
	// is read (default decide.DefaultProviderTimeout); a caller that
	// reads it already (package sendpath) passes its value.
	Timeout time.Duration
}

// The adapters are built through the public constructors of
// provider/httpprovider, provider/snsprovider and the others, the same a
// program of its own calls: this package only reads the environment into
// their options. Their RedactionKey is left empty, so they redact with
// the process's key, which lambdaenv.Start sets to the deployment's.

// FromEnv builds the channel → Sender map from getenv (usually
// os.Getenv), with AWS clients (SNS, SES, Lambda, SSM, Secrets Manager) made from
// awsCfg. Call it once per process (at a Lambda's cold start): it reads
// each secret then.
//
// The map is keyed by channel ("sms", "email", "push"); an unset channel
// is absent. The error names every offending variable.
func FromEnv(ctx context.Context, getenv func(string) string, awsCfg aws.Config) (map[string]provider.Adapter, error) {
	return FromEnvWith(ctx, getenv, Options{
		Secrets: secrets.NewFromConfig(awsCfg),
		SNS:     sns.NewFromConfig(awsCfg),
		SES:     sesv2.NewFromConfig(awsCfg),
		Lambda:  lambda.NewFromConfig(awsCfg),
	})
}

// FromEnvWith is FromEnv with explicit dependencies.
func FromEnvWith(ctx context.Context, getenv func(string) string, opts Options) (map[string]provider.Adapter, error) {
	env := lambdaenv.New(getenv)
	env.Secrets = opts.Secrets
	out := Read(ctx, env, opts)
	if err := env.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// Clients returns the Options of the AWS-backed providers (SNS, SES,
// Lambda) built from awsCfg.
func Clients(awsCfg aws.Config) Options {
	return Options{SNS: sns.NewFromConfig(awsCfg), SES: sesv2.NewFromConfig(awsCfg), Lambda: lambda.NewFromConfig(awsCfg)}
}

// Read builds the channel → provider map from env: the first provider of
// each channel's route (ReadRoutes has the rest).
func Read(ctx context.Context, env *lambdaenv.Env, opts Options) map[string]provider.Adapter {
	out := map[string]provider.Adapter{}
	for ch, route := range ReadRoutes(ctx, env, opts) {
		out[ch] = route[0]
	}
	return out
}

// ReadRoutes builds each channel's route from env, reading secrets
// through env.Secret: the providers its variable lists, in order, each
// built once however many channels use it (but a lambda function, or a
// channel's own http gateway, is its channel's). Every problem is recorded in
// env, naming its variable (call env.Err after): an unknown provider, one
// that cannot serve the channel, one listed twice, or one missing a
// setting. A channel whose route has a problem is left out of the map.
func ReadRoutes(ctx context.Context, env *lambdaenv.Env, opts Options) map[string][]provider.Adapter {
	b := &builder{ctx: ctx, env: env, opts: opts, made: map[string]provider.Adapter{}}
	if b.opts.Timeout == 0 {
		b.opts.Timeout = env.Duration(EnvTimeout, decide.DefaultProviderTimeout)
	}
	env.URL(EnvCallbackBase)
	out := map[string][]provider.Adapter{}
	for _, c := range channelEnv {
		value := strings.ToLower(strings.TrimSpace(env.String(c.env, "")))
		if value == "" {
			continue
		}
		var route []provider.Adapter
		ok := true
		for _, name := range strings.Split(value, ",") {
			name = strings.TrimSpace(name)
			if p := b.channelProvider(c.channel, c.env, name, route); p != nil {
				route = append(route, p)
			} else {
				ok = false
			}
		}
		if ok && len(route) > 0 {
			out[c.channel] = route
		}
	}
	return out
}

// channelProvider returns provider name for channel (from variable env),
// nil with the problem recorded when it cannot serve it or is already in
// route.
func (b *builder) channelProvider(channel, env, name string, route []provider.Adapter) provider.Adapter {
	switch {
	case name == "":
		b.env.Fail(fmt.Errorf("%s: an empty provider name in the route", env))
		return nil
	case !slices.Contains([]string{"http", "sns", "twilio", "smtp", "ses", "lambda"}, name):
		b.env.Fail(fmt.Errorf("%s: unknown provider %q (want one of %s)", env, name, strings.Join(serves[channel], ", ")))
		return nil
	case !slices.Contains(serves[channel], name):
		b.env.Fail(fmt.Errorf("%s: provider %q cannot send %s (want one of %s)", env, name, channel, strings.Join(serves[channel], ", ")))
		return nil
	case name == "sns" && channel == "email" && b.env.String(EnvSNSEmailTopicARN, "") == "":
		b.env.Fail(fmt.Errorf("%s: sns sends email only through a topic: set %s", env, EnvSNSEmailTopicARN))
		return nil
	case slices.ContainsFunc(route, func(p provider.Adapter) bool { return p.Name() == name }):
		b.env.Fail(fmt.Errorf("%s: provider %q is listed twice", env, name))
		return nil
	}
	return b.provider(name, channel)
}

type builder struct {
	ctx  context.Context
	env  *lambdaenv.Env
	opts Options
	made map[string]provider.Adapter
	// tried holds the providers already read, built or not, so that each
	// one's problems are recorded once.
	tried map[string]bool
}

// provider returns the adapter of that name for channel, built on first
// use; nil when its settings have a problem (recorded in b.env). Channels
// share an adapter unless instance tells them apart.
func (b *builder) provider(name, channel string) provider.Adapter {
	id := b.instance(name, channel)
	if s, ok := b.made[id]; ok || b.tried[id] {
		return s
	}
	if b.tried == nil {
		b.tried = map[string]bool{}
	}
	b.tried[id] = true
	n := b.env.Problems()
	var (
		s   provider.Adapter
		err error
	)
	switch name {
	case "http":
		s, err = b.http(n, channel)
	case "lambda":
		s, err = b.lambda(n, channel)
	case "twilio":
		s, err = b.twilio(n)
	case "smtp":
		s, err = b.smtp(n)
	case "sns":
		s, err = b.sns(n)
	case "ses":
		s, err = b.ses(n)
	}
	if err != nil || s == nil {
		b.env.Fail(err)
		return nil
	}
	b.made[id] = s
	return s
}

// instance names the adapter provider name builds for channel: the name
// itself for a provider the channels share; with the channel for a lambda
// function and for an http channel with a URL of its own.
func (b *builder) instance(name, channel string) string {
	switch {
	case name == "lambda":
		return name + "/" + channel
	case name == "http" && b.env.String(perChannel[channel].httpURL, "") != "":
		return name + "/" + channel
	}
	return name
}

// required returns env's value, recording a problem when it is unset.
func (b *builder) required(env, name string) string {
	v := b.env.String(env, "")
	if v == "" {
		b.env.Fail(fmt.Errorf("%s is required when a channel uses %s", env, name))
	}
	return v
}

// secret returns the secret env gives (lambdaenv.Env.Secret: env or
// env_PARAM, not both); required says one of them must be set.
func (b *builder) secret(env, name string, required bool) string {
	if required && !b.env.SecretSet(env) {
		b.env.Fail(fmt.Errorf("%s or %s is required when a channel uses %s", env, env+lambdaenv.ParamSuffix, name))
		return ""
	}
	return b.env.Secret(b.ctx, env)
}

// failed reports whether a problem was recorded since there were n.
func (b *builder) failed(n int) bool { return b.env.Problems() > n }

func (b *builder) callback(path string) string {
	base := strings.TrimRight(b.env.String(EnvCallbackBase, ""), "/")
	if base == "" {
		return ""
	}
	return base + path
}

// The adapters' constructors below read their variables (provider, lookup
// and callback URLs through lambdaenv.Env.URL: https://, or plain http://
// to a loopback host, as they carry tokens, addresses and bodies), and
// build nothing when one of them had a problem (n: the problems before).

// http builds the adapter of channel's gateway: SENDONCE_HTTP_PROVIDER_URL_<CHANNEL>
// when set, else SENDONCE_HTTP_PROVIDER_URL; the token and the other
// settings are shared.
func (b *builder) http(n int, channel string) (provider.Adapter, error) {
	urlEnv := perChannel[channel].httpURL
	base := b.env.URL(urlEnv)
	if base == "" {
		urlEnv = EnvHTTPURL
		if base = b.env.URL(EnvHTTPURL); base == "" {
			b.env.Fail(fmt.Errorf("%s is required when a channel uses http (for %s alone: %s)", EnvHTTPURL, channel, perChannel[channel].httpURL))
		}
	}
	token := b.secret(EnvHTTPToken, "http", true)
	idempotent := b.env.Bool(EnvHTTPIdempotent, true)
	if b.failed(n) || base == "" || token == "" {
		// A problem of a setting the channels share is recorded once: a
		// second instance sees no new one, but must not be built either.
		return nil, nil
	}
	p, err := httpprovider.New(nil, httpprovider.Options{
		BaseURL: base, Token: token, Timeout: b.opts.Timeout,
		CallbackURL: b.callback("/callbacks/http"), Logger: b.opts.Logger,
		NotIdempotent: !idempotent,
	})
	if err != nil {
		return nil, fmt.Errorf("http provider (%s, %s): %w", urlEnv, EnvCallbackBase, err)
	}
	return p, nil
}

func (b *builder) twilio(n int) (provider.Adapter, error) {
	sid := b.required(EnvTwilioAccountSID, "twilio")
	baseURL := b.env.URL(EnvTwilioBaseURL)
	token := b.secret(EnvTwilioAuthToken, "twilio", true)
	from, svc := b.env.String(EnvTwilioFrom, ""), b.env.String(EnvTwilioService, "")
	if from == "" && svc == "" {
		b.env.Fail(fmt.Errorf("%s or %s is required when a channel uses twilio", EnvTwilioFrom, EnvTwilioService))
	}
	if b.failed(n) {
		return nil, nil
	}
	p, err := twilioprovider.New(nil, twilioprovider.Options{
		BaseURL: baseURL, AccountSID: sid, AuthToken: token,
		From: from, MessagingServiceSID: svc, CallbackBaseURL: b.env.String(EnvCallbackBase, ""),
		Timeout: b.opts.Timeout, Logger: b.opts.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("twilio provider (%s, %s): %w", EnvTwilioBaseURL, EnvCallbackBase, err)
	}
	return p, nil
}

func (b *builder) smtp(n int) (provider.Adapter, error) {
	host := b.required(EnvSMTPHost, "smtp")
	from := b.required(EnvSMTPFrom, "smtp")
	port := lambdaenv.Value(b.env, EnvSMTPPort, 0, parsePort)
	pol, err := ismtpprovider.ParseTLSPolicy(b.env.String(EnvSMTPTLS, ""))
	if err != nil {
		b.env.Fail(fmt.Errorf("%s: %w", EnvSMTPTLS, err))
	}
	user := b.env.String(EnvSMTPUsername, "")
	pass := b.secret(EnvSMTPPassword, "smtp", user != "")
	if b.failed(n) {
		return nil, nil
	}
	p, err := smtpprovider.New(smtpprovider.Options{
		Host: host, Port: port, Username: user, Password: pass, TLS: smtpprovider.TLSPolicy(pol), From: from,
		MessageIDDomain: b.env.String(EnvSMTPMessageIDDomain, ""),
		Timeout:         b.opts.Timeout, Logger: b.opts.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("smtp provider (%s): %w", EnvSMTPFrom, err)
	}
	return p, nil
}

// parsePort parses a TCP port number, 1 to 65535.
func parsePort(v string) (int, error) {
	port, err := strconv.Atoi(v)
	if err != nil || port < 1 || port > 65535 {
		return 0, fmt.Errorf("%q is not a port number", v)
	}
	return port, nil
}

func (b *builder) sns(n int) (provider.Adapter, error) {
	if b.opts.SNS == nil {
		return nil, errors.New("sns provider: no SNS client")
	}
	topics := map[notify.Channel]string{}
	for _, t := range []struct {
		channel notify.Channel
		env     string
	}{{notify.ChannelSMS, EnvSNSSMSTopicARN}, {notify.ChannelEmail, EnvSNSEmailTopicARN}, {notify.ChannelPush, EnvSNSPushTopicARN}} {
		if v := b.env.String(t.env, ""); v != "" {
			if !strings.HasPrefix(v, "arn:") {
				b.env.Fail(fmt.Errorf("%s: %q is not a topic ARN", t.env, v))
			}
			topics[t.channel] = v
		}
	}
	if b.failed(n) {
		return nil, nil
	}
	p, err := snsprovider.New(b.opts.SNS, snsprovider.Options{
		SenderID:          b.env.String(EnvSNSSenderID, ""),
		OriginationNumber: b.env.String(EnvSNSOriginationNumber, ""),
		Topics:            topics, Timeout: b.opts.Timeout, Logger: b.opts.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("sns provider: %w", err)
	}
	return p, nil
}

func (b *builder) ses(n int) (provider.Adapter, error) {
	if b.opts.SES == nil {
		return nil, errors.New("ses provider: no SES client")
	}
	from := b.required(EnvSESFrom, "ses")
	if b.failed(n) {
		return nil, nil
	}
	p, err := sesprovider.New(b.opts.SES, sesprovider.Options{
		From:             from,
		ConfigurationSet: b.env.String(EnvSESConfigurationSet, ""),
		Timeout:          b.opts.Timeout, Logger: b.opts.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("ses provider (%s): %w", EnvSESFrom, err)
	}
	return p, nil
}

// lambda builds the adapter of channel's function.
func (b *builder) lambda(n int, channel string) (provider.Adapter, error) {
	vars := perChannel[channel]
	fn := b.env.String(vars.lambdaARN, "")
	if fn == "" {
		b.env.Fail(fmt.Errorf("%s is required when %s uses lambda", vars.lambdaARN, channel))
	} else if err := ilambdaprovider.CheckFunction(fn); err != nil {
		b.env.Fail(fmt.Errorf("%s: %w", vars.lambdaARN, err))
	}
	idempotent := b.env.Bool(vars.lambdaIdempotent, false)
	lookup := b.env.Bool(vars.lambdaLookup, false)
	if b.failed(n) {
		return nil, nil
	}
	if b.opts.Lambda == nil {
		return nil, errors.New("lambda provider: no Lambda client")
	}
	p, err := lambdaprovider.New(b.opts.Lambda, lambdaprovider.Options{
		Function: fn, Idempotent: idempotent, Lookup: lookup,
		Timeout: b.opts.Timeout, Logger: b.opts.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("lambda provider (%s): %w", vars.lambdaARN, err)
	}
	return p, nil
}
