package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sendonce/sendonce/internal/ledger/dynamoledger"
	"github.com/sendonce/sendonce/internal/testenv"
)

// BenchmarkHandleSQSBatch times sender.HandleSQS of a batch of new
// standard-queue records, default concurrency 10, DynamoDB Local ledger,
// against the provider simulator at 200 ms per call, and reports the
// batch's wall time over that latency (x-latency): 1 = the records ran
// concurrently, 10 = one after another. records=1 is the floor, provider
// latency plus two ledger writes. internal/sender's
// TestHandleSQSRunsRecordsConcurrently asserts the concurrency itself.
//
//	scripts/local-aws.sh run go test -run '^$' -bench BenchmarkHandleSQSBatch -count 3 ./cmd/bench
func BenchmarkHandleSQSBatch(b *testing.B) {
	const latency = 200 * time.Millisecond
	db := dynamoClient(testenv.DynamoDBEndpoint(b)) // as the functions build theirs
	l, err := dynamoledger.New(db, testenv.NewTable(b, db), dynamoledger.Config{})
	if err != nil {
		b.Fatal(err)
	}
	s, _ := simSender(b, l, latency)
	run := testenv.RandomID()
	next := 0
	handle := func(tb testing.TB, size int) {
		var ev events.SQSEvent
		for range size {
			body, err := requestJSON(request(run, next))
			if err != nil {
				tb.Fatal(err)
			}
			ev.Records = append(ev.Records, events.SQSMessage{MessageId: fmt.Sprintf("m-%d", next), Body: body, EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:sendonce-notifications"})
			next++
		}
		resp, err := s.HandleSQS(context.Background(), ev)
		if err != nil || len(resp.BatchItemFailures) > 0 {
			tb.Fatalf("HandleSQS: %v, %d of %d records failed", err, len(resp.BatchItemFailures), size)
		}
	}
	handle(b, 10) // warm the connections to DynamoDB Local and the simulator
	for _, size := range []int{1, 10} {
		b.Run(fmt.Sprintf("records=%d", size), func(b *testing.B) {
			for b.Loop() {
				handle(b, size)
			}
			b.ReportMetric(float64(b.Elapsed())/float64(b.N)/float64(latency), "x-latency")
		})
	}
}
