// Package registry builds the channel → provider map of the sender (and
// reconciler) from the environment (README.md, Configuration, and docs/providers.md).
//
// SENDONCE_SMS_PROVIDER, SENDONCE_EMAIL_PROVIDER and SENDONCE_PUSH_PROVIDER
// name the provider of each channel: http, sns, twilio, smtp or ses. A channel
// left unset is absent from the map (a request for it then fails
// permanently in the sender). A channel set to an unknown provider, to a
// provider that cannot serve it, or a provider missing a required setting
// is a start-up error that names the variable.
//
// Secrets (tokens, passwords) are given either plainly (SENDONCE_X, local
// use) or as the name of an SSM SecureString or a Secrets Manager secret
// (SENDONCE_X_PARAM, production; see package secrets); setting both is an
// error. They are read once, when the map is built.
//
// Provider, lookup and callback URLs (SENDONCE_HTTP_PROVIDER_URL,
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
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/aws/aws-sdk-go-v2/service/sns"

	"github.com/sendonce/sendonce/internal/decide"
	"github.com/sendonce/sendonce/internal/lambdaenv"
	"github.com/sendonce/sendonce/internal/provider"
	"github.com/sendonce/sendonce/internal/provider/httpprovider"
	"github.com/sendonce/sendonce/internal/provider/sesprovider"
	"github.com/sendonce/sendonce/internal/provider/smtpprovider"
	"github.com/sendonce/sendonce/internal/provider/snsprovider"
	"github.com/sendonce/sendonce/internal/provider/twilio"
	"github.com/sendonce/sendonce/internal/secrets"
)

// DefaultTimeout is one provider call's timeout when
// SENDONCE_PROVIDER_TIMEOUT is unset.
const DefaultTimeout = decide.DefaultProviderTimeout

// The environment variables the registry reads.
const (
	EnvSMSProvider   = "SENDONCE_SMS_PROVIDER"
	EnvEmailProvider = "SENDONCE_EMAIL_PROVIDER"
	EnvPushProvider  = "SENDONCE_PUSH_PROVIDER"
	EnvTimeout       = "SENDONCE_PROVIDER_TIMEOUT"
	EnvCallbackBase  = "SENDONCE_CALLBACK_BASE_URL"

	EnvHTTPURL   = "SENDONCE_HTTP_PROVIDER_URL"
	EnvHTTPToken = "SENDONCE_HTTP_PROVIDER_TOKEN"
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
)

// ParamSuffix turns a secret's variable into the one naming where it is
// stored: SENDONCE_TWILIO_AUTH_TOKEN → SENDONCE_TWILIO_AUTH_TOKEN_PARAM.
const ParamSuffix = "_PARAM"

// channelEnv maps each channel to its variable, in a stable order.
var channelEnv = []struct{ channel, env string }{
	{"sms", EnvSMSProvider},
	{"email", EnvEmailProvider},
	{"push", EnvPushProvider},
}

// serves lists the providers that can serve each channel.
var serves = map[string][]string{
	"sms":   {"http", "sns", "twilio"},
	"email": {"http", "ses", "smtp", "sns"},
	"push":  {"http", "sns"},
}

// Options are the dependencies of FromEnvWith.
type Options struct {
	// Secrets resolves *_PARAM variables. Required when one is set.
	Secrets *secrets.Resolver
	// SNS publishes for the sns provider. Required when it is used.
	SNS snsprovider.Publisher
	// SES sends for the ses provider. Required when it is used.
	SES sesprovider.Sender
	// Logger is given to every adapter; nil means slog.Default().
	Logger *slog.Logger
}

// FromEnv builds the channel → Sender map from getenv (usually
// os.Getenv), with AWS clients (SNS, SSM, Secrets Manager) made from
// awsCfg. Call it once per process (at a Lambda's cold start): it reads
// each secret then.
//
// The map is keyed by channel ("sms", "email", "push"); an unset channel
// is absent. The error names the offending variable.
func FromEnv(ctx context.Context, getenv func(string) string, awsCfg aws.Config) (map[string]provider.Sender, error) {
	return FromEnvWith(ctx, getenv, Options{
		Secrets: secrets.NewFromConfig(awsCfg),
		SNS:     sns.NewFromConfig(awsCfg),
		SES:     sesv2.NewFromConfig(awsCfg),
	})
}

