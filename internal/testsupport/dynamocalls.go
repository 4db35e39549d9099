package testsupport

import (
	"context"
	"net/http"
	"strings"
	"sync"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"
)

// DynamoCalls counts a DynamoDB client's calls by operation name
// ("PutItem"). Operations counts each call once, above the SDK's retries;
// Requests counts each HTTP request sent, below them. Pass one of the two
// as a client option. It is safe for concurrent use.
type DynamoCalls struct {
	mu sync.Mutex
	n  map[string]int
}

// Operations is a client option that counts each operation called.
func (c *DynamoCalls) Operations(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("countCalls",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				c.add(awsmiddleware.GetOperationName(ctx))
				return next.HandleInitialize(ctx, in)
			}), middleware.Before)
	})
}

// Requests is a client option that counts each HTTP request sent, the
// SDK's retries included.
func (c *DynamoCalls) Requests(o *dynamodb.Options) {
	o.HTTPClient = countingDoer{next: o.HTTPClient, calls: c}
}

// Take returns the counts since the last Take and starts again from zero.
func (c *DynamoCalls) Take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = nil
	return n
}

func (c *DynamoCalls) add(op string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[op]++
}

// countingDoer counts the HTTP requests sent, by the operation their
// X-Amz-Target header names.
type countingDoer struct {
	next  dynamodb.HTTPClient
	calls *DynamoCalls
}

func (d countingDoer) Do(r *http.Request) (*http.Response, error) {
	op := r.Header.Get("X-Amz-Target")
	if i := strings.LastIndexByte(op, '.'); i >= 0 {
		op = op[i+1:]
	}
	d.calls.add(op)
	return d.next.Do(r)
}
