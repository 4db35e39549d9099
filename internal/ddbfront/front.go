// Package ddbfront is the one DynamoDB front of the tooling: an HTTP
// reverse proxy in front of DynamoDB Local through which a client of any
// language reaches the table (AWS_ENDPOINT_URL_DYNAMODB, or a client's
// BaseEndpoint). Every request is counted by table and operation; hooks,
// each off unless asked for, make it:
//
//   - lose answers and throttle (Storm, after Enable): throttling errors
//     in bursts, answers lost after the write, answers of ledger
//     operations lost for good with the SDK's retries swallowed, the
//     worker killed right after (Front.Kill). The chaos runs use it.
//   - price writes (Options.Cost): the capacity DynamoDB Local reports and
//     the write units real DynamoDB would charge (package ddbcost), from
//     the item before and after each write. The benchmarks and the cost
//     tests use it.
//
// Take returns what one table's calls came to since the last Take: the
// tests that count a path's calls on the wire use it too.
package ddbfront

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sendonce/sendonce/internal/benchreport/ddbcost"
	"github.com/sendonce/sendonce/internal/localpipeline"
	"github.com/sendonce/sendonce/internal/testenv"
)

// Options configures a Front.
type Options struct {
	// Storm are the faults injected once Enable turns them on.
	Storm Storm
	// Seed seeds the draws of the faults.
	Seed uint64
	// Cost prices every write: the front reads the item before and after
	// it straight from DynamoDB Local (not counted), holding a per-item
	// lock so that concurrent writes to one item are priced one at a
	// time, and asks for ReturnConsumedCapacity=INDEXES on every item
	// call. It slows calls down: for accounting, never for throughput.
	Cost bool
}

// Front is a reverse proxy in front of DynamoDB Local (package doc).
type Front struct {
	target string
	opts   Options
	client *http.Client
	direct *dynamodb.Client // Cost's item images and schemas

	// URL is the address of the listener New started.
	URL string

	// Kill, if set, kills the worker behind tag (see Listen) and reports
	// whether it did.
	Kill func(tag string) bool

	enabled atomic.Bool
	storm   stormState
	tables  sync.Map // table name → ddbcost.Schema (Cost)
	locks   keyLocks

	mu      sync.Mutex
	usage   map[string]*Usage
	srvs    []*http.Server
	ccfBody string
}

// New starts a Front forwarding to target (DynamoDB Local's URL) on a new
// loopback port (URL). Close stops it.
func New(target string, o Options) (*Front, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	f := &Front{
		target: strings.TrimRight(target, "/"), opts: o,
		client: &http.Client{Transport: tr},
		usage:  map[string]*Usage{},
	}
	f.storm.init(o.Seed)
	if o.Cost {
		f.direct = testenv.DynamoDBAt(f.target)
	}
	u, err := f.Listen("")
	if err != nil {
		return nil, err
	}
	f.URL = u
	return f, nil
}

// Listen serves the front on a new loopback port for the requests of one
// worker, named tag, and returns its URL: a worker configured with it
// can be told apart (and killed after a lost answer). Close stops every
// listener.
func (f *Front) Listen(tag string) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("ddbfront: listen: %w", err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { f.serve(w, r, tag) }), ReadHeaderTimeout: 10 * time.Second}
	f.mu.Lock()
	f.srvs = append(f.srvs, srv)
	f.mu.Unlock()
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String(), nil
}

// Close stops every listener.
func (f *Front) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range f.srvs {
		_ = s.Close()
	}
	f.srvs = nil
}

// Enable turns the Storm's faults on or off.
func (f *Front) Enable(on bool) { f.enabled.Store(on) }

// Usage is what the calls to one table came to.
type Usage struct {
	// Calls counts requests by operation ("PutItem"; an SDK retry counts
	// again).
	Calls map[string]int
	// ConditionFailed counts writes whose condition failed; Errors other
	// failed requests.
	ConditionFailed, Errors int
	// ReportedWCU, ReportedIndexWCU and ReportedRCU sum what DynamoDB
	// Local reported as ConsumedCapacity (Options.Cost).
	ReportedWCU, ReportedIndexWCU, ReportedRCU float64
	// TableWCU and IndexWCU are real DynamoDB's write units; IndexWrites
	// counts index entries written or removed; MaxItem is the largest
	// item written, in bytes (Options.Cost).
	TableWCU, IndexWCU, IndexWrites, MaxItem int
}

// Total returns the number of calls of every operation.
func (u Usage) Total() int {
	n := 0
	for _, c := range u.Calls {
		n += c
	}
	return n
}

