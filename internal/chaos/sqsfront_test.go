package chaos

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestSQSFront: writes to one queue reach moto one at a time, whole;
// writes to different queues and receives are not held back.
func TestSQSFront(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	inFlight, most := map[string]int{}, map[string]int{}
	var bodies atomic.Int64
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), `"MessageBody":"m"`) {
			bodies.Add(1)
		}
		var req struct{ QueueUrl string }
		_ = json.Unmarshal(body, &req)
		k := "receive"
		if !strings.HasSuffix(r.Header.Get("X-Amz-Target"), "ReceiveMessage") {
			k = "write " + req.QueueUrl[strings.LastIndex(req.QueueUrl, "/")+1:]
		}
		mu.Lock()
		inFlight[k]++
		most[k] = max(most[k], inFlight[k])
		mu.Unlock()
		time.Sleep(20 * time.Millisecond)
		mu.Lock()
		inFlight[k]--
		mu.Unlock()
		_, _ = io.WriteString(w, `{}`)
	}))
	t.Cleanup(backend.Close)
	f, err := NewSQSFront(backend.URL)
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(f)
	t.Cleanup(front.Close)
	post := func(target, body string) {
		req, _ := http.NewRequest(http.MethodPost, front.URL, strings.NewReader(body))
		req.Header.Set("X-Amz-Target", target)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return
		}
		resp.Body.Close()
	}
	var wg sync.WaitGroup
	for i := range 8 {
		for _, q := range []string{"a", "b"} {
			target := []string{"AmazonSQS.SendMessageBatch", "AmazonSQS.DeleteMessageBatch", "AmazonSQS.SendMessage", "AmazonSQS.DeleteMessage"}[i%4]
			wg.Add(2)
			go func() {
				defer wg.Done()
				post(target, `{"QueueUrl":"http://h:1/123456789012/`+q+`","Entries":[{"MessageBody":"m"}]}`)
			}()
			go func() {
				defer wg.Done()
				post("AmazonSQS.ReceiveMessage", `{"QueueUrl":"http://h:1/123456789012/`+q+`"}`)
			}()
		}
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	for _, k := range []string{"write a", "write b"} {
		if most[k] != 1 {
			t.Errorf("%s: %d at once, want 1 (writes to one queue serialized)", k, most[k])
		}
	}
	if most["receive"] < 2 {
		t.Errorf("receives: at most %d at once, want them not serialized", most["receive"])
	}
	if got := bodies.Load(); got != 16 {
		t.Errorf("moto got %d whole write bodies, want 16", got)
	}
}
