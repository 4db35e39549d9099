package infra

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"

	"github.com/sendonce/sendonce/internal/tableschema"
)

// CheckTableSchema returns an error matching ErrInvariant unless every
// DynamoDB table of the template (the single-Region and the global one)
// declares the attributes, keys and indexes (in the same order), the
// billing mode and the TTL attribute of package tableschema, which the code
// and create-tables use, and no local index, both with EventIndex false
// and true: the event index and its attribute exist only under the
// condition that parameter sets (only false in a template without that
// parameter, template.yaml, which fixes it at its default).
func (t *Template) CheckTableSchema() error {
	ons := []bool{false, true}
	if t.Parameters["EventIndex"] == nil {
		ons = []bool{false} // a variant that fixes EventIndex at its default
	}
	for _, on := range ons {
		if err := t.checkTableSchema(on); err != nil {
			return err
		}
	}
	return nil
}

func (t *Template) checkTableSchema(on bool) error {
	// The SDK's field names are CloudFormation's property names.
	data, err := json.Marshal(tableschema.CreateTableInput("ledger", tableschema.WithEventIndex(on)))
	if err != nil {
		return err
	}
	var want map[string]any
	if err := json.Unmarshal(data, &want); err != nil {
		return err
	}
	want = dropNulls(want).(map[string]any)
	p := t.Defaults().With("EventIndex", strconv.FormatBool(on))
	tables := 0
	for _, name := range slices.Sorted(maps.Keys(t.Resources)) {
		if typ := t.Resources[name]["Type"]; typ != "AWS::DynamoDB::Table" && typ != "AWS::DynamoDB::GlobalTable" {
			continue
		}
		tables++
		pr := mapOf(t.Resources[name]["Properties"])
		for _, k := range []string{"AttributeDefinitions", "KeySchema", "GlobalSecondaryIndexes", "BillingMode", "LocalSecondaryIndexes"} {
			got, err := t.Resolve(pr[k], p, nil)
			if err != nil {
				return fmt.Errorf("%s: %s: %w", name, k, err)
			}
			if !reflect.DeepEqual(got, want[k]) {
				return fmt.Errorf("%w: %s: %s with EventIndex=%t is %v, want %v (package tableschema)", ErrInvariant, name, k, on, got, want[k])
			}
		}
		if ttl := mapOf(pr["TimeToLiveSpecification"])["AttributeName"]; ttl != tableschema.TTLAttribute {
			return fmt.Errorf("%w: %s: TTL attribute %v, want %s", ErrInvariant, name, ttl, tableschema.TTLAttribute)
		}
	}
	if tables == 0 {
		return fmt.Errorf("%w: no DynamoDB table", ErrInvariant)
	}
	return nil
}

// dropNulls removes the null members of JSON objects in v.
func dropNulls(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if e == nil {
				delete(x, k)
			} else {
				x[k] = dropNulls(e)
			}
		}
	case []any:
		for i, e := range x {
			x[i] = dropNulls(e)
		}
	}
	return v
}