// Take returns the usage of table since the last Take and starts it over.
func (f *Front) Take(table string) Usage {
	f.mu.Lock()
	defer f.mu.Unlock()
	u := f.usage[table]
	delete(f.usage, table)
	if u == nil {
		return Usage{Calls: map[string]int{}}
	}
	return *u
}

// ConditionalFailureBody returns the first conditional-check failure
// DynamoDB Local answered through the front ("" if none yet).
func (f *Front) ConditionalFailureBody() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ccfBody
}

// wireRequest is the part of an item call's JSON the front reads.
type wireRequest struct {
	TableName string
	Key, Item json.RawMessage
}

var itemOps = map[string]bool{"PutItem": true, "UpdateItem": true, "DeleteItem": true, "GetItem": true, "Query": true}

func (f *Front) serve(w http.ResponseWriter, r *http.Request, tag string) {
	f.storm.requests.Add(1)
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	target := r.Header.Get("X-Amz-Target")
	op := strings.TrimPrefix(target, "DynamoDB_20120810.")
	var req wireRequest
	_ = json.Unmarshal(body, &req)

	// The Storm: a retry of a lost answer, a throttle, a loss.
	ledgerOp := Operation(target, body)
	if ledgerOp == "release" || ledgerOp == "mark" {
		f.storm.acted(tag, ledgerOp, body)
	}
	lost, ref, retry := f.lose(tag, ledgerOp, body)
	if retry {
		f.storm.retried.Add(1)
		localpipeline.HangUp(w) // a retry of a request whose answer was lost: lost too
		return
	}
	throttle, drop, typ := f.decide(time.Now())
	if lost {
		throttle, drop = false, true
		if ledgerOp == "release" {
			// A release that never reaches DynamoDB: the claim stays held
			// unless the worker tries again.
			f.storm.dropped.Add(1)
			f.afterLoss(tag)
			localpipeline.HangUp(w)
			return
		}
	}
	if throttle {
		f.storm.throttled.Add(1)
		f.record(req.TableName, op, http.StatusBadRequest, false, nil, ddbcost.Cost{}, 0)
		hdr := http.Header{"Content-Type": {"application/x-amz-json-1.0"},
			"X-Amzn-Requestid": {fmt.Sprintf("chaos-%d", f.storm.requests.Load())}}
		localpipeline.Answer(w, http.StatusBadRequest, hdr, fmt.Appendf(nil, `{"__type":%q,"message":"chaos: the request rate is too high for this table"}`, typ))
		return
	}

	// Cost: the item's image before the write, under its lock.
	priced := f.opts.Cost && req.TableName != "" && (op == "PutItem" || op == "UpdateItem" || op == "DeleteItem")
	var schema ddbcost.Schema
	var key, old ddbcost.Item
	if f.opts.Cost && itemOps[op] {
		body = withCapacity(body)
	}
	if priced {
		if schema, err = f.schema(r.Context(), req.TableName); err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		key, _ = attributevalue.UnmarshalMapJSON(req.Key)
		if op == "PutItem" {
			item, _ := attributevalue.UnmarshalMapJSON(req.Item)
			key = ddbcost.Item{}
			for _, k := range schema.Keys {
				if v, ok := item[k]; ok {
					key[k] = v
				}
			}
		}
		name := req.TableName // and the key's values, in the schema's order
		for _, k := range schema.Keys {
			v, _ := attributevalue.MarshalJSON(key[k])
			name += "\x00" + string(v)
		}
		unlock := f.locks.lock(name)
		defer unlock()
		if old, err = f.image(r.Context(), req.TableName, key); err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
	}

	status, header, out, err := localpipeline.Forward(r.Context(), f.client, r, f.target+r.URL.RequestURI(), body)
	if err == nil {
		f.settled(tag, ledgerOp, body, status, out, ref)
	}
	if err != nil || drop {
		if drop {
			f.storm.dropped.Add(1)
		}
		if lost {
			f.afterLoss(tag)
		}
		localpipeline.HangUp(w) // the write happened (or not); its answer is lost
		return
	}
	header.Del("Content-Length") // the server sets its own
	failed := status == http.StatusBadRequest && bytes.Contains(out, []byte("ConditionalCheckFailed"))
	var cost ddbcost.Cost
	size := 0
	if priced && (status == http.StatusOK || failed) {
		wr := ddbcost.Write{Op: ddbcost.Op(op), Old: old, Failed: failed}
		switch {
		case failed && op == "PutItem":
			wr.New, _ = attributevalue.UnmarshalMapJSON(req.Item)
		case !failed && op != "DeleteItem":
			if wr.New, err = f.image(r.Context(), req.TableName, key); err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			size = ddbcost.ItemSize(wr.New)
		}
		cost = schema.Cost(wr)
	}
	f.record(req.TableName, op, status, failed, out, cost, size)
	localpipeline.Answer(w, status, header, out)
}

