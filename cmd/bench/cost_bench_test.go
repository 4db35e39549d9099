package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/ledger/dynamoledger"
	"github.com/sendonce/sendonce/internal/tableschema"
	"github.com/sendonce/sendonce/internal/testenv"
)

// BenchmarkDynamoDBLocalCPU breaks a first send's cost on DynamoDB Local
// into steps, from the peer section's raw put to the ledger's claim and
// mark, 16 calls in flight. Each step reports DynamoDB Local's CPU time
// per operation (dynamo-ms/op, from /proc/<pid>/stat) beside this
// process's (client-ms/op): on a shared machine, CPU per operation moves
// far less with load than operations per second. Two reference steps do
// what Powertools' idempotency does per first send (a conditional put of
// a 3-attribute record, then an update completing it) and the ledger's claim
// and mark on a table without its index. -count repeats each step in a
// row, so rounds are interleaved by running the binary several times and
// dropping the first run (DynamoDB Local's JIT warms up in it); on a
// shared machine, nice -n -19 keeps other processes off the measurement
// (docs/benchmarks.md, "Where the time goes"):
//
//	go test -c -o /tmp/bench.test ./cmd/bench
//	nice -n -19 scripts/local-aws.sh run sh -c 'for i in 1 2 3 4 5; do /tmp/bench.test -test.run "^$" -test.bench BenchmarkDynamoDBLocalCPU -test.benchtime 1500x; done' | tee cost.txt
//	benchstat cost.txt
func BenchmarkDynamoDBLocalCPU(b *testing.B) {
	ctx := context.Background()
	db, dyn, keyOnly := dynamoLocalBench(b, "cost-raw")
	prod := testenv.NewTable(b, db)
	// The same schema with the optional event index (EventIndex=true).
	prodEvt := testenv.NewTable(b, db, tableschema.WithEventIndex(true))
	l, err := dynamoledger.New(db, prod, dynamoledger.Config{})
	if err != nil {
		b.Fatal(err)
	}
	run := testenv.RandomID()
	var seq atomic.Int64
	newEntry := func() ledger.Entry {
		i := int(seq.Add(1))
		e, err := entry(request(run, i))
		if err != nil {
			b.Fatal(err)
		}
		return e
	}
	// A real claim's item, read back, for the raw puts of the same size.
	e := newEntry()
	if _, err := l.Claim(ctx, e, time.Minute); err != nil {
		b.Fatal(err)
	}
	got, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(prod), Key: map[string]types.AttributeValue{tableschema.PartitionKey: &types.AttributeValueMemberS{Value: e.Key}}})
	if err != nil || got.Item == nil {
		b.Fatalf("read the claim's item: %v", err)
	}
	claimItem := got.Item
	delete(claimItem, tableschema.EventPK)
	put := func(table string, tmpl map[string]types.AttributeValue, event bool) func() error {
		return func() error {
			item := maps.Clone(tmpl)
			n := seq.Add(1)
			item[tableschema.PartitionKey] = &types.AttributeValueMemberS{Value: fmt.Sprintf("v1_%s%048d", run, n)}
			if event {
				item[tableschema.EventPK] = &types.AttributeValueMemberS{Value: fmt.Sprintf("bench#evt-%s-%d", run, n)}
			}
			_, err := db.PutItem(ctx, &dynamodb.PutItemInput{
				TableName: aws.String(table), Item: item,
				ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
				ExpressionAttributeNames: map[string]string{"#pk": tableschema.PartitionKey},
			})
			return err
		}
	}
	// Powertools' first send (DynamoDBPersistenceLayer): its conditional
	// put of the in-progress record, then the unconditional UpdateItem
	// that completes it (expiry, status, response data).
	powertools := func() error {
		item := rawItem()
		item[tableschema.PartitionKey] = &types.AttributeValueMemberS{Value: fmt.Sprintf("v1_%s%048d", run, seq.Add(1))}
		if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{
			TableName: aws.String(keyOnly), Item: item,
			ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
			ExpressionAttributeNames: map[string]string{"#pk": tableschema.PartitionKey},
		}); err != nil {
			return err
		}
		_, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: aws.String(keyOnly), Key: map[string]types.AttributeValue{tableschema.PartitionKey: item[tableschema.PartitionKey]},
			UpdateExpression:          aws.String("SET #expiry = :expiry, #status = :status, #data = :data"),
			ExpressionAttributeNames:  map[string]string{"#expiry": "expiration", "#status": "status", "#data": "data"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":expiry": &types.AttributeValueMemberN{Value: "1900000000"}, ":status": &types.AttributeValueMemberS{Value: "COMPLETED"}, ":data": &types.AttributeValueMemberS{Value: `{"ok":true}`}},
		})
		return err
	}
	lk, err := dynamoledger.New(db, keyOnly, dynamoledger.Config{}) // the ledger on a table without its index
	if err != nil {
		b.Fatal(err)
	}
	claimMark := func(l *dynamoledger.Ledger) func() error {
		return func() error {
			c, err := l.Claim(ctx, newEntry(), time.Minute)
			if err != nil {
				return err
			}
			return l.Mark(ctx, c, ledger.Outcome{State: ledger.StateSent, ProviderMessageID: "msg-1"})
		}
	}
	steps := []struct {
		name string
		op   func() error
	}{
		{"raw_put_3_attributes_key_only_table", put(keyOnly, rawItem(), false)},
		{"powertools_like_put_then_update_key_only_table", powertools},
		{"raw_put_claim_item_key_only_table", put(keyOnly, claimItem, false)},
		{"raw_put_claim_item_ledger_table", put(prod, claimItem, false)},
		{"raw_put_claim_item_ledger_table_event_key", put(prod, claimItem, true)},
		{"raw_put_claim_item_event_index_table_event_key", put(prodEvt, claimItem, true)},
		{"ledger_claim", func() error { _, err := l.Claim(ctx, newEntry(), time.Minute); return err }},
		{"ledger_claim_and_mark_sent", claimMark(l)},
		{"ledger_claim_and_mark_sent_key_only_table", claimMark(lk)},
	}
	for _, st := range steps {
		b.Run(st.name, func(b *testing.B) {
			b.SetParallelism(max(1, 16/runtime.GOMAXPROCS(0)))
			dyn0, own0 := ProcCPU(dyn), ProcCPU(os.Getpid())
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := st.op(); err != nil {
						b.Error(err)
						return
					}
				}
			})
			ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) / float64(b.N) }
			b.ReportMetric(ms(ProcCPU(dyn)-dyn0), "dynamo-ms/op")
			b.ReportMetric(ms(ProcCPU(os.Getpid())-own0), "client-ms/op")
		})
	}
}

