package dynamoapikey_test

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sendonce/sendonce/internal/apikey"
	"github.com/sendonce/sendonce/internal/apikey/apikeytest"
	"github.com/sendonce/sendonce/internal/apikey/dynamoapikey"
	"github.com/sendonce/sendonce/internal/tableschema"
	"github.com/sendonce/sendonce/internal/testenv"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	db := testenv.DynamoDB(t)
	apikeytest.Run(t, func(t *testing.T) apikey.Records { return dynamoapikey.New(db, testenv.NewTable(t, db)) })
}

// TestStoredItem checks the key's item in the one table: the hash, never
// the key; the list index key; no TTL.
func TestStoredItem(t *testing.T) {
	t.Parallel()
	db := testenv.DynamoDB(t)
	table := testenv.NewTable(t, db)
	id, key, err := apikey.New(dynamoapikey.New(db, table), apikey.Config{}).Create(t.Context(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	out, err := db.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: aws.String(table), Key: tableschema.Key("apikey#" + id)})
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range out.Item {
		if s, ok := v.(*types.AttributeValueMemberS); ok && strings.Contains(s.Value, key[len("so_")+17:]) {
			t.Errorf("attribute %s holds the secret", name)
		}
	}
	if ev, _ := out.Item[tableschema.EventPK].(*types.AttributeValueMemberS); ev == nil || ev.Value != "#apikey#acme" {
		t.Errorf("%s = %v, want #apikey#acme", tableschema.EventPK, out.Item[tableschema.EventPK])
	}
	if _, ok := out.Item[tableschema.TTLAttribute]; ok {
		t.Errorf("a key item has a TTL")
	}
}
