package dynamotemplates_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sendonce/sendonce/internal/templates"
	"github.com/sendonce/sendonce/internal/templates/dynamotemplates"
	"github.com/sendonce/sendonce/internal/templates/templatestest"
	"github.com/sendonce/sendonce/internal/testenv"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	c := testenv.DynamoDB(t)
	templatestest.Run(t, func(t *testing.T, now func() time.Time) templates.Store {
		return dynamotemplates.New(c, testenv.NewTable(t, c), dynamotemplates.Config{Now: now})
	})
}

// TestItemsUnderTheirPrefix checks that every item a put writes is under
// "tpl#<tenant>" and carries no TTL (templates do not expire).
func TestItemsUnderTheirPrefix(t *testing.T) {
	t.Parallel()
	c := testenv.DynamoDB(t)
	table := testenv.NewTable(t, c)
	s := dynamotemplates.New(c, table, dynamotemplates.Config{})
	ctx := context.Background()
	if _, err := s.Put(ctx, templates.Template{ID: templates.ID{Tenant: "acme", Name: "n", Channel: "sms", Locale: "pt-BR"}, Text: "oi"}); err != nil {
		t.Fatal(err)
	}
	out, err := c.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatal(err)
	}
	var pks []string
	for _, it := range out.Items {
		pk := it["pk"].(*types.AttributeValueMemberS).Value
		pks = append(pks, pk)
		if !strings.HasPrefix(pk, "tpl#acme") {
			t.Errorf("item %q is not under tpl#acme", pk)
		}
		if _, ok := it["expires_at"]; ok {
			t.Errorf("item %q has a TTL", pk)
		}
		// The attribute types items written by earlier releases have.
		if pk == "tpl#acme" {
			if _, ok := it["ids"].(*types.AttributeValueMemberSS); !ok {
				t.Errorf("index %q: ids is %T, want a string set", pk, it["ids"])
			}
			continue
		}
		_, v := it["version"].(*types.AttributeValueMemberN)
		_, c := it["created_at"].(*types.AttributeValueMemberN)
		l, _ := it["locale"].(*types.AttributeValueMemberS)
		if !v || !c || l == nil || l.Value != "pt-BR" {
			t.Errorf("item %q = %v: want numbers version and created_at, and its locale", pk, it)
		}
	}
	if len(pks) != 3 {
		t.Errorf("items = %q, want the index, the head and version 1", pks)
	}
}
