package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sendonce/sendonce/internal/benchreport/ddbcost"
	"github.com/sendonce/sendonce/internal/localpipeline"
)

// costProxy is an HTTP proxy in front of DynamoDB Local that accounts for
// every call any client makes through it, whatever its language: calls by
// operation, the capacity DynamoDB Local reports (it asks for
// ReturnConsumedCapacity=INDEXES on every item call) and the write units
// real DynamoDB would charge, computed by package ddbcost from the item
// before and after each write. It reads those two images itself, straight
// from DynamoDB Local, holding a per-item lock across read, write and read
// so that concurrent writes to one item are costed one at a time; those
// reads are not counted. The proxy slows calls down: only the accounting
// phases go through it, never the throughput rounds.
type costProxy struct {
	target  *url.URL
	direct  *dynamodb.Client
	http    *http.Client
	srv     *http.Server
	URL     string
	locks   keyLocks
	mu      sync.Mutex
	tables  map[string]ddbcost.Schema
	usage   map[string]*accounting
	ccfBody string
}

// accounting is what the calls to one table cost.
type accounting struct {
	// Calls counts requests by operation (an SDK retry counts again).
	Calls map[string]int
	// ConditionFailed counts writes whose condition failed.
	ConditionFailed int
	// Errors counts other failed requests.
	Errors int
	// ReportedWCU, ReportedIndexWCU and ReportedRCU sum what DynamoDB
	// Local reported as ConsumedCapacity.
	ReportedWCU, ReportedIndexWCU, ReportedRCU float64
	// TableWCU and IndexWCU are real DynamoDB's write units; IndexWrites
	// counts index entries written or removed.
	TableWCU, IndexWCU, IndexWrites int
	// MaxItem is the largest item written, in bytes.
	MaxItem int
}

func (a *accounting) calls() int {
	n := 0
	for _, c := range a.Calls {
		n += c
	}
	return n
}

