package localpipeline

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sendonce/sendonce/internal/rie"
	"github.com/sendonce/sendonce/internal/testenv"
)

// poll is one poller of the event source mapping: receive a batch, invoke
// a free sender instance, delete what it acknowledged. It runs until ctx
// ends.
func (p *Pipeline) poll(ctx context.Context) {
	for ctx.Err() == nil {
		out, err := p.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl:                    aws.String(p.QueueURL),
			MaxNumberOfMessages:         10, // the event source mapping's default batch size
			WaitTimeSeconds:             1,
			MessageAttributeNames:       []string{"All"},
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		})
		if err != nil {
			Sleep(ctx, time.Second)
			continue
		}
		if len(out.Messages) == 0 {
			continue
		}
		var inst *rie.Instance
		select {
		case inst = <-p.free:
		case <-ctx.Done():
			return
		}
		var twin []types.Message
		if p.opts.Twin != nil {
			twin = p.opts.Twin(out.Messages)
		}
		p.deliverTwice(ctx, inst, out.Messages, twin)
		p.free <- inst
	}
}

// deliverTwice delivers msgs through inst and, at the same moment, twin
// (if any) through a second free instance, if there is one. The twin
// invocation deletes nothing: its instance acts on records another
// invocation owns.
func (p *Pipeline) deliverTwice(ctx context.Context, inst *rie.Instance, msgs, twin []types.Message) {
	var other *rie.Instance
	if len(twin) > 0 {
		select {
		case other = <-p.free:
		default:
		}
	}
	if other == nil {
		p.deliver(ctx, inst, msgs)
		return
	}
	p.stats.twins.Add(1)
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = p.invoke(ctx, other, twin) })
	p.deliver(ctx, inst, msgs)
	wg.Wait()
	p.free <- other
}

// invoke hands msgs to inst as one SQS event, counted in the stats.
func (p *Pipeline) invoke(ctx context.Context, inst *rie.Instance, msgs []types.Message) ([]byte, error) {
	payload, err := json.Marshal(SQSEvent(p.queueARN, msgs))
	if err != nil {
		return nil, err
	}
	p.stats.invocations.Add(1)
	p.stats.records.Add(int64(len(msgs)))
	body, err := inst.Invoke(ctx, payload)
	if err != nil {
		p.stats.functionErrors.Add(1)
	}
	return body, err
}

// deliver invokes inst with msgs as an SQS event and deletes the records
// the function acknowledged.
func (p *Pipeline) deliver(ctx context.Context, inst *rie.Instance, msgs []types.Message) {
	body, err := p.invoke(ctx, inst, msgs)
	if err != nil {
		// A function error (or a failed invoke) fails the whole batch:
		// every record reappears after the visibility timeout.
		return
	}
	var resp events.SQSEventResponse
	if err := json.Unmarshal(body, &resp); err != nil {
		p.stats.functionErrors.Add(1) // not an SQS batch response
		return
	}
	failed := map[string]bool{}
	for _, f := range resp.BatchItemFailures {
		failed[f.ItemIdentifier] = true
	}
	// Lambda treats an identifier that names no record of the batch as a
	// failure of the whole batch.
	ids := map[string]bool{}
	for _, m := range msgs {
		ids[aws.ToString(m.MessageId)] = true
	}
	for id := range failed {
		if !ids[id] {
			p.stats.functionErrors.Add(1)
			return
		}
	}
	p.stats.reported.Add(int64(len(failed)))
	var del []types.DeleteMessageBatchRequestEntry
	for i, m := range msgs {
		if failed[aws.ToString(m.MessageId)] {
			continue
		}
		del = append(del, types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle})
	}
	if len(del) == 0 {
		return
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	// A failed delete leaves the records to reappear, as Lambda's would.
	if out, err := p.sqs.DeleteMessageBatch(dctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(p.QueueURL), Entries: del}); err == nil {
		p.stats.deleted.Add(int64(len(out.Successful)))
	}
}

