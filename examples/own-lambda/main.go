// Command own-lambda is a sender Lambda function of your own, built on
// the sendonce library: the SAM application's sender (functions/sender)
// plus a provider the library does not ship, an adapter for an in-house
// SMS gateway (package smsgw, beside this file), tried first on the sms
// channel before the built-in providers SENDONCE_SMS_PROVIDER names.
//
// It reads the sender's configuration as functions/sender does
// (docs/configuration.md: SENDONCE_TABLE, SENDONCE_DLQ_URL, the
// providers' variables, ...), plus the gateway's:
//
//	SMSGW_URL      the gateway's base URL (required)
//	SMSGW_API_KEY  its API key (required; in production read it from
//	               SSM or Secrets Manager rather than the environment)
//
// Build it as any Go function (provided.al2023 runtime) and deploy it in
// place of the sender, fed by the notification queue with
// ReportBatchItemFailures:
//
//	GOOS=linux GOARCH=arm64 CGO_ENABLED=0 go build -tags lambda.norpc -o bootstrap ./own-lambda
//
// The reconciler must know the gateway too (a row is always settled
// against the provider that sent it): run a reconciler of your own with
// the same route (sendonce.NewReconciler, docs/library.md).
package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sendonce/sendonce"
	"github.com/sendonce/sendonce/examples/own-lambda/smsgw"
	"github.com/sendonce/sendonce/lambdaapp"
	"github.com/sendonce/sendonce/notify"
	"github.com/sendonce/sendonce/provider"
)

func main() {
	ctx := context.Background()
	env := lambdaapp.LoadEnvironment(ctx, "own-lambda")
	cfg, err := env.SenderConfig(ctx)
	env.Must(err)
	gw, err := gateway(os.Getenv)
	env.Must(err)
	cfg.Routes = withGateway(cfg.Routes, gw)
	s, err := sendonce.NewSender(cfg)
	env.Must(err)
	lambdaapp.Serve(env, func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		return s.WithLogger(env.RequestLogger(ctx)).HandleSQS(ctx, ev)
	})
}

// gateway builds the gateway's adapter from SMSGW_URL and SMSGW_API_KEY.
func gateway(getenv func(string) string) (*smsgw.Adapter, error) {
	base, key := getenv("SMSGW_URL"), getenv("SMSGW_API_KEY")
	if base == "" || key == "" {
		return nil, errors.New("own-lambda: SMSGW_URL and SMSGW_API_KEY are required")
	}
	client := &http.Client{Transport: &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
		TLSHandshakeTimeout:   2 * time.Second,
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       60 * time.Second,
		ResponseHeaderTimeout: 0, // each call is bounded by its context
	}}
	return smsgw.New(base, key, client)
}

// withGateway puts the gateway first on the sms channel's route, before
// the built-in providers configured there: they are tried only when the
// gateway refused a message before accepting anything.
func withGateway(routes sendonce.Routes, gw provider.Adapter) sendonce.Routes {
	out := sendonce.Routes{}
	for ch, r := range routes {
		out[ch] = r
	}
	out[notify.ChannelSMS] = append([]provider.Adapter{gw}, routes[notify.ChannelSMS]...)
	return out
}
