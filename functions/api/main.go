// Command api is the HTTP API Lambda function (API Gateway HTTP API,
// payload format 2.0): POST /v1/notifications and GET
// /v1/notifications/{id}. It only wires: the configuration from the
// environment (docs/configuration.md), read once per container by
// lambdaapp.LoadEnvironment, the handler built from it, and lambda.Start
// through lambdaapp.Serve.
package main

import (
	"context"

	"github.com/sendonce/sendonce/lambdaapp"
)

func main() {
	env := lambdaapp.LoadEnvironment(context.Background(), "api")
	h, err := env.APIHandler()
	env.Must(err)
	lambdaapp.Serve(env, h)
}
