// Package tableschema is the one source of truth for the sendonce table:
// its key, attention index, optional event index and TTL attribute. The CLI's create-tables uses
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
//	pace#<provider>#<second>    a provider's shared send-rate counter (package pace)
//	pmid#<provider>#<id>        the key a provider message id belongs to (ledger.OwnerIndex)
//	ops#providers, ops#reconcile  what `sendonce status` reads (package opstate)
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
	// EventIndex is the optional KEYS_ONLY GSI that finds every ledger
	// row of one business event (the support lookup); see WithEventIndex
	// and EventKeys.
	EventIndex = "event"
	// EventPK is the event index's partition key: "<tenant>#<event id>",
	// written once by the claim and never changed, so the index, where the
	// table has it, costs one index write per message and nothing on later
	// transitions. Items carry it whether or not the table has the index
	// (a table can gain the index later). API key items carry
	// "#apikey#<tenant>" in it (package apikey's List).
	EventPK = "evt_pk"
)

// Option changes the table CreateTableInput defines.
type Option func(*options)

type options struct{ eventIndex bool }

// WithEventIndex adds (on true) the event index and its EventPK attribute
// definition, as template.yaml's EventIndex parameter does. Without it the
// table has the attention index only: the default, because the event
// index costs one more write unit per message (every claim writes an
// entry), and EventKeys finds the same items with a scan instead.
func WithEventIndex(on bool) Option { return func(o *options) { o.eventIndex = on } }

// CreateTableInput returns the definition of table name: on-demand billing,
// the string partition key, the attention index projecting all attributes
// and, WithEventIndex(true), the event index projecting keys only. TTL is
// enabled separately (UpdateTimeToLive on TTLAttribute).
func CreateTableInput(name string, opts ...Option) *dynamodb.CreateTableInput {
	var o options
	for _, f := range opts {
		f(&o)
	}
	in := &dynamodb.CreateTableInput{
		TableName:   aws.String(name),
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(PartitionKey), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(AttentionPK), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(AttentionSK), AttributeType: types.ScalarAttributeTypeS},
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
		}},
	}
	if o.eventIndex {
		in.AttributeDefinitions = append(in.AttributeDefinitions,
			types.AttributeDefinition{AttributeName: aws.String(EventPK), AttributeType: types.ScalarAttributeTypeS})
		in.GlobalSecondaryIndexes = append(in.GlobalSecondaryIndexes, types.GlobalSecondaryIndex{
			IndexName: aws.String(EventIndex),
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String(EventPK), KeyType: types.KeyTypeHash},
			},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly},
		})
	}
	return in
}
