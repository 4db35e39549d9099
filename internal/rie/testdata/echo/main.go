// Command echo is the fixture function of package rie's tests: a real
// aws-lambda-go handler that echoes its input, reports an environment
// variable, logs a line and fails on request.
package main

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
)

// request is what the fixture accepts.
type request struct {
	// Echo is returned as is.
	Echo string `json:"echo"`
	// Env names an environment variable whose value is returned.
	Env string `json:"env"`
	// Log is written to stdout as one JSON log line.
	Log string `json:"log"`
	// Fail, when set, makes the handler return an *echoError with this text.
	Fail string `json:"fail"`
	// HangMS makes the handler block this many milliseconds, ignoring its
	// context, like a handler stuck in a call.
	HangMS int `json:"hang_ms"`
}

// response is what the fixture returns.
type response struct {
	Echo     string `json:"echo"`
	EnvValue string `json:"env_value,omitempty"`
	PID      int    `json:"pid"`
}

// echoError is the fixture's handler error; aws-lambda-go reports its type
// name ("echoError") as the invocation's errorType.
type echoError struct{ msg string }

func (e *echoError) Error() string { return e.msg }

func handle(ctx context.Context, req request) (response, error) {
	if req.Log != "" {
		slog.New(slog.NewJSONHandler(os.Stdout, nil)).InfoContext(ctx, req.Log)
	}
	if req.HangMS > 0 {
		time.Sleep(time.Duration(req.HangMS) * time.Millisecond)
	}
	if req.Fail != "" {
		return response{}, &echoError{msg: req.Fail}
	}
	resp := response{Echo: req.Echo, PID: os.Getpid()}
	if req.Env != "" {
		resp.EnvValue = os.Getenv(req.Env)
	}
	return resp, nil
}

func main() {
	lambda.Start(handle)
}