// SQSEvent builds the event Lambda's event source mapping hands the
// function for msgs received from the queue queueARN.
func SQSEvent(queueARN string, msgs []types.Message) events.SQSEvent {
	ev := events.SQSEvent{Records: make([]events.SQSMessage, 0, len(msgs))}
	for _, m := range msgs {
		rec := events.SQSMessage{
			MessageId:              aws.ToString(m.MessageId),
			ReceiptHandle:          aws.ToString(m.ReceiptHandle),
			Body:                   aws.ToString(m.Body),
			Md5OfBody:              aws.ToString(m.MD5OfBody),
			Md5OfMessageAttributes: aws.ToString(m.MD5OfMessageAttributes),
			Attributes:             map[string]string{},
			MessageAttributes:      map[string]events.SQSMessageAttribute{},
			EventSourceARN:         queueARN,
			EventSource:            "aws:sqs",
			AWSRegion:              testenv.Region,
		}
		maps.Copy(rec.Attributes, m.Attributes)
		for k, v := range m.MessageAttributes {
			rec.MessageAttributes[k] = events.SQSMessageAttribute{
				StringValue: v.StringValue, BinaryValue: v.BinaryValue,
				StringListValues: v.StringListValues, BinaryListValues: v.BinaryListValues,
				DataType: aws.ToString(v.DataType),
			}
		}
		ev.Records = append(ev.Records, rec)
	}
	return ev
}

// serveWebhook is the Function URL front: it turns the HTTP request into a
// Function URL event (payload 2.0), invokes the webhook and writes its
// response back.
func (p *Pipeline) serveWebhook(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, "read body", http.StatusBadRequest)
		return
	}
	ev := FunctionURLRequest(r, body, time.Now())
	payload, err := json.Marshal(ev)
	if err != nil {
		http.Error(w, "encode event", http.StatusInternalServerError)
		return
	}
	out, err := p.webhook.Invoke(r.Context(), payload)
	if err != nil {
		var ie *rie.InvokeError
		if errors.As(err, &ie) {
			// A Function URL answers a function error with 502.
			http.Error(w, "Internal Server Error", http.StatusBadGateway)
			return
		}
		http.Error(w, "function unavailable", http.StatusServiceUnavailable)
		return
	}
	var resp events.LambdaFunctionURLResponse
	if err := json.Unmarshal(out, &resp); err != nil || resp.StatusCode == 0 {
		http.Error(w, "bad function response", http.StatusBadGateway)
		return
	}
	for k, v := range resp.Headers {
		w.Header().Set(k, v)
	}
	for _, c := range resp.Cookies {
		w.Header().Add("Set-Cookie", c)
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.WriteString(w, resp.Body)
}

// FunctionURLRequest builds the Function URL event (payload version 2.0)
// Lambda hands a function for r with body, received at now.
func FunctionURLRequest(r *http.Request, body []byte, now time.Time) events.LambdaFunctionURLRequest {
	headers := map[string]string{}
	for k, vs := range r.Header {
		headers[strings.ToLower(k)] = strings.Join(vs, ",")
	}
	headers["host"] = r.Host
	query := map[string]string{}
	for k, vs := range r.URL.Query() {
		query[k] = strings.Join(vs, ",")
	}
	sourceIP, _, _ := strings.Cut(r.RemoteAddr, ":")
	prefix, _, _ := strings.Cut(r.Host, ".")
	id := strconv.FormatInt(now.UnixNano(), 36)
	return events.LambdaFunctionURLRequest{
		Version:               "2.0",
		RawPath:               r.URL.EscapedPath(),
		RawQueryString:        r.URL.RawQuery,
		Headers:               headers,
		QueryStringParameters: query,
		Body:                  string(body),
		IsBase64Encoded:       false,
		RequestContext: events.LambdaFunctionURLRequestContext{
			AccountID:    "123456789012",
			RequestID:    "localpipeline-" + id,
			APIID:        "localpipeline",
			DomainName:   r.Host,
			DomainPrefix: prefix,
			Time:         now.UTC().Format("02/Jan/2006:15:04:05 -0700"),
			TimeEpoch:    now.UnixMilli(),
			HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{
				Method:    r.Method,
				Path:      r.URL.Path,
				Protocol:  r.Proto,
				SourceIP:  sourceIP,
				UserAgent: r.UserAgent(),
			},
		},
	}
}

// Every calls f every d until ctx ends.
func Every(ctx context.Context, d time.Duration, f func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f()
		}
	}
}

// Sleep waits for d, or until ctx ends, whichever comes first.
func Sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
