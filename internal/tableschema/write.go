package tableschema

import (
	"context"
	"errors"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The conditional writes of the stores in the table (API keys, API
// idempotency records, rate windows, callback dedup records, templates)
// are built here, the same way for all: the item encoded with
// attributevalue, the condition with expression, and the item in the way
// returned when the condition fails (ConditionFailed).

// GetAPI, PutAPI, UpdateAPI and DeleteAPI are single calls of
// *dynamodb.Client: those Put, Update and Delete make, and the read of
// one item. A store's client interface embeds those it uses.
type (
	GetAPI interface {
		GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	}
	PutAPI interface {
		PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	}
	UpdateAPI interface {
		UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	}
	DeleteAPI interface {
		DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	}
)

// PutIf returns the PutItem of item, encoded with
// attributevalue.MarshalMap, into table if cond holds. It returns an
// error if item does not encode.
func PutIf(table string, item any, cond expression.ConditionBuilder) (*dynamodb.PutItemInput, error) {
	av, err := attributevalue.MarshalMap(item)
	if err != nil {
		return nil, err
	}
	expr, err := expression.NewBuilder().WithCondition(cond).Build()
	if err != nil {
		return nil, err
	}
	return &dynamodb.PutItemInput{
		TableName: aws.String(table), Item: av,
		ConditionExpression: expr.Condition(), ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}, nil
}

// Put puts item into table through db if cond holds (PutIf).
func Put(ctx context.Context, db PutAPI, table string, item any, cond expression.ConditionBuilder) error {
	in, err := PutIf(table, item, cond)
	if err == nil {
		_, err = db.PutItem(ctx, in)
	}
	return err
}

// Update applies update to the item whose partition key is pk in table
// through db, if cond holds.
func Update(ctx context.Context, db UpdateAPI, table, pk string, update expression.UpdateBuilder, cond expression.ConditionBuilder) error {
	expr, err := expression.NewBuilder().WithUpdate(update).WithCondition(cond).Build()
	if err != nil {
		return err
	}
	_, err = db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(table), Key: Key(pk),
		UpdateExpression: expr.Update(), ConditionExpression: expr.Condition(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	return err
}

// Delete deletes the item whose partition key is pk in table through db,
// if cond holds.
func Delete(ctx context.Context, db DeleteAPI, table, pk string, cond expression.ConditionBuilder) error {
	expr, err := expression.NewBuilder().WithCondition(cond).Build()
	if err != nil {
		return err
	}
	_, err = db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: aws.String(table), Key: Key(pk),
		ConditionExpression: expr.Condition(), ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
	})
	return err
}

// ConditionFailed reports whether err is the failed condition of a write,
// and returns the item in the way (nil when there was none).
func ConditionFailed(err error) (map[string]types.AttributeValue, bool) {
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		return nil, false
	}
	return ccf.Item, true
}
