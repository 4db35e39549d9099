// Command api is the HTTP API Lambda function (API Gateway HTTP API,
// payload format 2.0): POST /v1/notifications and GET
// /v1/notifications/{id}. It only wires: the configuration from the
// environment (docs/configuration.md), read once per container by
// sendonce.LoadEnvironment, the handler built from it, and lambda.Start
// through sendonce.Serve.
package main

import (
	"context"

	"github.com/sendonce/sendonce"
)

func main() {
	env := sendonce.LoadEnvironment(context.Background(), "api")
	h, err := env.APIHandler()
	env.Must(err)
	sendonce.Serve(env, h)
}