func (f *Front) record(table, op string, status int, failed bool, body []byte, cost ddbcost.Cost, size int) {
	var cc struct{ ConsumedCapacity *types.ConsumedCapacity }
	if f.opts.Cost && status == http.StatusOK {
		_ = json.Unmarshal(body, &cc)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	u := f.usage[table]
	if u == nil {
		u = &Usage{Calls: map[string]int{}}
		f.usage[table] = u
	}
	u.Calls[op]++
	switch {
	case failed:
		u.ConditionFailed++
		if f.ccfBody == "" {
			f.ccfBody = string(body)
		}
	case status != http.StatusOK:
		u.Errors++
	}
	if c := cc.ConsumedCapacity; c != nil {
		if op == "GetItem" || op == "Query" {
			u.ReportedRCU += aws.ToFloat64(c.CapacityUnits)
		} else {
			u.ReportedWCU += aws.ToFloat64(c.CapacityUnits)
			for _, g := range c.GlobalSecondaryIndexes {
				u.ReportedIndexWCU += aws.ToFloat64(g.CapacityUnits)
			}
		}
	}
	if cost.Table > 0 {
		u.TableWCU += cost.Table
		u.IndexWCU += cost.Units() - cost.Table
		u.IndexWrites += cost.IndexWrites
	}
	u.MaxItem = max(u.MaxItem, size)
}

// withCapacity sets ReturnConsumedCapacity=INDEXES on an item call.
func withCapacity(body []byte) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil {
		return body
	}
	m["ReturnConsumedCapacity"] = json.RawMessage(`"INDEXES"`)
	b, err := json.Marshal(m)
	if err != nil {
		return body
	}
	return b
}

// schema returns table's key and indexes, from DescribeTable once.
func (f *Front) schema(ctx context.Context, table string) (ddbcost.Schema, error) {
	if s, ok := f.tables.Load(table); ok {
		return s.(ddbcost.Schema), nil
	}
	out, err := f.direct.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		return ddbcost.Schema{}, fmt.Errorf("ddbfront: describe %s: %w", table, err)
	}
	s := ddbcost.SchemaOf(out.Table)
	f.tables.Store(table, s)
	return s, nil
}

// image reads the item at key (nil when there is none), strongly
// consistent, bypassing the accounting.
func (f *Front) image(ctx context.Context, table string, key ddbcost.Item) (ddbcost.Item, error) {
	if len(key) == 0 {
		return nil, nil
	}
	out, err := f.direct.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, fmt.Errorf("ddbfront: read item image: %w", err)
	}
	return out.Item, nil
}

// Operation names the ledger operation a DynamoDB request carries, from
// its X-Amz-Target and the shape of its body: "claim" (a conditional
// PutItem), "takeover" (an UpdateItem that counts an attempt and removes
// the released mark), "release" (an UpdateItem that sets it), "mark" (one
// that sets a state), "update" (any other UpdateItem), or the target's
// operation in lower case ("getitem", "query", ...).
func Operation(target string, body []byte) string {
	_, op, _ := strings.Cut(target, ".")
	op = strings.ToLower(op)
	switch op {
	case "putitem":
		return "claim"
	case "updateitem":
	default:
		return op
	}
	var req struct{ UpdateExpression string }
	_ = json.Unmarshal(body, &req)
	u := req.UpdateExpression
	switch {
	case strings.Contains(u, "#attempts + ") || strings.Contains(u, "#attempts = #attempts"):
		return "takeover"
	case strings.HasPrefix(strings.TrimSpace(u), "SET #released"):
		return "release"
	case strings.Contains(u, "#state = "):
		return "mark"
	}
	return "update"
}

// keyLocks is a set of named mutexes, created on demand and kept for the
// front's life (one per item written: a few thousand in a run).
type keyLocks struct{ m sync.Map }

func (l *keyLocks) lock(name string) (unlock func()) {
	mu, _ := l.m.LoadOrStore(name, new(sync.Mutex))
	mu.(*sync.Mutex).Lock()
	return mu.(*sync.Mutex).Unlock
}
