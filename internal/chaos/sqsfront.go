package chaos

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
)

// SQSFront is a reverse proxy in front of moto_server through which a
// chaos run's pipelines and functions reach SQS (and, passed on untouched,
// everything else they ask moto for). It works around a race in
// moto_server 5.x's SQS, which serves requests on threads: DeleteMessage
// rebuilds a queue's message list without the lock that SendMessage
// appends under, so a message enqueued while another is deleted from the
// same queue can vanish: no function ever sees it, and the run reports it
// lost. Amazon SQS loses no message it acknowledged. The front lets one
// SendMessage, SendMessageBatch, DeleteMessage or DeleteMessageBatch per
// queue reach moto at a time; receives and every other call pass freely.
type SQSFront struct {
	proxy *httputil.ReverseProxy

	mu     sync.Mutex
	queues map[string]*sync.Mutex
}

// sqsWrites are the SQS calls (JSON protocol, X-Amz-Target) that change a
// queue's message list.
var sqsWrites = map[string]bool{
	"AmazonSQS.SendMessage": true, "AmazonSQS.SendMessageBatch": true,
	"AmazonSQS.DeleteMessage": true, "AmazonSQS.DeleteMessageBatch": true,
}

// NewSQSFront returns a front for moto_server at target.
func NewSQSFront(target string) (*SQSFront, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	// A caller that gave up (a long poll cut short when a run stops) is
	// no news: answer 502 without a log line.
	proxy.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, _ error) { w.WriteHeader(http.StatusBadGateway) }
	return &SQSFront{proxy: proxy, queues: map[string]*sync.Mutex{}}, nil
}

func (f *SQSFront) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !sqsWrites[r.Header.Get("X-Amz-Target")] {
		f.proxy.ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "read body", http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	var req struct{ QueueUrl string }
	_ = json.Unmarshal(body, &req) // moto answers a malformed request itself
	q := f.queue(req.QueueUrl)
	q.Lock()
	defer q.Unlock()
	f.proxy.ServeHTTP(w, r)
}

// queue returns the lock of the queue named by queueURL (its last path
// element: moto's name for it, whichever host the caller used).
func (f *SQSFront) queue(queueURL string) *sync.Mutex {
	name := queueURL[strings.LastIndex(queueURL, "/")+1:]
	f.mu.Lock()
	defer f.mu.Unlock()
	q := f.queues[name]
	if q == nil {
		q = &sync.Mutex{}
		f.queues[name] = q
	}
	return q
}
