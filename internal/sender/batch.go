package sender

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sendonce/sendonce/internal/dispatch"
	"github.com/sendonce/sendonce/internal/metrics"
	"github.com/sendonce/sendonce/internal/tracing"
	"github.com/sendonce/sendonce/notify"
	"go.opentelemetry.io/otel/attribute"
)

// DeadLetters receives requests that can never be processed.
type DeadLetters interface {
	// Put stores the record's body with the reason it was rejected. An
	// error means the record was not stored; the caller then reports the
	// record failed so that it is not lost.
	Put(ctx context.Context, rec events.SQSMessage, invalid *notify.InvalidError) error
}

// HandleSQS processes one SQS batch and reports the records that must be
// delivered again (partial batch response). Records run concurrently up to
// Config.Concurrency; records of one FIFO message group run in order, and
// after a record of a group must be retried, the rest of that group in the
// batch is reported failed without being processed. It returns an error
// only if the whole invocation failed, which never happens: every record
// ends acknowledged or reported.
func (s *Sender) HandleSQS(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	var (
		mu       sync.Mutex
		failures []events.SQSBatchItemFailure
	)
	fail := func(id string) {
		mu.Lock()
		failures = append(failures, events.SQSBatchItemFailure{ItemIdentifier: id})
		mu.Unlock()
	}

	sem := make(chan struct{}, s.cfg.Concurrency)
	var wg sync.WaitGroup
	for _, group := range groups(ev.Records) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i, rec := range group {
				sem <- struct{}{}
				ok := s.handleRecord(ctx, rec)
				<-sem
				if !ok {
					for _, rest := range group[i:] {
						fail(rest.MessageId)
					}
					return
				}
			}
		}()
	}
	wg.Wait()
	return events.SQSEventResponse{BatchItemFailures: failures}, nil
}

// groups splits records into units processed in order: one unit per FIFO
// message group, one unit per record on a standard queue.
func groups(recs []events.SQSMessage) [][]events.SQSMessage {
	var out [][]events.SQSMessage
	index := map[string]int{}
	for _, r := range recs {
		g := r.Attributes["MessageGroupId"]
		if g == "" || !strings.HasSuffix(r.EventSourceARN, ".fifo") {
			out = append(out, []events.SQSMessage{r})
			continue
		}
		i, ok := index[g]
		if !ok {
			i = len(out)
			index[g] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], r)
	}
	return out
}

// handleRecord processes one record and reports whether it is done
// (acknowledged) rather than to be delivered again.
func (s *Sender) handleRecord(ctx context.Context, rec events.SQSMessage) bool {
	// One message, one trace: its span joins the producer's trace
	// (AWSTraceHeader; package tracing).
	ctx, span := tracing.StartMessage(ctx, tracing.SpanProcess, rec.Attributes[tracing.HeaderAttribute])
	defer span.End()
	log := s.dispatch.Logger.With("sqs_message_id", rec.MessageId)
	req, err := notify.Parse([]byte(rec.Body))
	if err != nil {
		var invalid *notify.InvalidError
		if !errors.As(err, &invalid) {
			invalid = &notify.InvalidError{Reason: err.Error()}
		}
		s.dispatch.Metrics.Count(metrics.InvalidRequests, 1)
		if perr := s.cfg.DeadLetters.Put(ctx, rec, invalid); perr != nil {
			log.Error("invalid request could not be moved to the dead-letter queue: will retry", "reason", invalid.Error(), "error", perr)
			return false
		}
		log.Warn("invalid request moved to the dead-letter queue", "field", invalid.Field, "reason", invalid.Reason)
		return true
	}
	span.SetAttributes(tracing.AttrKey.String(req.Key()), tracing.AttrChannel.String(string(req.Channel)))
	res := s.ProcessEnqueued(ctx, req, Enqueued(rec))
	span.SetAttributes(attribute.String("sendonce.disposition", res.Disposition.String()))
	level := slog.LevelInfo
	if res.Disposition == dispatch.Retry || res.Disposition == dispatch.Uncertain {
		level = slog.LevelWarn
	}
	log.Log(ctx, level, "processed", "key", res.Key, "disposition", res.Disposition.String(), "reason", res.Reason,
		"receive_count", rec.Attributes["ApproximateReceiveCount"])
	// An ambiguous attempt through a provider that drops repeats is
	// repeated by the next receive (dispatch.Result.Repeat).
	return res.Disposition != dispatch.Retry && !res.Repeat
}

// EnqueuedAttribute is the message attribute that carries, in Unix
// milliseconds, when a message was first enqueued, across a move that
// makes it a new SQS message (`sendonce dlq redrive` sets it from the
// dead-lettered message's SentTimestamp). A class's default validity
// counts from it.
const EnqueuedAttribute = "sendonce-enqueued-at"

// Enqueued returns when rec was first enqueued: the earlier of its
// SentTimestamp and its EnqueuedAttribute, zero when it carries neither.
func Enqueued(rec events.SQSMessage) time.Time {
	var t time.Time
	consider := func(ms string) {
		n, err := strconv.ParseInt(ms, 10, 64)
		if err != nil || n <= 0 {
			return
		}
		if u := time.UnixMilli(n); t.IsZero() || u.Before(t) {
			t = u
		}
	}
	consider(rec.Attributes["SentTimestamp"])
	if a, ok := rec.MessageAttributes[EnqueuedAttribute]; ok && a.StringValue != nil {
		consider(*a.StringValue)
	}
	return t
}
