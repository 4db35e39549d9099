package tableschema

import (
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Key returns the key of the item whose partition key is pk.
func Key(pk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{PartitionKey: &types.AttributeValueMemberS{Value: pk}}
}

// Vacant is the condition of a create: no live item holds the key, because
// there is none or its TTL has passed at now (DynamoDB deletes expired
// items late, so an expired item must count as absent).
func Vacant(now time.Time) expression.ConditionBuilder {
	return expression.AttributeNotExists(expression.Name(PartitionKey)).
		Or(expression.Name(TTLAttribute).LessThanEqual(expression.Value(now.Unix())))
}
