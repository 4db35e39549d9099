package lambdaenv_test

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"

	"github.com/sendonce/sendonce/internal/lambdaenv"
)

// TestDynamoDBKeepsAnIdleConnectionPerCall checks that the DynamoDB client
// keeps more idle connections than the SDK's 10 per host: with 16 calls in
// flight, the SDK's default closed 6 connections a round and dialled them
// again.
func TestDynamoDBKeepsAnIdleConnectionPerCall(t *testing.T) {
	for _, cfg := range []aws.Config{{Region: "us-east-1"}, {Region: "us-east-1", HTTPClient: awshttp.NewBuildableClient()}} {
		c := lambdaenv.DynamoDB(cfg, func(string) string { return "" })
		bc, ok := c.Options().HTTPClient.(*awshttp.BuildableClient)
		if !ok {
			t.Fatalf("HTTPClient is %T, want *awshttp.BuildableClient", c.Options().HTTPClient)
		}
		if got := bc.GetTransport().MaxIdleConnsPerHost; got < 16 {
			t.Errorf("MaxIdleConnsPerHost = %d, want at least 16 (the peer benchmark's calls in flight)", got)
		}
	}
}
