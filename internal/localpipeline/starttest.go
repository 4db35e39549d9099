package localpipeline

import (
	"context"
	"testing"

	"github.com/sendonce/sendonce/internal/rie"
	"github.com/sendonce/sendonce/internal/testenv"
)

// StartTest starts a pipeline for test t and closes it when t ends. An
// endpoint opts leaves empty is the emulator's that testenv names, a
// bootstrap it leaves empty rie.Build's. It fails t if the pipeline does
// not start or does not close cleanly.
func StartTest(t testing.TB, opts Options) *Pipeline {
	t.Helper()
	if opts.DynamoDBEndpoint == "" {
		opts.DynamoDBEndpoint = testenv.DynamoDBEndpoint(t)
	}
	if opts.MotoEndpoint == "" {
		opts.MotoEndpoint = testenv.MotoEndpoint(t)
	}
	for name, path := range map[string]*string{"sender": &opts.SenderBootstrap, "webhook": &opts.WebhookBootstrap, "reconciler": &opts.ReconcilerBootstrap} {
		if *path == "" {
			*path = rie.Build(t, name)
		}
	}
	p, err := Start(context.Background(), opts)
	if err != nil {
		t.Fatalf("start the local pipeline: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("close the local pipeline: %v", err)
		}
	})
	return p
}
