package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/sendonce/sendonce/internal/tableschema"
	"github.com/sendonce/sendonce/internal/testenv"
)

// usage is the consumption of a set of DynamoDB calls.
type usage struct {
	// Calls counts logical operations by name (SDK retries not counted).
	Calls map[string]int
	// HTTP counts HTTP requests sent (retries counted).
	HTTP int
	// Failed counts operations that returned an error (conditional check
	// failures included).
	Failed int
	// RCU and WCU sum the capacity DynamoDB reported on successful reads
	// and writes; GSI is the part of WCU it attributed to indexes.
	RCU, WCU, GSI float64
	// NoCapacity counts successful operations that reported no capacity.
	NoCapacity int
}

func (u usage) total() int {
	n := 0
	for _, c := range u.Calls {
		n += c
	}
	return n
}

func (u usage) reads() int { return u.Calls["GetItem"] + u.Calls["Query"] }
func (u usage) writes() int {
	return u.Calls["PutItem"] + u.Calls["UpdateItem"] + u.Calls["DeleteItem"]
}

// meter counts DynamoDB calls and the capacity they consumed. It asks for
// ReturnConsumedCapacity=INDEXES on every item call that does not ask for
// capacity itself, so callers that never request it (the webhook's dedup
// store) are measured too. It also keeps the first body DynamoDB sent with
// a failed conditional check, to show what the emulator reports there.
type meter struct {
	mu      sync.Mutex
	u       usage
	ccfBody string
}

func newMeter() *meter { return &meter{u: usage{Calls: map[string]int{}}} }

// take returns the usage since the previous take and starts over.
func (m *meter) take() usage {
	m.mu.Lock()
	defer m.mu.Unlock()
	u := m.u
	m.u = usage{Calls: map[string]int{}}
	return u
}

func (m *meter) conditionalFailureBody() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ccfBody
}

func (m *meter) record(op string, result any, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.u.Calls[op]++
	if err != nil {
		m.u.Failed++
		return
	}
	var cc *types.ConsumedCapacity
	read := false
	switch o := result.(type) {
	case *dynamodb.PutItemOutput:
		cc = o.ConsumedCapacity
	case *dynamodb.UpdateItemOutput:
		cc = o.ConsumedCapacity
	case *dynamodb.DeleteItemOutput:
		cc = o.ConsumedCapacity
	case *dynamodb.GetItemOutput:
		cc, read = o.ConsumedCapacity, true
	case *dynamodb.QueryOutput:
		cc, read = o.ConsumedCapacity, true
	default:
		return
	}
	if cc == nil || cc.CapacityUnits == nil {
		m.u.NoCapacity++
		return
	}
	if read {
		m.u.RCU += *cc.CapacityUnits
		return
	}
	m.u.WCU += *cc.CapacityUnits
	for _, g := range cc.GlobalSecondaryIndexes {
		if g.CapacityUnits != nil {
			m.u.GSI += *g.CapacityUnits
		}
	}
}

// askCapacity sets ReturnConsumedCapacity=INDEXES on an item call's input.
func askCapacity(params any) {
	const want = types.ReturnConsumedCapacityIndexes
	switch in := params.(type) {
	case *dynamodb.PutItemInput:
		in.ReturnConsumedCapacity = want
	case *dynamodb.UpdateItemInput:
		in.ReturnConsumedCapacity = want
	case *dynamodb.DeleteItemInput:
		in.ReturnConsumedCapacity = want
	case *dynamodb.GetItemInput:
		in.ReturnConsumedCapacity = want
	case *dynamodb.QueryInput:
		in.ReturnConsumedCapacity = want
	}
}

// options instruments a client: call counting and capacity at the
// Initialize step (one count per logical operation), HTTP counting below
// the retryer.
func (m *meter) options(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
		return s.Initialize.Add(middleware.InitializeMiddlewareFunc("sendonceBenchMeter",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				op := awsmiddleware.GetOperationName(ctx)
				askCapacity(in.Parameters)
				out, md, err := next.HandleInitialize(ctx, in)
				m.record(op, out.Result, err)
				return out, md, err
			}), middleware.After)
	})
	next := o.HTTPClient
	if next == nil {
		next = awshttp.NewBuildableClient()
	}
	o.HTTPClient = &meteredDoer{next: next, m: m}
}

// meteredDoer counts HTTP requests and keeps the first conditional-check
// failure's body.
type meteredDoer struct {
	next dynamodb.HTTPClient
	m    *meter
}

func (d *meteredDoer) Do(req *http.Request) (*http.Response, error) {
	d.m.mu.Lock()
	d.m.u.HTTP++
	d.m.mu.Unlock()
	resp, err := d.next.Do(req)
	if err != nil || resp.StatusCode != http.StatusBadRequest {
		return resp, err
	}
	body, rerr := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if rerr == nil && strings.Contains(string(body), "ConditionalCheckFailed") {
		d.m.mu.Lock()
		if d.m.ccfBody == "" {
			d.m.ccfBody = string(body)
		}
		d.m.mu.Unlock()
	}
	return resp, nil
}

// dynamoClient returns a client for DynamoDB Local at endpoint with the
// extra options.
func dynamoClient(endpoint string, optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	cfg := testenv.Config()
	opts := append([]func(*dynamodb.Options){func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(endpoint)
		// DynamoDB Local's error responses carry a wrong CRC32.
		o.DisableValidateResponseChecksum = true
	}}, optFns...)
	return dynamodb.NewFromConfig(cfg, opts...)
}

// createTable creates a fresh table with the production schema and TTL and
// returns its name and a function that deletes it.
func createTable(ctx context.Context, db *dynamodb.Client, purpose string) (string, func(), error) {
	name := "sendonce-bench-" + purpose + "-" + testenv.RandomID()
	if _, err := db.CreateTable(ctx, tableschema.CreateTableInput(name)); err != nil {
		return "", nil, fmt.Errorf("create table %s: %w", name, err)
	}
	drop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = db.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	}
	if _, err := db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName: aws.String(name),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{
			AttributeName: aws.String(tableschema.TTLAttribute),
			Enabled:       aws.Bool(true),
		},
	}); err != nil {
		drop()
		return "", nil, fmt.Errorf("enable TTL on %s: %w", name, err)
	}
	return name, drop, nil
}