// FromEnvWith is FromEnv with explicit dependencies.
func FromEnvWith(ctx context.Context, getenv func(string) string, opts Options) (map[string]provider.Sender, error) {
	b := &builder{ctx: ctx, getenv: getenv, opts: opts, made: map[string]provider.Sender{}}
	timeout, err := b.timeout()
	if err != nil {
		return nil, err
	}
	b.timeoutVal = timeout
	if err := b.checkURL(EnvCallbackBase); err != nil {
		return nil, err
	}
	out := map[string]provider.Sender{}
	for _, c := range channelEnv {
		name := strings.ToLower(strings.TrimSpace(getenv(c.env)))
		if name == "" {
			continue
		}
		if !slices.Contains([]string{"http", "sns", "twilio", "smtp", "ses"}, name) {
			return nil, fmt.Errorf("registry: %s: unknown provider %q (want one of %s)", c.env, name, strings.Join(serves[c.channel], ", "))
		}
		if !slices.Contains(serves[c.channel], name) {
			return nil, fmt.Errorf("registry: %s: provider %q cannot send %s (want one of %s)", c.env, name, c.channel, strings.Join(serves[c.channel], ", "))
		}
		if name == "sns" && c.channel == "email" && getenv(EnvSNSEmailTopicARN) == "" {
			return nil, fmt.Errorf("registry: %s: sns sends email only through a topic: set %s", c.env, EnvSNSEmailTopicARN)
		}
		s, err := b.provider(name)
		if err != nil {
			return nil, err
		}
		out[c.channel] = s
	}
	return out, nil
}

type builder struct {
	ctx        context.Context
	getenv     func(string) string
	opts       Options
	timeoutVal time.Duration
	made       map[string]provider.Sender
}

func (b *builder) timeout() (time.Duration, error) {
	v := strings.TrimSpace(b.getenv(EnvTimeout))
	if v == "" {
		return DefaultTimeout, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("registry: %s: %q is not a positive Go duration such as 5s", EnvTimeout, v)
	}
	return d, nil
}

// provider returns the one adapter of that name, built on first use.
func (b *builder) provider(name string) (provider.Sender, error) {
	if s, ok := b.made[name]; ok {
		return s, nil
	}
	var (
		s   provider.Sender
		err error
	)
	switch name {
	case "http":
		s, err = b.http()
	case "twilio":
		s, err = b.twilio()
	case "smtp":
		s, err = b.smtp()
	case "sns":
		s, err = b.sns()
	case "ses":
		s, err = b.ses()
	}
	if err != nil {
		return nil, err
	}
	b.made[name] = s
	return s, nil
}

func (b *builder) required(env, name string) (string, error) {
	v := strings.TrimSpace(b.getenv(env))
	if v == "" {
		return "", fmt.Errorf("registry: %s is required when a channel uses %s", env, name)
	}
	return v, nil
}

// secret resolves env or env_PARAM; required says one must be set.
func (b *builder) secret(env, name string, required bool) (string, error) {
	plain, param := b.getenv(env), strings.TrimSpace(b.getenv(env+ParamSuffix))
	switch {
	case plain != "" && param != "":
		return "", fmt.Errorf("registry: %s and %s are both set: set one", env, env+ParamSuffix)
	case plain == "" && param == "":
		if required {
			return "", fmt.Errorf("registry: %s or %s is required when a channel uses %s", env, env+ParamSuffix, name)
		}
		return "", nil
	case param == "":
		return plain, nil
	}
	if b.opts.Secrets == nil {
		return "", fmt.Errorf("registry: %s: no secrets resolver", env+ParamSuffix)
	}
	v, err := b.opts.Secrets.Resolve(b.ctx, "", param)
	if err != nil {
		return "", fmt.Errorf("registry: %s: %w", env+ParamSuffix, err)
	}
	return v, nil
}

// checkURL refuses a set URL variable that is not https://, unless its
// host is loopback (lambdaenv.CheckURL): provider, lookup and callback
// URLs carry tokens, addresses and message bodies.
func (b *builder) checkURL(env string) error {
	if v := strings.TrimSpace(b.getenv(env)); v != "" {
		if err := lambdaenv.CheckURL(env, v); err != nil {
			return fmt.Errorf("registry: %w", err)
		}
	}
	return nil
}

func (b *builder) callback(path string) string {
	base := strings.TrimRight(strings.TrimSpace(b.getenv(EnvCallbackBase)), "/")
	if base == "" {
		return ""
	}
	return base + path
}

func (b *builder) http() (provider.Sender, error) {
	base, err := b.required(EnvHTTPURL, "http")
	if err != nil {
		return nil, err
	}
	if err := b.checkURL(EnvHTTPURL); err != nil {
		return nil, err
	}
	token, err := b.secret(EnvHTTPToken, "http", true)
	if err != nil {
		return nil, err
	}
	idempotent := true
	if v := strings.TrimSpace(b.getenv(EnvHTTPIdempotent)); v != "" {
		idempotent, err = strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("registry: %s: %q is not true or false", EnvHTTPIdempotent, v)
		}
	}
	p, err := httpprovider.New(httpprovider.Config{
		BaseURL: base, Token: token, Timeout: b.timeoutVal,
		CallbackURL: b.callback("/callbacks/http"), Logger: b.opts.Logger,
		DisableIdempotency: !idempotent,
	})
	if err != nil {
		return nil, fmt.Errorf("registry: http provider (%s, %s): %w", EnvHTTPURL, EnvCallbackBase, err)
	}
	return p, nil
}

