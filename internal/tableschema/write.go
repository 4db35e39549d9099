package tableschema

import (
	"errors"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The conditional writes of the stores in the table (API keys, API
// idempotency records, rate windows, callback dedup records) are built
// here, the same way for all: the item encoded with attributevalue, the
// condition with expression, and the item in the way returned when the
// condition fails (ConditionFailed).

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

// UpdateIf returns the UpdateItem of the item whose partition key is pk
// in table: update, if cond holds.
func UpdateIf(table, pk string, update expression.UpdateBuilder, cond expression.ConditionBuilder) (*dynamodb.UpdateItemInput, error) {
	expr, err := expression.NewBuilder().WithUpdate(update).WithCondition(cond).Build()
	if err != nil {
		return nil, err
	}
	return &dynamodb.UpdateItemInput{
		TableName: aws.String(table), Key: Key(pk),
		UpdateExpression: expr.Update(), ConditionExpression: expr.Condition(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}, nil
}

// DeleteIf returns the DeleteItem of the item whose partition key is pk in
// table, if cond holds.
func DeleteIf(table, pk string, cond expression.ConditionBuilder) (*dynamodb.DeleteItemInput, error) {
	expr, err := expression.NewBuilder().WithCondition(cond).Build()
	if err != nil {
		return nil, err
	}
	return &dynamodb.DeleteItemInput{
		TableName: aws.String(table), Key: Key(pk),
		ConditionExpression: expr.Condition(), ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
	}, nil
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
