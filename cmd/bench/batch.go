package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sendonce/sendonce/internal/benchreport"
	"github.com/sendonce/sendonce/internal/ledger/dynamoledger"
	"github.com/sendonce/sendonce/internal/testenv"
)

// measureBatch times HandleSQS of a 10-record batch against a simulator
// that takes latency per call, as a multiple of that latency.
func measureBatch(ctx context.Context, endpoint string, latency time.Duration, rounds int, rep *benchreport.Report) error {
	db := dynamoClient(endpoint)
	table, drop, err := createTable(ctx, db, "batch")
	if err != nil {
		return err
	}
	defer drop()
	l, err := dynamoledger.New(db, table)
	if err != nil {
		return err
	}
	_, prov, _, stop, err := startSim(latency)
	if err != nil {
		return err
	}
	defer stop()
	s, err := newSender(l, prov)
	if err != nil {
		return err
	}
	run := testenv.RandomID()
	next := 0
	timeBatch := func(size int) (time.Duration, error) {
		var ev events.SQSEvent
		for range size {
			body, err := requestJSON(request(run, next))
			if err != nil {
				return 0, err
			}
			ev.Records = append(ev.Records, events.SQSMessage{MessageId: fmt.Sprintf("m-%d", next), Body: body, EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:sendonce-notifications"})
			next++
		}
		start := time.Now()
		resp, err := s.HandleSQS(ctx, ev)
		d := time.Since(start)
		if err != nil {
			return 0, err
		}
		if len(resp.BatchItemFailures) > 0 {
			return 0, fmt.Errorf("HandleSQS reported %d records failed", len(resp.BatchItemFailures))
		}
		return d, nil
	}
	// Warm the connections to DynamoDB Local and the simulator.
	if _, err := timeBatch(10); err != nil {
		return err
	}
	var tens, ones []float64
	for range rounds {
		d10, err := timeBatch(10)
		if err != nil {
			return err
		}
		d1, err := timeBatch(1)
		if err != nil {
			return err
		}
		tens, ones = append(tens, float64(d10)/float64(latency)), append(ones, float64(d1)/float64(latency))
	}
	if len(tens) == 0 {
		return errors.New("no rounds")
	}
	rep.Add("batch", "10-record batch wall time / provider latency (median)", benchreport.Median(tens), "ratio",
		fmt.Sprintf("sender.HandleSQS of 10 new standard-queue records, simulator latency %s per call, default concurrency 10, DynamoDB Local ledger; median of %d rounds after a warm-up batch; 1 = records run concurrently, 10 = one after another", latency, rounds))
	rep.Add("batch", "1-record batch wall time / provider latency (median)", benchreport.Median(ones), "ratio",
		"the same with one record: the floor, provider latency plus two ledger writes")
	return nil
}