func (b *builder) twilio() (provider.Sender, error) {
	sid, err := b.required(EnvTwilioAccountSID, "twilio")
	if err != nil {
		return nil, err
	}
	if err := b.checkURL(EnvTwilioBaseURL); err != nil {
		return nil, err
	}
	token, err := b.secret(EnvTwilioAuthToken, "twilio", true)
	if err != nil {
		return nil, err
	}
	from, svc := strings.TrimSpace(b.getenv(EnvTwilioFrom)), strings.TrimSpace(b.getenv(EnvTwilioService))
	if from == "" && svc == "" {
		return nil, fmt.Errorf("registry: %s or %s is required when a channel uses twilio", EnvTwilioFrom, EnvTwilioService)
	}
	p, err := twilio.New(twilio.Config{
		BaseURL: strings.TrimSpace(b.getenv(EnvTwilioBaseURL)), AccountSID: sid, AuthToken: token,
		From: from, MessagingServiceSID: svc, CallbackBaseURL: strings.TrimSpace(b.getenv(EnvCallbackBase)),
		Timeout: b.timeoutVal, Logger: b.opts.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("registry: twilio provider (%s, %s): %w", EnvTwilioBaseURL, EnvCallbackBase, err)
	}
	return p, nil
}

func (b *builder) smtp() (provider.Sender, error) {
	host, err := b.required(EnvSMTPHost, "smtp")
	if err != nil {
		return nil, err
	}
	from, err := b.required(EnvSMTPFrom, "smtp")
	if err != nil {
		return nil, err
	}
	port := 0
	if v := strings.TrimSpace(b.getenv(EnvSMTPPort)); v != "" {
		port, err = strconv.Atoi(v)
		if err != nil || port < 1 || port > 65535 {
			return nil, fmt.Errorf("registry: %s: %q is not a port number", EnvSMTPPort, v)
		}
	}
	pol, err := smtpprovider.ParseTLSPolicy(b.getenv(EnvSMTPTLS))
	if err != nil {
		return nil, fmt.Errorf("registry: %s: %w", EnvSMTPTLS, err)
	}
	user := strings.TrimSpace(b.getenv(EnvSMTPUsername))
	pass, err := b.secret(EnvSMTPPassword, "smtp", user != "")
	if err != nil {
		return nil, err
	}
	p, err := smtpprovider.New(smtpprovider.Config{
		Host: host, Port: port, Username: user, Password: pass, TLS: pol, From: from,
		MessageIDDomain: strings.TrimSpace(b.getenv(EnvSMTPMessageIDDomain)),
		Timeout:         b.timeoutVal, Logger: b.opts.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("registry: smtp provider (%s): %w", EnvSMTPFrom, err)
	}
	return p, nil
}

func (b *builder) sns() (provider.Sender, error) {
	if b.opts.SNS == nil {
		return nil, errors.New("registry: sns provider: no SNS client")
	}
	topics := map[string]string{}
	for ch, env := range map[string]string{"sms": EnvSNSSMSTopicARN, "email": EnvSNSEmailTopicARN, "push": EnvSNSPushTopicARN} {
		if v := strings.TrimSpace(b.getenv(env)); v != "" {
			if !strings.HasPrefix(v, "arn:") {
				return nil, fmt.Errorf("registry: %s: %q is not a topic ARN", env, v)
			}
			topics[ch] = v
		}
	}
	p, err := snsprovider.New(snsprovider.Config{
		Client: b.opts.SNS, SenderID: strings.TrimSpace(b.getenv(EnvSNSSenderID)),
		OriginationNumber: strings.TrimSpace(b.getenv(EnvSNSOriginationNumber)),
		TopicARNs:         topics, Timeout: b.timeoutVal, Logger: b.opts.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("registry: sns provider: %w", err)
	}
	return p, nil
}

func (b *builder) ses() (provider.Sender, error) {
	if b.opts.SES == nil {
		return nil, errors.New("registry: ses provider: no SES client")
	}
	from, err := b.required(EnvSESFrom, "ses")
	if err != nil {
		return nil, err
	}
	p, err := sesprovider.New(sesprovider.Config{
		Client: b.opts.SES, From: from,
		ConfigurationSet: strings.TrimSpace(b.getenv(EnvSESConfigurationSet)),
		Timeout:          b.timeoutVal, Logger: b.opts.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("registry: ses provider (%s): %w", EnvSESFrom, err)
	}
	return p, nil
}
