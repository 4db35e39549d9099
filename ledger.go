package sendonce

import (
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/ledger/dynamoledger"
	"github.com/sendonce/sendonce/internal/ledger/memledger"
	"github.com/sendonce/sendonce/internal/tableschema"
	"github.com/sendonce/sendonce/internal/templates"
	"github.com/sendonce/sendonce/internal/templates/dynamotemplates"
	"github.com/sendonce/sendonce/internal/templates/memtemplates"
)

// DefaultRetention is how long a ledger row is kept after its last write
// unless NewDynamoLedger is given another retention.
const DefaultRetention = dynamoledger.DefaultRetention

// Ledger is the send ledger: one row per message key, claimed before the
// provider is called. It also holds the tenants' stored templates, which
// a Sender and a Reconciler render from. It is safe for concurrent use.
type Ledger struct {
	rows      ledger.Ledger
	templates templates.Store
	// db and table are set for a ledger on DynamoDB (Callbacks keep their
	// dedup records in the same table).
	db    *dynamodb.Client
	table string
}

// NewDynamoLedger returns the ledger in the DynamoDB table named table,
// whose rows live for retention after their last write (DefaultRetention
// when zero). The table has the layout TableInput describes, created by
// the SAM template, by `sendonce create-tables`, or by the program itself.
func NewDynamoLedger(db *dynamodb.Client, table string, retention time.Duration) (*Ledger, error) {
	if retention == 0 {
		retention = DefaultRetention
	}
	rows, err := dynamoledger.New(db, table, dynamoledger.Config{Retention: retention})
	if err != nil {
		return nil, fmt.Errorf("sendonce: open ledger %s: %w", table, err)
	}
	return &Ledger{rows: rows, templates: dynamotemplates.New(db, table, dynamotemplates.Config{}), db: db, table: table}, nil
}

// NewMemoryLedger returns a ledger held in memory, with its templates
// (PutTemplate): for tests and examples of code that drives a Sender. It
// passes the same conformance suite as the DynamoDB ledger, but it lives
// only as long as the process.
func NewMemoryLedger() *Ledger {
	return &Ledger{rows: memledger.New(memledger.Config{}), templates: memtemplates.New(memtemplates.Config{})}
}

// TableInput describes the table a DynamoDB ledger lives in, with its
// keys, its time to live and the attention index the reconciler reads: a
// program that creates its own table passes it to DynamoDB's CreateTable
// (then waits for the table to be active and enables time to live on
// TTLAttribute).
func TableInput(name string) *dynamodb.CreateTableInput {
	return tableschema.CreateTableInput(name)
}

// TTLAttribute is the attribute holding each item's expiry, in Unix
// seconds, on which a program that creates its own table enables
// DynamoDB's time to live.
const TTLAttribute = tableschema.TTLAttribute
