// Command lambda-provider is an example of a notification provider written
// as an AWS Lambda function for sendonce's lambda provider
// (docs/lambda-provider.md): sendonce invokes it synchronously with the
// JSON of schema/lambda-provider.v1.json, and it forwards the message to a
// gateway that speaks sendonce's generic HTTP provider protocol
// (docs/http-provider.md), such as the provider simulator
// (cmd/provider-sim). It imports nothing of sendonce: copy it, and replace
// Handler's two calls with your provider's API.
//
// Configuration (the function's environment):
//
//	HTTP_PROVIDER_URL    the gateway's base URL (required)
//	HTTP_PROVIDER_TOKEN  its bearer token (required)
//
// Build it as any Go function (provided.al2023 runtime):
//
//	GOOS=linux GOARCH=arm64 CGO_ENABLED=0 go build -tags lambda.norpc -o bootstrap ./examples/lambda-provider
//
// and set, in sendonce's sender and reconciler, for the channel it serves:
//
//	SENDONCE_SMS_PROVIDER=lambda
//	SENDONCE_SMS_LAMBDA_ARN=arn:aws:lambda:REGION:ACCOUNT:function:NAME
//	SENDONCE_SMS_LAMBDA_IDEMPOTENT=true   # the gateway drops a repeat of the key
//	SENDONCE_SMS_LAMBDA_LOOKUP=true       # the gateway answers lookups by reference
//
// Give the function a timeout below sendonce's SENDONCE_PROVIDER_TIMEOUT.
package main

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
)

func main() {
	// Handle logs one JSON line per request, to CloudWatch Logs.
	slog.SetDefault(slog.New(slog.NewJSONHandler(os.Stdout, nil)))
	h, err := fromEnv(os.Getenv)
	if err != nil {
		slog.Error("start-up failed", "error", err.Error())
		os.Exit(1)
	}
	lambda.Start(h.Handle)
}

// fromEnv builds the Handler from the function's environment.
func fromEnv(getenv func(string) string) (*Handler, error) {
	h := &Handler{BaseURL: getenv("HTTP_PROVIDER_URL"), Token: getenv("HTTP_PROVIDER_TOKEN")}
	if h.BaseURL == "" || h.Token == "" {
		return nil, fmt.Errorf("HTTP_PROVIDER_URL and HTTP_PROVIDER_TOKEN are required")
	}
	h.Client = &http.Client{
		Transport: &http.Transport{
			Proxy:               http.ProxyFromEnvironment,
			DialContext:         (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
			TLSHandshakeTimeout: 2 * time.Second,
			MaxIdleConnsPerHost: 4,
		},
		// Redirects are a configuration problem, not an answer.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return h, nil
}
