package localpipeline

import (
	"context"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
)

// DefaultMaxDepth is a Feeder's bound on the queue's depth when none is
// given: moto_server's SQS slows down as a queue grows, and Lambda's
// pollers never see more than a few batches per instance anyway.
const DefaultMaxDepth = 200

// feedCalls is how many SendMessageBatch calls a Feeder's Step makes at
// once: a loaded moto_server answers each slowly. Bodies sent at once may
// reach the queue out of order.
const feedCalls = 4

// Feeder keeps the notification queue fed from a backlog of bodies as the
// pollers drain it, never letting its depth (visible + in flight) pass a
// bound. Enqueuing 10,000 messages at once into moto_server takes minutes
// and slows every receive; fed this way the queue stays small.
type Feeder struct {
	p   *Pipeline
	max int

	mu      sync.Mutex
	backlog []string
	at      []time.Time // when the i-th body added was enqueued (zero: not yet)
	next    int         // index of the next backlog body to enqueue
	front   []string    // bodies to enqueue before the backlog (AddFront)
}

// NewFeeder returns a Feeder for p keeping at most maxDepth messages on
// the queue (DefaultMaxDepth when maxDepth <= 0).
func (p *Pipeline) NewFeeder(maxDepth int) *Feeder {
	if maxDepth <= 0 {
		maxDepth = DefaultMaxDepth
	}
	return &Feeder{p: p, max: maxDepth}
}

// Add appends bodies to the backlog; they are enqueued in order. It
// returns the index of the first (see EnqueuedAt).
func (f *Feeder) Add(bodies ...string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	i := len(f.backlog)
	f.backlog = append(f.backlog, bodies...)
	f.at = append(f.at, make([]time.Time, len(bodies))...)
	return i
}

// AddFront queues bodies ahead of the backlog (redelivered copies of
// messages already enqueued); they are not indexed.
func (f *Feeder) AddFront(bodies ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.front = append(f.front, bodies...)
}

// EnqueuedAt returns when the i-th body added was enqueued, or the zero
// time if it has not been yet.
func (f *Feeder) EnqueuedAt(i int) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	if i < 0 || i >= len(f.at) {
		return time.Time{}
	}
	return f.at[i]
}

// Backlog returns how many bodies wait to be enqueued.
func (f *Feeder) Backlog() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.front) + len(f.backlog) - f.next
}

// Step reads the queue's depth and enqueues up to the bound from the
// front list, then the backlog. It returns the depth it read (before
// enqueuing) and how many it enqueued.
func (f *Feeder) Step(ctx context.Context) (depth, enqueued int, err error) {
	vis, inflight, err := f.p.QueueDepth(ctx)
	if err != nil {
		return 0, 0, err
	}
	depth = vis + inflight
	room := f.max - depth
	f.mu.Lock()
	var batch []string
	nFront := min(room, len(f.front))
	batch = append(batch, f.front[:max(nFront, 0)]...)
	room -= len(batch)
	from := f.next
	nBack := max(0, min(room, len(f.backlog)-f.next))
	batch = append(batch, f.backlog[from:from+nBack]...)
	f.mu.Unlock()
	if len(batch) == 0 {
		return depth, 0, nil
	}
	if err := f.enqueue(ctx, batch); err != nil {
		return depth, 0, err
	}
	now := time.Now()
	f.mu.Lock()
	f.front = f.front[len(batch)-nBack:]
	for i := from; i < from+nBack; i++ {
		f.at[i] = now
	}
	f.next = from + nBack
	f.mu.Unlock()
	return depth, len(batch), nil
}

// enqueue sends batch, in chunks of ten, over up to feedCalls calls at
// once. On an error nothing is counted as sent: a retry may send some
// bodies twice, which the pipeline must absorb anyway.
func (f *Feeder) enqueue(ctx context.Context, batch []string) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(feedCalls)
	for chunk := range slices.Chunk(batch, 10) {
		g.Go(func() error { return f.p.Enqueue(ctx, chunk...) })
	}
	return g.Wait()
}
