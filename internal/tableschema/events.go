package tableschema

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

// EventAPI is what EventKeys needs; *dynamodb.Client has it.
type EventAPI interface {
	dynamodb.QueryAPIClient
	dynamodb.ScanAPIClient
}

// EventQuery selects the items whose EventPK attribute equals Value.
type EventQuery struct {
	Table string
	// Value is the EventPK value, e.g. "<tenant>#<event id>".
	Value string
	// Scanning, if set, is called once, before the first Scan page, when
	// the table has no event index (so the caller can warn: a scan reads
	// and bills every item of the table).
	Scanning func()
	// ReturnConsumedCapacity and Consumed, if set, receive every page's
	// consumed capacity.
	ReturnConsumedCapacity types.ReturnConsumedCapacity
	Consumed               func(op string, cc *types.ConsumedCapacity)
	// PageLimit caps the items a Scan page reads (0: DynamoDB's 1 MB
	// pages); for tests of the pagination.
	PageLimit int32
}

// EventKeys returns the partition keys of the items of q.Table whose
// EventPK equals q.Value, sorted. It reads every page of a Query of the
// event index; when the table has no such index (DynamoDB answers the
// Query with a ValidationException naming it), every page of a Scan
// filtered on EventPK instead, the same items at a cost that grows with
// the table. Either way it reads keys only. It returns the DynamoDB error,
// wrapped with the operation.
func EventKeys(ctx context.Context, db EventAPI, q EventQuery) ([]string, error) {
	names := map[string]string{"#evt": EventPK, "#pk": PartitionKey}
	values := map[string]types.AttributeValue{":evt": &types.AttributeValueMemberS{Value: q.Value}}
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(q.Table),
		IndexName:                 aws.String(EventIndex),
		KeyConditionExpression:    aws.String("#evt = :evt"),
		ProjectionExpression:      aws.String("#pk"),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
		ReturnConsumedCapacity:    q.ReturnConsumedCapacity,
	}
	var keys []string
	for {
		out, err := db.Query(ctx, in)
		if isMissingIndex(err) && in.ExclusiveStartKey == nil {
			return scanEvent(ctx, db, q, names, values)
		}
		if err != nil {
			return nil, fmt.Errorf("query index %s: %w", EventIndex, err)
		}
		q.report("event query", out.ConsumedCapacity)
		keys = appendKeys(keys, out.Items)
		if len(out.LastEvaluatedKey) == 0 {
			break
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
	sort.Strings(keys)
	return keys, nil
}

func scanEvent(ctx context.Context, db EventAPI, q EventQuery, names map[string]string, values map[string]types.AttributeValue) ([]string, error) {
	if q.Scanning != nil {
		q.Scanning()
	}
	in := &dynamodb.ScanInput{
		TableName:                 aws.String(q.Table),
		FilterExpression:          aws.String("#evt = :evt"),
		ProjectionExpression:      aws.String("#pk"),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
		ReturnConsumedCapacity:    q.ReturnConsumedCapacity,
	}
	if q.PageLimit > 0 {
		in.Limit = aws.Int32(q.PageLimit)
	}
	var keys []string
	for p := dynamodb.NewScanPaginator(db, in); p.HasMorePages(); {
		out, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("scan for %s: %w", EventPK, err)
		}
		q.report("event scan", out.ConsumedCapacity)
		keys = appendKeys(keys, out.Items)
	}
	sort.Strings(keys)
	return keys, nil
}

func (q EventQuery) report(op string, cc *types.ConsumedCapacity) {
	if q.Consumed != nil && cc != nil {
		q.Consumed(op, cc)
	}
}

// appendKeys appends the partition key of every item to keys.
func appendKeys(keys []string, items []map[string]types.AttributeValue) []string {
	for _, item := range items {
		if pk, ok := item[PartitionKey].(*types.AttributeValueMemberS); ok {
			keys = append(keys, pk.Value)
		}
	}
	return keys
}

// isMissingIndex reports whether err is DynamoDB's answer to a Query of an
// index the table does not have: a ValidationException whose message
// says "does not have the specified index" (DynamoDB and DynamoDB Local
// word it the same way).
func isMissingIndex(err error) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == "ValidationException" &&
		strings.Contains(ae.ErrorMessage(), "does not have the specified index")
}
