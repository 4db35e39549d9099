package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sendonce/sendonce/internal/benchreport"
	"github.com/sendonce/sendonce/internal/benchreport/ddbcost"
	"github.com/sendonce/sendonce/internal/ledger/dynamoledger"
	"github.com/sendonce/sendonce/internal/sender"
	"github.com/sendonce/sendonce/internal/tableschema"
	"github.com/sendonce/sendonce/internal/testenv"
)

// throughputConfig shapes the throughput comparison.
type throughputConfig struct {
	Workers int
	Warmup  time.Duration
	Round   time.Duration
	Rounds  int
}

// drive runs op from workers goroutines until d has passed and returns
// the completed operations per second. The first error stops the round.
func drive(ctx context.Context, workers int, d time.Duration, op func(ctx context.Context, i int64) error) (float64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		next, done atomic.Int64
		once       sync.Once
		firstErr   error
		wg         sync.WaitGroup
	)
	start := time.Now()
	deadline := start.Add(d)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) && ctx.Err() == nil {
				if err := op(ctx, next.Add(1)); err != nil {
					once.Do(func() { firstErr = err; cancel() })
					return
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return 0, firstErr
	}
	return float64(done.Load()) / time.Since(start).Seconds(), nil
}

// measureThroughput compares the sender's message rate (zero-latency HTTP
// simulator, DynamoDB ledger) with raw conditional PutItem of an item of
// the same size on the same DynamoDB Local at the same concurrency.
func measureThroughput(ctx context.Context, endpoint string, cfg throughputConfig, rep *benchreport.Report) error {
	db := dynamoClient(endpoint)
	table, drop, err := createTable(ctx, db, "tput")
	if err != nil {
		return err
	}
	defer drop()
	l, err := dynamoledger.New(db, table)
	if err != nil {
		return err
	}
	sim, prov, _, stop, err := startSim(0)
	if err != nil {
		return err
	}
	defer stop()
	s, err := newSender(l, prov)
	if err != nil {
		return err
	}
	run := testenv.RandomID()

	// The raw write's item is a real claim's item: same attributes, same
	// size, same attention-index projection.
	e, err := entry(request(run, -1))
	if err != nil {
		return err
	}
	if _, err := l.Claim(ctx, e, time.Minute); err != nil {
		return err
	}
	got, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: map[string]types.AttributeValue{tableschema.PartitionKey: &types.AttributeValueMemberS{Value: e.Key}}, ConsistentRead: aws.Bool(true)})
	if err != nil || got.Item == nil {
		return fmt.Errorf("read the claim's item: %v", err)
	}
	tmpl := got.Item
	size := ddbcost.ItemSize(tmpl)

	// Keys stay fresh across rounds: drive numbers operations from 1 each time.
	var seq atomic.Int64
	raw := func(ctx context.Context, _ int64) error {
		i := seq.Add(1)
		item := maps.Clone(tmpl)
		// Same length as a real key: "v1_" + 64 hex digits.
		item[tableschema.PartitionKey] = &types.AttributeValueMemberS{Value: fmt.Sprintf("v1_%s%048d", run, i)}
		_, err := db.PutItem(ctx, &dynamodb.PutItemInput{
			TableName:                aws.String(table),
			Item:                     item,
			ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
			ExpressionAttributeNames: map[string]string{"#pk": tableschema.PartitionKey},
		})
		return err
	}
	send := func(ctx context.Context, _ int64) error {
		res := s.Process(ctx, request(run, int(seq.Add(1))))
		if res.Status != sender.StatusSent {
			return fmt.Errorf("process: status %s (%s), want sent", res.Status, res.Reason)
		}
		return nil
	}
	if _, err := drive(ctx, cfg.Workers, cfg.Warmup, raw); err != nil {
		return fmt.Errorf("warm-up PutItem: %w", err)
	}
	if _, err := drive(ctx, cfg.Workers, cfg.Warmup, send); err != nil {
		return fmt.Errorf("warm-up sender: %w", err)
	}
	var ratios, raws, sends []float64
	for range cfg.Rounds {
		r, err := drive(ctx, cfg.Workers, cfg.Round, raw)
		if err != nil {
			return fmt.Errorf("PutItem round: %w", err)
		}
		sd, err := drive(ctx, cfg.Workers, cfg.Round, send)
		if err != nil {
			return fmt.Errorf("sender round: %w", err)
		}
		raws, sends, ratios = append(raws, r), append(sends, sd), append(ratios, sd/r)
	}
	if d := sim.Duplicates(); len(d) > 0 {
		return fmt.Errorf("the simulator delivered %d references more than once", len(d))
	}
	lo, hi := ratios[0], ratios[0]
	for _, x := range ratios {
		lo, hi = min(lo, x), max(hi, x)
	}
	how := fmt.Sprintf("%d goroutines; sender.Process with the DynamoDB ledger and the real HTTP simulator (in-process, loopback, no latency) vs conditional PutItem (attribute_not_exists) of a claim's own %d-byte item, same DynamoDB Local; %s warm-up each, then %d interleaved rounds of %s each",
		cfg.Workers, size, cfg.Warmup, cfg.Rounds, cfg.Round)
	rep.Add("throughput", "sender / raw conditional PutItem (median)", benchreport.Median(ratios), "ratio", how+"; the floor of 2 writes per message puts the ceiling near 0.5")
	rep.Add("throughput", "sender / raw conditional PutItem (min)", lo, "ratio", "lowest round")
	rep.Add("throughput", "sender / raw conditional PutItem (max)", hi, "ratio", "highest round")
	rep.Add("throughput", "raw conditional PutItem (median)", benchreport.Median(raws), "writes/s", "absolute DynamoDB Local speed on this machine: context only, not a target")
	rep.Add("throughput", "sender (median)", benchreport.Median(sends), "msgs/s", "absolute, on DynamoDB Local: context only")
	return nil
}

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