// startCostProxy serves a proxy to DynamoDB Local at endpoint on a free
// loopback port.
func startCostProxy(endpoint string) (*costProxy, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil, fmt.Errorf("cost proxy: endpoint %q: %w", endpoint, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("cost proxy: listen: %w", err)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	p := &costProxy{
		target: u, direct: dynamoClient(endpoint),
		http:   &http.Client{Transport: tr, Timeout: time.Minute},
		tables: map[string]ddbcost.Schema{}, usage: map[string]*accounting{},
		URL: "http://" + ln.Addr().String(),
	}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

func (p *costProxy) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = p.srv.Shutdown(ctx)
}

// take returns the accounting of table since the last take and starts it
// over.
func (p *costProxy) take(table string) accounting {
	p.mu.Lock()
	defer p.mu.Unlock()
	a := p.usage[table]
	delete(p.usage, table)
	if a == nil {
		return accounting{Calls: map[string]int{}}
	}
	return *a
}

// wireRequest is the part of an item call's JSON the proxy reads.
type wireRequest struct {
	TableName string               `json:"TableName"`
	Key       map[string]wireValue `json:"Key"`
	Item      map[string]wireValue `json:"Item"`
}

// wireValue is an AttributeValue in DynamoDB's JSON protocol (one field
// set).
type wireValue struct {
	S    *string              `json:"S,omitempty"`
	N    *string              `json:"N,omitempty"`
	B    []byte               `json:"B,omitempty"`
	BOOL *bool                `json:"BOOL,omitempty"`
	NULL *bool                `json:"NULL,omitempty"`
	SS   []string             `json:"SS,omitempty"`
	NS   []string             `json:"NS,omitempty"`
	BS   [][]byte             `json:"BS,omitempty"`
	L    []wireValue          `json:"L,omitempty"`
	M    map[string]wireValue `json:"M,omitempty"`
}

func (w wireValue) value() types.AttributeValue {
	switch {
	case w.S != nil:
		return &types.AttributeValueMemberS{Value: *w.S}
	case w.N != nil:
		return &types.AttributeValueMemberN{Value: *w.N}
	case w.B != nil:
		return &types.AttributeValueMemberB{Value: w.B}
	case w.BOOL != nil:
		return &types.AttributeValueMemberBOOL{Value: *w.BOOL}
	case w.NULL != nil:
		return &types.AttributeValueMemberNULL{Value: *w.NULL}
	case w.SS != nil:
		return &types.AttributeValueMemberSS{Value: w.SS}
	case w.NS != nil:
		return &types.AttributeValueMemberNS{Value: w.NS}
	case w.BS != nil:
		return &types.AttributeValueMemberBS{Value: w.BS}
	case w.L != nil:
		l := make([]types.AttributeValue, len(w.L))
		for i, e := range w.L {
			l[i] = e.value()
		}
		return &types.AttributeValueMemberL{Value: l}
	case w.M != nil:
		return &types.AttributeValueMemberM{Value: wireItem(w.M)}
	}
	return &types.AttributeValueMemberNULL{Value: true}
}

func wireItem(m map[string]wireValue) ddbcost.Item {
	if m == nil {
		return nil
	}
	it := make(ddbcost.Item, len(m))
	for k, v := range m {
		it[k] = v.value()
	}
	return it
}

// wireCapacity is ConsumedCapacity in a response.
type wireCapacity struct {
	ConsumedCapacity *struct {
		CapacityUnits          float64 `json:"CapacityUnits"`
		GlobalSecondaryIndexes map[string]struct {
			CapacityUnits float64 `json:"CapacityUnits"`
		} `json:"GlobalSecondaryIndexes"`
	} `json:"ConsumedCapacity"`
}

var itemOps = map[string]bool{"PutItem": true, "UpdateItem": true, "DeleteItem": true, "GetItem": true, "Query": true}

func (p *costProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "DynamoDB_20120810.")
	var req wireRequest
	if itemOps[op] {
		_ = json.Unmarshal(body, &req)
		body = withCapacity(body)
	}
	write := op == "PutItem" || op == "UpdateItem" || op == "DeleteItem"
	var schema ddbcost.Schema
	var key ddbcost.Item
	var old ddbcost.Item
	if write && req.TableName != "" {
		if schema, err = p.schema(r.Context(), req.TableName); err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		key = wireItem(req.Key)
		if op == "PutItem" {
			key = ddbcost.Item{}
			for _, k := range schema.Keys {
				if v, ok := req.Item[k]; ok {
					key[k] = v.value()
				}
			}
		}
		unlock := p.locks.lock(req.TableName + "\x00" + keyString(key))
		defer unlock()
		if old, err = p.image(r.Context(), req.TableName, key); err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
	}

	status, header, respBody, err := p.forward(r, body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	failed := status == http.StatusBadRequest && bytes.Contains(respBody, []byte("ConditionalCheckFailed"))
	var cost ddbcost.Cost
	size := 0
	if write && req.TableName != "" && (status == http.StatusOK || failed) {
		wr := ddbcost.Write{Op: ddbcost.Op(op), Old: old, Failed: failed}
		switch {
		case failed && op == "PutItem":
			wr.New = wireItem(req.Item)
		case !failed && op != "DeleteItem":
			if wr.New, err = p.image(r.Context(), req.TableName, key); err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			size = ddbcost.ItemSize(wr.New)
		}
		cost = schema.Cost(wr)
	}
	p.record(req.TableName, op, status, failed, respBody, cost, size)

	localpipeline.Answer(w, status, header, respBody)
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

// forward sends r, with body, to the target and returns its answer.
func (p *costProxy) forward(r *http.Request, body []byte) (int, http.Header, []byte, error) {
	u := *p.target
	u.Path, u.RawQuery = r.URL.Path, r.URL.RawQuery
	status, h, b, err := localpipeline.Forward(r.Context(), p.http, r, u.String(), body)
	h.Del("Content-Length") // the server sets its own
	return status, h, b, err
}

func (p *costProxy) record(table, op string, status int, failed bool, body []byte, cost ddbcost.Cost, size int) {
	var cc wireCapacity
	if status == http.StatusOK {
		_ = json.Unmarshal(body, &cc)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	a := p.usage[table]
	if a == nil {
		a = &accounting{Calls: map[string]int{}}
		p.usage[table] = a
	}
	a.Calls[op]++
	switch {
	case failed:
		a.ConditionFailed++
		if p.ccfBody == "" {
			p.ccfBody = string(body)
		}
	case status != http.StatusOK:
		a.Errors++
	}
	if c := cc.ConsumedCapacity; c != nil {
		if op == "GetItem" || op == "Query" {
			a.ReportedRCU += c.CapacityUnits
		} else {
			a.ReportedWCU += c.CapacityUnits
			for _, g := range c.GlobalSecondaryIndexes {
				a.ReportedIndexWCU += g.CapacityUnits
			}
		}
	}
	if cost.Table > 0 {
		a.TableWCU += cost.Table
		a.IndexWCU += cost.Units() - cost.Table
		a.IndexWrites += cost.IndexWrites
	}
	a.MaxItem = max(a.MaxItem, size)
}

func (p *costProxy) conditionalFailureBody() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ccfBody
}

// schema returns table's key and indexes, from DescribeTable once.
func (p *costProxy) schema(ctx context.Context, table string) (ddbcost.Schema, error) {
	p.mu.Lock()
	s, ok := p.tables[table]
	p.mu.Unlock()
	if ok {
		return s, nil
	}
	out, err := p.direct.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		return ddbcost.Schema{}, fmt.Errorf("cost proxy: describe %s: %w", table, err)
	}
	s = ddbcost.SchemaOf(out.Table)
	p.mu.Lock()
	p.tables[table] = s
	p.mu.Unlock()
	return s, nil
}

// image reads the item at key (nil when there is none), strongly
// consistent, bypassing the accounting.
func (p *costProxy) image(ctx context.Context, table string, key ddbcost.Item) (ddbcost.Item, error) {
	if len(key) == 0 {
		return nil, nil
	}
	out, err := p.direct.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, fmt.Errorf("cost proxy: read item image: %w", err)
	}
	return out.Item, nil
}

// keyString is a stable text of a key's values, for the per-item lock.
func keyString(key ddbcost.Item) string {
	names := make([]string, 0, len(key))
	for k := range key {
		names = append(names, k)
	}
	slices.Sort(names)
	var b strings.Builder
	for _, k := range names {
		b.WriteString(k + "=")
		switch v := key[k].(type) {
		case *types.AttributeValueMemberS:
			b.WriteString("S:" + v.Value)
		case *types.AttributeValueMemberN:
			b.WriteString("N:" + v.Value)
		case *types.AttributeValueMemberB:
			b.WriteString("B:" + string(v.Value))
		}
		b.WriteByte(0)
	}
	return b.String()
}

// keyLocks is a set of named mutexes, created on demand and kept for the
// proxy's life (one per item written: a few thousand in a run).
type keyLocks struct{ m sync.Map }

func (l *keyLocks) lock(name string) (unlock func()) {
	mu, _ := l.m.LoadOrStore(name, new(sync.Mutex))
	mu.(*sync.Mutex).Lock()
	return mu.(*sync.Mutex).Unlock
}
