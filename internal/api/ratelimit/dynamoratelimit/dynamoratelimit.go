// Package dynamoratelimit is the ratelimit.Windows of the one sendonce
// DynamoDB table (package tableschema): one item per window, pk
// "rate#<window id>", incremented with one conditional UpdateItem (ADD,
// allowed while the count is below the limit), with its TTL at the
// window's expiry. It passes package ratelimittest's suite against
// DynamoDB Local.
package dynamoratelimit

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"

	"github.com/sendonce/sendonce/internal/api/ratelimit"
	"github.com/sendonce/sendonce/internal/tableschema"
)

// API is the part of the DynamoDB client Windows uses.
type API interface {
	tableschema.UpdateAPI
}

// Windows keeps rate windows in the one sendonce table. It is safe for
// concurrent use.
type Windows struct {
	db    API
	table string
}

var _ ratelimit.Windows = (*Windows)(nil)

// New returns the Windows on table through db.
func New(db API, table string) *Windows {
	return &Windows{db: db, table: table}
}

// Add implements ratelimit.Windows.
func (d *Windows) Add(ctx context.Context, id string, limit int, expires time.Time) (bool, error) {
	count := expression.Name("count")
	err := tableschema.Update(ctx, d.db, d.table, "rate#"+id,
		expression.Add(count, expression.Value(1)).Set(expression.Name(tableschema.TTLAttribute), expression.Value(expires.Unix())),
		expression.AttributeNotExists(count).Or(count.LessThan(expression.Value(limit))))
	if _, ok := tableschema.ConditionFailed(err); ok {
		return false, nil
	}
	return err == nil, err
}