// BenchmarkDynamoDBLocalConcurrency puts 3-attribute items into a key-only
// table at 2 to 64 calls in flight and reports the cores DynamoDB Local
// and this process kept busy (CPU time over wall time) beside ops/s: the
// probe behind docs/benchmarks.md's "DynamoDB Local's writes stop near
// one core". Run it like BenchmarkDynamoDBLocalCPU, dropping the first run.
func BenchmarkDynamoDBLocalConcurrency(b *testing.B) {
	ctx := context.Background()
	db, dyn, table := dynamoLocalBench(b, "cost-cores")
	run, tmpl := testenv.RandomID(), rawItem()
	var seq atomic.Int64
	for _, inFlight := range []int{2, 4, 16, 64} {
		b.Run(fmt.Sprintf("in_flight_%d", inFlight), func(b *testing.B) {
			b.SetParallelism(max(1, inFlight/runtime.GOMAXPROCS(0)))
			dyn0, own0, start := ProcCPU(dyn), ProcCPU(os.Getpid()), time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					item := maps.Clone(tmpl)
					item[tableschema.PartitionKey] = &types.AttributeValueMemberS{Value: fmt.Sprintf("v1_%s%048d", run, seq.Add(1))}
					if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
						b.Error(err)
						return
					}
				}
			})
			wall := time.Since(start)
			b.ReportMetric(float64(ProcCPU(dyn)-dyn0)/float64(wall), "dynamo-cores")
			b.ReportMetric(float64(ProcCPU(os.Getpid())-own0)/float64(wall), "client-cores")
			b.ReportMetric(float64(b.N)/wall.Seconds(), "ops/s")
		})
	}
}

// dynamoLocalBench returns a client of testenv's DynamoDB Local, the pid
// of its process (whose CPU time the benchmarks read) and a key-only
// table for purpose, dropped when b ends.
func dynamoLocalBench(b *testing.B, purpose string) (*dynamodb.Client, int, string) {
	b.Helper()
	dyn := dynamoLocalPID()
	if dyn == 0 {
		b.Fatal("SENDONCE_LOCAL_DYNAMODB_PID is not set: run through scripts/local-aws.sh")
	}
	db := dynamoClient(testenv.DynamoDBEndpoint(b))
	table, drop, err := createPlainTable(context.Background(), db, purpose, tableschema.PartitionKey, "")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(drop)
	return db, dyn, table
}
