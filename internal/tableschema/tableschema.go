// Package tableschema is the one source of truth for the sendonce table:
// its key, attention index and TTL attribute. The CLI's create-tables uses
// it, and a test checks that template.yaml declares the same schema.
//
// Every record lives in this one table (README.md, Configuration), told apart by the
// partition key's prefix:
//
//	v1_<64 hex>                 ledger row (package dynamoledger)
//	cb#<provider>#<event id>    callback dedup record (package webhook)
//	apikey#<key id>             API key (package apikey)
//	idem#<tenant>#<key hash>    API idempotency record (package idempotency)
//	rate#...                    API rate-limit window (package api)
//	tpl#<tenant>[#...]          message templates (package dynamotemplates)
package tableschema

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Attribute and index names.
const (
	// PartitionKey is the table's only key attribute (string).
	PartitionKey = "pk"
	// TTLAttribute holds each item's expiry in Unix seconds; the table's
	// TTL is enabled on it. Conditions treat an item past it as absent.
	TTLAttribute = "expires_at"
	// AttentionIndex is the sparse GSI of rows that need attention.
	AttentionIndex = "attention"
	// AttentionPK is the attention index's partition key: "attn#NN", the
	// row's shard. Present only on rows that need attention.
	AttentionPK = "attn_pk"
	// AttentionSK is the attention index's sort key: when the row is due,
	// as a fixed-width, lexically ordered UTC timestamp.
	AttentionSK = "attn_sk"
	// EventIndex is the KEYS_ONLY GSI that finds every ledger row of one
	// business event (the support lookup).
	EventIndex = "event"
	// EventPK is the event index's partition key: "<tenant>#<event id>",
	// written once by the claim and never changed, so the index costs one
	// index write per message and nothing on later transitions. API key
	// items carry "#apikey#<tenant>" in it (package apikey's List).
	EventPK = "evt_pk"
)

// CreateTableInput returns the definition of table name: on-demand billing,
// the string partition key, the attention index projecting all attributes
// and the event index projecting keys only. TTL is enabled separately (UpdateTimeToLive on TTLAttribute).
func CreateTableInput(name string) *dynamodb.CreateTableInput {
	return &dynamodb.CreateTableInput{
		TableName:   aws.String(name),
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(PartitionKey), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(AttentionPK), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(AttentionSK), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(EventPK), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(PartitionKey), KeyType: types.KeyTypeHash},
		},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{
			IndexName: aws.String(AttentionIndex),
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String(AttentionPK), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String(AttentionSK), KeyType: types.KeyTypeRange},
			},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll},
		}, {
			IndexName: aws.String(EventIndex),
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String(EventPK), KeyType: types.KeyTypeHash},
			},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly},
		}},
	}
}
